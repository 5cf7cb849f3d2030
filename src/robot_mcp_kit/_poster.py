"""The :class:`EventPoster`: a bounded queue with one lane per task, delivered side by side.

One class, its state set in its own ``__init__``. It composes a :class:`Delivery` (one
event's signed attempts, the HTTP client) and a backlog strategy (:class:`MemoryBacklog`,
or :class:`DurableBacklog`, the owner of the outbox file). The contracts are in
:mod:`robot_mcp_kit.events`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

import httpx

from robot_mcp_kit._backlog import Backlog, DurableBacklog, MemoryBacklog, QueuedEvent
from robot_mcp_kit._delivery import Delivery
from robot_mcp_kit._exceptions import ConfigurationError
from robot_mcp_kit._outbox import ENV_OUTBOX
from robot_mcp_kit._retry import Clock, RetryPolicy, SystemClock
from robot_mcp_kit._task_journal import TaskJournal
from robot_mcp_kit.log import get_logger
from robot_mcp_kit.models import TaskEvent
from robot_mcp_kit.telemetry import observe, trace_headers

__all__ = ["ENV_CALLBACK_URL", "ENV_EVENT_SECRET", "EventPoster", "PosterStats"]

ENV_CALLBACK_URL: Final = "RVC_CALLBACK_URL"
ENV_EVENT_SECRET: Final = "RVC_EVENT_SECRET"  # noqa: S105 - the variable's name, not a secret

_log = get_logger("robot_mcp_kit.events")


@dataclass(frozen=True)
class PosterStats:
    """Counters of one poster, read through :attr:`EventPoster.stats`.

    Attributes:
        posted: events accepted by ``post()`` onto the queue.
        sent: events a receiver acknowledged with a 2xx.
        retried: attempts beyond the first, over all events.
        dropped: events lost without exhausting their retries: pushed out of a full
            queue, posted after ``aclose()``, unserializable, or still undelivered when
            the close grace ran out (without an outbox, or with one that could not be
            written).
        queued: events accepted and not yet acknowledged or lost (waiting + in flight).
        given_up: events lost after the retry cap (10 minutes of failed attempts).
        refused: events a receiver refused at least once with a status that retrying the
            same request rarely fixes (400, 401, 403, 404, 405, 410, 413, 415, 422); they
            are retried all the same, and the first refusal is logged (``event_refused``).
        kept: events still undelivered when ``aclose()`` ended, left in the durable
            outbox for the next start (always 0 without an outbox).
        recovered: events a poster found pending in its outbox file at start, from a
            previous process (always 0 without an outbox).
        outbox_write_failures: writes to the outbox file that failed (event rows,
            settlements, task rows, trims); always 0 without an outbox.
        outbox_unwritten: events accepted whose rows are not yet in the outbox file, sent
            or waiting (always 0 without an outbox).
        outbox_not_durable: events sent before their row was in the outbox file (the file
            could not be written, e.g. a full disk): delivery comes first. Until its row
            is written a crash loses such an event. Each is counted once; always 0
            without an outbox.
        outbox_written_late: of ``outbox_not_durable``, the events whose rows were written
            afterwards, once the file took them (durable again).
        outbox_rows_forgotten: rows of delivered or given-up events that were never
            written: while the file cannot be written, at most ``queue_max`` unwritten rows
            are kept in memory, and past that the oldest of delivered or given-up events
            are let go (a restart sends pending rows only, so nothing is resent or lost;
            the replay after a restart lacks them). Undelivered events' rows are never
            let go (the queue's own bound drops the oldest of those).
        outbox_failing: True while writes to the outbox file fail, from the first failure
            (one ERROR line, ``outbox_write_failing``) until a write succeeds (one WARNING
            line, ``outbox_write_recovered``).
    """

    sent: int = 0
    retried: int = 0
    dropped: int = 0
    queued: int = 0
    given_up: int = 0
    posted: int = 0
    kept: int = 0
    recovered: int = 0
    refused: int = 0
    outbox_write_failures: int = 0
    outbox_unwritten: int = 0
    outbox_failing: bool = False
    outbox_not_durable: int = 0
    outbox_written_late: int = 0
    outbox_rows_forgotten: int = 0


class EventPoster:
    """Posts :class:`~robot_mcp_kit.models.TaskEvent` s to ``RVC_CALLBACK_URL``, signed.

    Args:
        server_name: sent as ``X-RVC-Server``; the receiver looks the secret up by it.
        callback_url: the brain's events endpoint (http or https); defaults to
            ``$RVC_CALLBACK_URL``. Unset or empty: no-op mode.
        secret: the HMAC secret; defaults to ``$RVC_EVENT_SECRET``. Required with a URL.
            During a secret rotation, a list: ``X-RVC-Signature`` is made with the first
            (the new one), and ``webhook-signature`` carries one signature per secret.
        queue_max: the most events waiting to be sent, over all tasks; beyond it the
            oldest is dropped.
        close_grace_s: how long ``aclose()`` keeps delivering what is queued.
        retry: the retry schedule and give-up cap.
        clock: wall clock, monotonic clock and sleep; the system's by default.
        transport: the httpx transport to send through (tests pass a fake one).
        timeout_s: the deadline of one whole attempt, in real seconds: connecting,
            sending, and receiving the status line, the headers and the (at most
            64 KiB, 1 s) body read after them. An attempt that has no complete status
            and headers by then fails and is retried on the schedule; a 2xx status
            received in time is delivered whatever its body does. It is a wall-time
            bound on the event loop, not on ``clock``.
        outbox: the durable outbox's SQLite file (see :mod:`robot_mcp_kit.events`); defaults to
            ``$RVC_OUTBOX``; ``False`` turns it off whatever the environment says. Used
            only with a callback URL.
        outbox_delivered_tail: settled events kept in the outbox file beyond the pending
            ones (replay, ``get_task_events`` after a restart).
        standard_webhooks: also send the Standard Webhooks headers ``webhook-id`` (the
            event_id), ``webhook-timestamp`` and ``webhook-signature`` (see
            :mod:`robot_mcp_kit.signing`); the ``X-RVC-*`` headers are unchanged.
        max_in_flight: the most attempts under way at once. Each task's events go out one
            at a time in ``seq`` order; different tasks' events go out side by side, so a
            task whose event the receiver keeps refusing holds back only its own later
            events (see ``docs/delivery.md``).

    Raises:
        ConfigurationError: a URL without a secret, a URL that is not http(s), an empty
            or unprintable server name, or a non-positive bound.
        OutboxLocked: another process (or poster) holds the outbox file.
        robot_mcp_kit.store.StoreError: the outbox file cannot be opened: damaged
            (``StoreUnreadable``), written by a newer release (``SchemaTooNew``), ...
    """

    def __init__(
        self,
        server_name: str,
        callback_url: str | None = None,
        secret: str | Sequence[str] | None = None,
        *,
        queue_max: int = 10_000,
        close_grace_s: float = 5.0,
        retry: RetryPolicy | None = None,
        clock: Clock | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout_s: float = 10.0,
        outbox: str | os.PathLike[str] | Literal[False] | None = None,
        outbox_delivered_tail: int = 1_000,
        standard_webhooks: bool = False,
        max_in_flight: int = 4,
    ) -> None:
        if not server_name or not server_name.isprintable() or not server_name.isascii():
            raise ConfigurationError(
                f"EventPoster server_name must be non-empty printable ASCII (it is sent as "
                f"the X-RVC-Server header), got {server_name!r}."
            )
        if queue_max < 1:
            raise ConfigurationError(f"EventPoster queue_max must be >= 1, got {queue_max}.")
        if close_grace_s < 0:
            raise ConfigurationError(
                f"EventPoster close_grace_s must be >= 0, got {close_grace_s}."
            )
        if timeout_s <= 0:
            raise ConfigurationError(f"EventPoster timeout_s must be > 0, got {timeout_s}.")
        if max_in_flight < 1:
            raise ConfigurationError(
                f"EventPoster max_in_flight must be >= 1, got {max_in_flight}."
            )

        url = os.environ.get(ENV_CALLBACK_URL) if callback_url is None else callback_url
        url = (url or "").strip()
        self.server_name: Final = server_name
        self.callback_url: Final[str | None] = url or None
        self.standard_webhooks: Final = standard_webhooks
        secrets: tuple[str, ...] = ()
        if self.callback_url is not None:
            _check_url(self.callback_url)
            key = os.environ.get(ENV_EVENT_SECRET) if secret is None else secret
            keys = (key,) if isinstance(key, str) or key is None else tuple(key)
            if not keys or not all(isinstance(k, str) and k for k in keys):
                raise ConfigurationError(
                    f"EventPoster for server {server_name!r} has a callback URL "
                    f"({self.callback_url}) but no secret: set {ENV_EVENT_SECRET} "
                    f"(or pass secret=) to the HMAC secret shared with the brain, or unset "
                    f"{ENV_CALLBACK_URL} to run without posting events."
                )
            secrets = keys  # type: ignore[assignment]

        self.queue_max: Final = queue_max
        self.close_grace_s: Final = close_grace_s
        self.retry: Final = retry if retry is not None else RetryPolicy()
        self.timeout_s: Final = timeout_s
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._delivery = Delivery(
            server_name,
            self.callback_url or "",
            secrets or ("",),
            retry=self.retry,
            clock=self._clock,
            timeout_s=timeout_s,
            standard_webhooks=standard_webhooks,
            transport=transport,
        )

        self.max_in_flight: Final = max_in_flight
        # One lane per task with events waiting (per-task seq order); _waiting holds every
        # waiting event in acceptance order (the bound, the oldest to drop); _inflight the
        # one event per task being delivered; _runners the lane runner of each busy task.
        self._lanes: dict[str, deque[QueuedEvent]] = {}
        self._waiting: OrderedDict[str, QueuedEvent] = OrderedDict()
        self._inflight: dict[str, QueuedEvent] = {}
        self._runners: dict[str, asyncio.Task[None]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle: asyncio.Event | None = None
        self._slots: asyncio.Semaphore | None = None
        self._closed = False
        self._close_done: asyncio.Event | None = None
        self._close_deadline: float | None = None
        self._recovery_done = False

        self._posted = 0
        self._dropped = 0
        self._given_up = 0  # by a bug in the worker; the Delivery counts the cap's
        self._kept = 0
        self._recovered = 0

        self._backlog: Backlog = MemoryBacklog()
        path = os.environ.get(ENV_OUTBOX) if outbox is None else outbox
        if path is not False and path is not None and str(path).strip():
            if self.callback_url is None:
                _log.info(
                    "outbox_ignored",
                    server=server_name,
                    outbox=str(path),
                    reason="no-op mode (no callback URL)",
                )
            else:
                self._backlog = DurableBacklog(
                    path,
                    server_name=server_name,
                    queue_max=queue_max,
                    delivered_tail=outbox_delivered_tail,
                    adopt=self._adopt,
                    sleep=self._clock.sleep,
                )
        if self.callback_url is not None:
            _observe_poster(self)

    # -- public API -------------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        """True when events are sent; False in no-op mode (no callback URL)."""
        return self.callback_url is not None

    @property
    def outbox_path(self) -> Path | None:
        """The durable outbox's file, or None without one (see :mod:`robot_mcp_kit.events`)."""
        return self._backlog.path

    @property
    def journal(self) -> TaskJournal | None:
        """The task journal in the outbox file, or None without an outbox.

        A :class:`~robot_mcp_kit.tasks.TaskManager` built on this poster journals its
        tasks here by default. The poster owns the file and closes it in :meth:`aclose`.
        """
        return self._backlog.journal

    @property
    def stats(self) -> PosterStats:
        """A snapshot of the counters."""
        delivery = self._delivery
        return PosterStats(
            sent=delivery.sent,
            retried=delivery.retried,
            dropped=self._dropped,
            queued=self._queued(),
            given_up=delivery.given_up + self._given_up,
            posted=self._posted,
            kept=self._kept,
            recovered=self._recovered,
            refused=delivery.refused,
            outbox_write_failures=self._backlog.write_failures,
            outbox_unwritten=self._backlog.unwritten,
            outbox_failing=self._backlog.failing,
            outbox_not_durable=self._backlog.not_durable,
            outbox_written_late=self._backlog.written_late,
            outbox_rows_forgotten=self._backlog.forgotten,
        )

    async def post(self, event: TaskEvent) -> None:
        """Queue ``event`` for delivery and return at once. Never raises.

        In no-op mode the event is logged at DEBUG. After :meth:`aclose` it is logged
        and counted as dropped. When the queue is full the oldest waiting event is
        dropped (ERROR log, counted).
        """
        try:
            self._post(event)
        except Exception:  # post() never raises into the caller, whatever happens
            self._dropped += 1
            _log.exception(
                "event_dropped",
                server=self.server_name,
                event_id=getattr(event, "event_id", "?"),
                task_id=getattr(event, "task_id", "?"),
                seq=getattr(event, "seq", "?"),
                reason="the poster failed to queue it",
            )

    async def start(self) -> None:
        """Start delivering now: bind to the running loop and start the worker. Idempotent.

        Only needed with a durable outbox, so that events a previous process left pending
        go out before the first ``post()``; without one it just starts the worker early.
        Never raises (a failure is logged).
        """
        if not self.enabled or self._closed:
            return
        try:
            self._ensure_bound()
        except Exception:
            _log.exception("poster_start_failed", server=self.server_name)

    async def flush(self) -> None:
        """Wait until every event posted so far is acknowledged or lost.

        Returns at once in no-op mode, after :meth:`aclose`, or when nothing was posted.
        """
        if self._closed or self._idle is None or self._loop is not asyncio.get_running_loop():
            return
        while self._queued():
            if not self._runners:
                return
            await self._idle.wait()

    async def aclose(self) -> None:
        """Deliver what is queued for up to ``close_grace_s``, then stop. Idempotent.

        Whatever is still undelivered after the grace is kept in the durable outbox (sent
        by the next start) or, without one, dropped; either is counted and logged at
        WARNING (``poster_closed``). Rows the outbox file still lacks (a full disk) are
        written once more; an undelivered event whose row cannot be written then is
        dropped (ERROR ``outbox_events_lost``). Then the HTTP client and the outbox file
        are closed.
        """
        if self._closed:
            if self._close_done is not None and self._loop is asyncio.get_running_loop():
                await self._close_done.wait()
            return
        self._closed = True
        if not self.enabled:
            return
        same_loop = self._loop is asyncio.get_running_loop()
        self._close_done = asyncio.Event() if same_loop else None
        try:
            if self._runners and same_loop:
                self._close_deadline = self._clock.monotonic() + self.close_grace_s
                await self._drain_lanes()
            if same_loop:
                await self._delivery.aclose()
            else:
                self._delivery.reset()
        finally:
            try:
                if same_loop:
                    await self._backlog.stop()
                left = self._take_leftovers()
                if same_loop and self._backlog.path is not None:
                    lost = await asyncio.to_thread(self._backlog.keep, left)
                    await asyncio.to_thread(self._backlog.close)  # flushes the file
                else:
                    lost = self._backlog.keep(left)
                    self._backlog.close()
                self._log_leftovers(left, lost)
            finally:
                # Even when cancelled above: a concurrent aclose() waits on this.
                if self._close_done is not None:
                    self._close_done.set()
                if self._idle is not None and same_loop:
                    self._idle.set()

    async def _drain_lanes(self) -> None:
        """Let the lanes deliver for up to ``close_grace_s``, then cancel what still runs."""
        loop = asyncio.get_running_loop()
        end = loop.time() + self.close_grace_s
        try:
            while self._runners and (left := end - loop.time()) > 0:
                await asyncio.wait(list(self._runners.values()), timeout=left)
        finally:
            runners = list(self._runners.values())
            for runner in runners:
                runner.cancel()
            if runners:
                await asyncio.wait(runners)

    def close_unstarted(self) -> None:
        """Close the outbox file of a poster that never started (no loop needed).

        For a builder whose next step failed (:class:`~robot_mcp_kit.runtime.TaskRuntime`
        when its manager cannot be built). Nothing was posted, so nothing is dropped; the
        poster is closed afterwards. A poster that started is closed with :meth:`aclose`.
        """
        if self._loop is not None:
            raise RuntimeError("close_unstarted() on a started poster; await aclose()")
        self._closed = True
        self._backlog.close()

    def _take_leftovers(self) -> list[QueuedEvent]:
        """Empty the queue: the undelivered events, in flight first."""
        left = list(self._inflight.values()) + list(self._waiting.values())
        self._lanes.clear()
        self._waiting.clear()
        self._inflight.clear()
        return left

    def _log_leftovers(self, left: list[QueuedEvent], lost: list[QueuedEvent]) -> None:
        """Count and log what the close left: kept in the outbox, or dropped (``lost``)."""
        sent = self._delivery.sent
        path = self._backlog.path
        if not left:
            _log.info("poster_closed", server=self.server_name, sent=sent, undelivered=0)
            return
        if path is not None:
            lost_ids = {item.event_id for item in lost}
            kept = [item for item in left if item.event_id not in lost_ids]
            self._kept += len(kept)
            self._dropped += len(lost)
            first = (kept or lost)[0]
            _log.warning(
                "poster_closed",
                server=self.server_name,
                sent=sent,
                kept=len(kept),
                dropped=len(lost),  # logged at ERROR by the backlog (outbox_events_lost)
                outbox=str(path),
                first_event_id=first.event_id,
                first_task_id=first.task_id,
                first_seq=first.seq,
            )
            return
        self._dropped += len(left)
        first = left[0]
        _log.warning(
            "poster_closed",
            server=self.server_name,
            sent=sent,
            dropped=len(left),
            grace_s=self.close_grace_s,
            first_event_id=first.event_id,
            first_task_id=first.task_id,
            first_seq=first.seq,
            covered_by="the brain's reconciliation poll",
        )

    async def __aenter__(self) -> EventPoster:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        s = self.stats
        where = f"url={self.callback_url!r}" if self.enabled else "mode='no-op'"
        state = "closed" if self._closed else "open"
        outbox = ""
        if self._backlog.path is not None:
            health = "failing" if s.outbox_failing else "ok"
            outbox = (
                f", outbox={health!r}, outbox_write_failures={s.outbox_write_failures}, "
                f"outbox_unwritten={s.outbox_unwritten}, "
                f"outbox_not_durable={s.outbox_not_durable}"
            )
        return (
            f"EventPoster(server={self.server_name!r}, {where}, {state}, posted={s.posted}, "
            f"sent={s.sent}, retried={s.retried}, dropped={s.dropped}, "
            f"given_up={s.given_up}, queued={s.queued}{outbox})"
        )

    # -- internals --------------------------------------------------------------------

    def _post(self, event: TaskEvent) -> None:
        if not self.enabled:
            if _log.is_enabled_for(logging.DEBUG):
                _log.debug(
                    "event_not_sent",
                    server=self.server_name,
                    reason=f"no-op mode ({ENV_CALLBACK_URL} unset)",
                    event_id=event.event_id,
                    task_id=event.task_id,
                    seq=event.seq,
                    type=event.type,
                    body=event.model_dump_json(),
                )
            return
        if self._closed:
            self._dropped += 1
            _log.warning(
                "event_dropped",
                server=self.server_name,
                event_id=event.event_id,
                task_id=event.task_id,
                seq=event.seq,
                reason="posted after the poster was closed",
            )
            return
        item = QueuedEvent(
            event.event_id,
            event.task_id,
            event.seq,
            event.model_dump_json().encode(),
            trace=trace_headers(),  # the task's span: its webhooks carry that trace
        )
        self._ensure_bound()
        self._backlog.accept(item, self._clock.time())
        self._enqueue(item)

    def _ensure_bound(self) -> tuple[asyncio.Event, asyncio.Semaphore]:
        """Bind to the running loop (recovering once); return (idle, slots).

        When the loop changed (the old one stopped without :meth:`aclose`), the old lane
        runners are gone with it: each event they had in flight goes back to the head of
        its lane, and every lane gets a runner on the new loop.
        """
        loop = asyncio.get_running_loop()
        idle, slots = self._idle, self._slots
        if self._loop is not loop:
            if self._loop is not None:
                _log.warning(
                    "poster_loop_changed",
                    server=self.server_name,
                    reason="the old event loop stopped without aclose()",
                    queued=self._queued(),
                )
            self._loop = loop
            self._idle = idle = asyncio.Event()
            self._slots = slots = asyncio.Semaphore(self.max_in_flight)
            self._runners.clear()
            self._delivery.reset()
            inflight, self._inflight = self._inflight, {}
            for item in inflight.values():  # cancelled mid-send: resend first
                self._lanes.setdefault(item.task_id, deque()).appendleft(item)
                self._waiting[item.event_id] = item
                self._waiting.move_to_end(item.event_id, last=False)
            for task_id in list(self._lanes):
                self._kick(task_id)
        if idle is None or slots is None:  # pragma: no cover - set together just above
            raise RuntimeError("EventPoster loop state is inconsistent")
        if not self._recovery_done:
            self._recover()
        return idle, slots

    def _enqueue(self, item: QueuedEvent) -> None:
        """Put ``item`` at the tail of its task's lane and make sure the lane runs."""
        if len(self._waiting) >= self.queue_max:
            self._drop_oldest("the queue is full")
        self._lanes.setdefault(item.task_id, deque()).append(item)
        self._waiting[item.event_id] = item
        self._posted += 1
        if self._idle is not None:
            self._idle.clear()
        self._kick(item.task_id)

    def _kick(self, task_id: str) -> None:
        """Start the runner of ``task_id``'s lane unless it runs (or the poster is unbound)."""
        loop = self._loop
        if loop is None or task_id in self._runners:
            return
        runner = loop.create_task(
            self._run_lane(task_id), name=f"EventPoster[{self.server_name}] lane {task_id}"
        )
        self._runners[task_id] = runner

    async def _run_lane(self, task_id: str) -> None:
        """Deliver one task's events in ``seq`` order, one at a time, until its lane is empty.

        Lanes run side by side: a task whose event a receiver keeps refusing waits out its
        own retry pauses, and no other task's event waits behind it. At most
        ``max_in_flight`` attempts are under way at once (the ``slots``).
        """
        lanes, waiting = self._lanes, self._waiting
        try:
            while lane := lanes.get(task_id):
                item = lane.popleft()
                if not lane:
                    del lanes[task_id]
                waiting.pop(item.event_id, None)
                self._inflight[task_id] = item
                outcome: Literal["delivered", "given_up"]
                try:
                    await self._backlog.write_ahead(item)
                    result = await self._delivery.deliver(item, self._stop_at, self._slots)
                    if result.outcome == "grace_expired":
                        return  # aclose() counts the in-flight event and the rest as left over
                    outcome = result.outcome
                except Exception:  # a bug here must not kill the lane and strand the queue
                    self._given_up += 1
                    outcome = "given_up"
                    _log.exception(
                        "event_given_up",
                        server=self.server_name,
                        event_id=item.event_id,
                        task_id=item.task_id,
                        seq=item.seq,
                        reason="unexpected error in the poster",
                    )
                del self._inflight[task_id]
                await self._backlog.settle(item, outcome)
        finally:
            if self._runners.get(task_id) is asyncio.current_task():
                del self._runners[task_id]
            if not self._waiting and not self._inflight and self._idle is not None:
                self._idle.set()

    def _queued(self) -> int:
        return len(self._waiting) + len(self._inflight)

    def _stop_at(self) -> float | None:
        """The monotonic time past which no retry pause may end (set by :meth:`aclose`)."""
        return self._close_deadline

    def _recover(self) -> None:
        """Queue the events a previous process left pending, before anything new (once)."""
        self._recovery_done = True
        items = self._backlog.recover()
        self._recovered += len(items)
        for item in items[: max(0, len(items) - self.queue_max)]:
            self._drop(item, "the outbox holds more than queue_max events")
        for item in items[-self.queue_max :]:
            self._enqueue(item)
        self._backlog.trim()

    def _adopt(self, item: QueuedEvent) -> None:
        """Queue an event the task journal committed (an ``INTERRUPTED`` report)."""
        if self._closed:
            return  # it stays pending in the file for the next start
        self._recovered += 1
        self._enqueue(item)

    def _drop_oldest(self, reason: str) -> None:
        """Drop the oldest queued event (counted, its backlog row marked, one ERROR line).

        The brain's reconciliation poll (``get_task`` / ``list_tasks``) is what covers a
        dropped event; the log line says so.
        """
        _, old = self._waiting.popitem(last=False)
        lane = self._lanes.get(old.task_id)
        if lane is not None:
            lane.remove(old)  # its lane's head: lanes keep acceptance order
            if not lane:
                del self._lanes[old.task_id]
        self._drop(old, reason)

    def _drop(self, item: QueuedEvent, reason: str) -> None:
        self._dropped += 1
        self._backlog.drop(item)
        _log.error(
            "event_dropped",
            server=self.server_name,
            event_id=item.event_id,
            task_id=item.task_id,
            seq=item.seq,
            reason=reason,
            queue_max=self.queue_max,
            covered_by="the brain's reconciliation poll",
        )


def _counter(
    name: str, attributes: dict[str, str], poster: EventPoster
) -> list[tuple[float, dict[str, str]]]:
    return [(getattr(poster.stats, name), attributes)]


def _observe_poster(poster: EventPoster) -> None:
    """Report the poster's counters and queue depth as metrics (telemetry on; else no-op)."""
    server = {"robot_mcp.server": poster.server_name}
    observe("robot_mcp.poster.queue_depth", poster, lambda p: [(p.stats.queued, server)])
    for name in ("sent", "retried", "dropped", "given_up", "outbox_not_durable"):
        observe(f"robot_mcp.poster.{name}", poster, functools.partial(_counter, name, server))


def _check_url(url: str) -> None:
    try:
        parsed = httpx.URL(url)
    except Exception as exc:
        raise ConfigurationError(
            f"{ENV_CALLBACK_URL} {url!r} is not a URL: {exc}. "
            "Expected e.g. http://127.0.0.1:8000/api/agent/events."
        ) from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ConfigurationError(
            f"{ENV_CALLBACK_URL} {url!r} must be an http:// or https:// URL with a host, "
            "e.g. http://127.0.0.1:8000/api/agent/events."
        )
