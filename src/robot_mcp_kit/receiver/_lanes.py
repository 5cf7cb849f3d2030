"""Handing each task's updates to the handler: one lane per task, one update at a time.

A task's lane runs while the task has a head (:meth:`TaskRecord.head
<robot_mcp_kit.receiver._state.TaskRecord.head>`): it builds the :class:`TaskUpdate`,
awaits the handler and, once the handler returns, commits the task's cursor before the
next update. Lanes of different tasks run side by side, at most ``max_concurrent`` at
once. An event of a type this kit does not know is passed over: committed, never handed
over.

When the handler raises, the update stays at its task's head and is handed over again
(``redelivered``, ``attempt`` + 1) after a pause that doubles from ``retry_first_s`` to
``retry_max_s``; the task's later updates wait, other tasks go on. With
``give_up_after=N`` an update whose handler raised N times is passed over (ERROR
``handler_gave_up``, counted in ``given_up``). A lane stopped by :meth:`Lanes.aclose`
while its handler runs leaves the update uncommitted: the next start hands it over again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from robot_mcp_kit.log import get_logger
from robot_mcp_kit.receiver._state import (
    Final,
    Item,
    Pending,
    ReceiverState,
    Skip,
    TaskRecord,
)
from robot_mcp_kit.receiver._stats import Counters
from robot_mcp_kit.receiver._updates import Handler, TaskUpdate, UpdateKind
from robot_mcp_kit.telemetry import continued_span, set_attributes
from robot_mcp_kit.telemetry import record as record_metric

__all__ = ["Lanes"]

_log = get_logger("robot_mcp_kit.receiver")


def _update_of(record: TaskRecord, item: Item, attempt: int) -> TaskUpdate | None:
    """The update ``item`` hands over; None for an event passed over unseen.

    ``redelivered`` when the handler raised on it before, when it is an event the last
    process may have been handing over as it died (``maybe_seen``), and for a GAP, STATE
    or LOST handed over first after a start that loaded the task (``resumed``): one of
    those may have been handed over, its cursor not yet written, by the last process.
    """
    if isinstance(item, Pending):
        if item.event is None:
            return None
        return TaskUpdate(
            kind=UpdateKind.EVENT,
            server=record.server,
            task_id=record.task_id,
            seq=item.seq,
            event=item.event,
            source=item.source,
            redelivered=item.maybe_seen or attempt > 1,
            attempt=attempt,
        )
    if isinstance(item, Skip):
        return TaskUpdate(
            kind=UpdateKind.GAP,
            server=record.server,
            task_id=record.task_id,
            seq=item.last,
            missing=(item.first, item.last),
            source=item.source,
            redelivered=attempt > 1 or record.resumed,
            attempt=attempt,
        )
    return TaskUpdate(
        kind=item.kind,
        server=record.server,
        task_id=record.task_id,
        seq=record.delivered_seq,
        info=item.info,
        source=item.source,
        redelivered=attempt > 1 or record.resumed,
        attempt=attempt,
    )


class Lanes:
    """The lanes of one receiver. Use from its event loop only.

    Args:
        state: the tasks and their waiting events.
        handler: the brain's handler.
        counters: where deliveries and failures are counted.
        on_blocked: called with a task whose lane stopped at a gap (to repair it).
        max_concurrent: handler calls at once, over all tasks.
        retry_first_s, retry_max_s: the pause after a handler failure, doubling.
        give_up_after: pass over an update after this many failures (None: never).
        clock: unix seconds, for the cursor's ``updated_at``.
    """

    def __init__(
        self,
        state: ReceiverState,
        handler: Handler,
        counters: Counters,
        *,
        on_blocked: Callable[[TaskRecord], None],
        max_concurrent: int = 16,
        retry_first_s: float = 0.5,
        retry_max_s: float = 30.0,
        give_up_after: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._state = state
        self._handler = handler
        self._counters = counters
        self._on_blocked = on_blocked
        self._slots = asyncio.Semaphore(max_concurrent)
        self._retry_first_s = retry_first_s
        self._retry_max_s = retry_max_s
        self._give_up_after = give_up_after
        self._clock = clock
        self._running: set[asyncio.Task[None]] = set()
        self._closing = False
        self.commit_failures = 0

    def __repr__(self) -> str:
        return f"<Lanes running={len(self._running)} closing={self._closing}>"

    @property
    def running(self) -> int:
        """Lanes handing updates over now."""
        return len(self._running)

    def wake(self, record: TaskRecord) -> None:
        """Start ``record``'s lane if it has a head and none runs; else note a gap."""
        if record.busy or self._closing:
            return
        if record.head() is None:
            if record.missing() is not None:
                self._on_blocked(record)
            else:
                self._state.forget_if_idle(record)
            return
        record.busy = True
        task = asyncio.get_running_loop().create_task(
            self._run(record), name=f"receiver lane {record.server}/{record.task_id}"
        )
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _run(self, record: TaskRecord) -> None:
        try:
            async with self._slots:
                while not self._closing:
                    item = record.head()
                    if item is None:
                        break
                    # Hand over only once the task's last cursor is in the file.
                    if not await self._durable(record):
                        return
                    if not await self._hand_over(record, item):
                        return
                    self._commit(record, item)
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug here must not end the lane silently
            _log.exception("receiver_lane_failed", server=record.server, task_id=record.task_id)
        finally:
            record.busy = False
        if not self._closing:
            if record.missing() is not None:
                self._on_blocked(record)
            elif record.head() is not None:
                self.wake(record)  # work that arrived as the lane was ending
            else:
                self._state.forget_if_idle(record)

    async def _durable(self, record: TaskRecord) -> bool:
        """Wait until the task's cursor is in the file (True), retrying a write that fails
        (a full disk: the task waits, its next update is not handed over yet), or until the
        lanes close (False)."""
        pause = self._retry_first_s
        while True:
            try:
                await self._state.durable(record)
                return True
            except Exception as exc:
                self.commit_failures += 1
                _log.error(
                    "receiver_cursor_unwritten",
                    server=record.server,
                    task_id=record.task_id,
                    error=type(exc).__name__,
                    retry_in_s=pause,
                )
            if not await self._pause(pause):
                return False
            pause = min(self._retry_max_s, pause * 2)

    def _commit(self, record: TaskRecord, item: Item) -> None:
        """Move the task's cursor (written with the store's next commit)."""
        record.resumed = False
        self._state.commit(record, item, self._clock())
        if isinstance(item, Skip):
            self._counters.add("gaps")
        elif isinstance(item, Final):
            self._counters.add("lost" if item.kind is UpdateKind.LOST else "states")

    async def _hand_over(self, record: TaskRecord, item: Item) -> bool:
        """Call the handler until it returns (True), or the lanes close (False)."""
        attempt = 1
        while True:
            update = _update_of(record, item, attempt)
            if update is None:  # an unknown type: counted as ignored when it arrived
                return True
            parent = item.traceparent if isinstance(item, Pending) else None
            started = time.perf_counter()
            outcome = "ok"
            try:
                with continued_span(
                    "receiver.deliver",
                    (parent, "") if parent else None,
                    {
                        "robot_mcp.server": update.server,
                        "robot_mcp.task.id": update.task_id,
                        "robot_mcp.event.seq": update.seq,
                        "robot_mcp.update.kind": update.kind.value,
                        "robot_mcp.update.source": update.source,
                        "robot_mcp.update.attempt": attempt,
                    },
                ) as current:
                    await self._handler(update)
                    if current is not None:
                        set_attributes(current, **{"robot_mcp.update.outcome": "ok"})
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                outcome = "failed"
                self._counters.add("handler_failures")
                if self._give_up_after is not None and attempt >= self._give_up_after:
                    _log.error(
                        "handler_gave_up",
                        update=update.describe(),
                        key=update.key,
                        attempts=attempt,
                        error=type(exc).__name__,
                    )
                    self._counters.add("given_up")
                    return True
                pause = min(self._retry_max_s, self._retry_first_s * 2 ** (attempt - 1))
                _log.error(
                    "handler_failed",
                    update=update.describe(),
                    key=update.key,
                    attempt=attempt,
                    retry_in_s=pause,
                    error=type(exc).__name__,
                    exc_info=True,
                )
                if not await self._pause(pause):
                    return False
                attempt += 1
                continue
            finally:
                record_metric(
                    "robot_mcp.receiver.handler.duration",
                    time.perf_counter() - started,
                    {"robot_mcp.update.kind": update.kind.value, "outcome": outcome},
                )
            self._counters.add("delivered")
            return True

    async def _pause(self, seconds: float) -> bool:
        """Sleep ``seconds`` unless the lanes close first (False)."""
        deadline = time.monotonic() + seconds
        while not self._closing:
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            await asyncio.sleep(min(left, 0.1))
        return False

    async def aclose(self, grace_s: float = 5.0) -> None:
        """Stop: no new handler call; calls under way get ``grace_s``, then are cancelled."""
        self._closing = True
        running = list(self._running)
        if running:
            _done, pending = await asyncio.wait(running, timeout=grace_s)
            for task in pending:
                task.cancel()
            if pending:
                with contextlib.suppress(Exception):
                    await asyncio.gather(*pending, return_exceptions=True)
                _log.warning("receiver_handlers_cancelled", count=len(pending))
