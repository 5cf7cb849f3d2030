"""What the poster keeps of its queue beyond memory: a backlog strategy.

:class:`MemoryBacklog` keeps nothing (an event lives only on the poster's queue);
:class:`DurableBacklog` is the one owner of the durable outbox file (see
:mod:`robot_mcp_kit._outbox`): it writes each accepted event's row, makes it durable before
the event's first attempt, settles it, reads back what a previous process left pending,
hands the manager its :class:`~robot_mcp_kit._task_journal.TaskJournal`, and closes the file.
The poster talks to either through :class:`Backlog`.

When the file cannot be written (a full disk, a read-only file), nothing is sent that is
not in it: :meth:`DurableBacklog.make_durable` retries the write, pausing
:data:`WRITE_RETRY_FIRST_S` doubling to :data:`WRITE_RETRY_MAX_S`, while the events wait in
memory under the poster's ``queue_max`` (beyond it the oldest is dropped, as always). One
ERROR line starts such an episode (``outbox_write_failing``) and one WARNING ends it
(``outbox_write_recovered``), folded as :class:`~robot_mcp_kit._failures.FailureEpisodes`
says. Events still unwritten when the poster closes are written once more, and counted
lost (``outbox_events_lost``, ERROR) if that fails too.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, Protocol

from robot_mcp_kit._failures import FailureEpisodes
from robot_mcp_kit._outbox import EventRow, Outbox, OutboxRow
from robot_mcp_kit._task_journal import TaskJournal
from robot_mcp_kit.log import get_logger

__all__ = [
    "WRITE_RETRY_FIRST_S",
    "WRITE_RETRY_MAX_S",
    "Backlog",
    "DurableBacklog",
    "MemoryBacklog",
    "QueuedEvent",
    "Settled",
]

_log = get_logger("robot_mcp_kit.events")

WRITE_RETRY_FIRST_S: Final = 0.1
"""The first pause before writing unwritten event rows again; it doubles on each failure."""
WRITE_RETRY_MAX_S: Final = 5.0
"""The longest pause between two attempts to write unwritten event rows."""

Settled = Literal["delivered", "given_up"]


@dataclass(slots=True)
class QueuedEvent:
    """One event on the poster's queue: its body bytes and the facts its log lines name."""

    event_id: str
    task_id: str
    seq: int
    body: bytes
    n: int = 0
    """Durable backlog only: the event's number in acceptance order (0: already durable)."""
    enqueued_at: float | None = None
    """Recovered events only: wall time first accepted (the retry budget starts there)."""
    trace: tuple[str, str] | None = None
    """``(traceparent, tracestate)`` of the span the event was posted in (telemetry on);
    kept in the outbox, so an event sent after a restart still belongs to its trace."""

    @classmethod
    def from_row(cls, row: OutboxRow) -> QueuedEvent:
        """An event read back from the outbox file (committed already, so numbered 0)."""
        return cls(row.event_id, row.task_id, row.seq, row.body, 0, row.enqueued_at, row.trace)

    def row(self, enqueued_at: float) -> EventRow:
        """The outbox row of this event, accepted at wall time ``enqueued_at``."""
        parent, state = self.trace if self.trace is not None else (None, None)
        return (self.event_id, self.task_id, self.seq, self.body, enqueued_at, parent, state)


class Backlog(Protocol):
    """The poster's durability strategy. Every method logs its own failures, never raises."""

    @property
    def path(self) -> Path | None:
        """The outbox file, or None when nothing outlives the process."""
        ...

    @property
    def journal(self) -> TaskJournal | None:
        """The task journal in the same file, for the manager; None without a file."""
        ...

    def accept(self, item: QueuedEvent, now: float) -> None:
        """Record a newly posted event (wall time ``now``)."""
        ...

    async def make_durable(self, item: QueuedEvent) -> None:
        """Return once ``item`` survives a crash (before its first attempt)."""
        ...

    async def settle(self, item: QueuedEvent, state: Settled) -> None:
        """Record how ``item`` ended."""
        ...

    def drop(self, item: QueuedEvent) -> None:
        """Record that ``item`` was dropped (the poster logs and counts it)."""
        ...

    def recover(self) -> list[QueuedEvent]:
        """The events a previous process left pending, oldest first; [] after the first call."""
        ...

    def trim(self) -> None:
        """Bound the file after recovery."""
        ...

    def keep(self, items: Sequence[QueuedEvent]) -> list[QueuedEvent]:
        """At close: make the undelivered ``items`` outlive the process; return those lost.

        Blocking (the poster runs it in a thread).
        """
        ...

    def close(self) -> None:
        """Write what is queued and release the file. Idempotent."""
        ...

    @property
    def write_failures(self) -> int:
        """Writes to the file that failed so far (0 without a file)."""
        ...

    @property
    def unwritten(self) -> int:
        """Events accepted whose rows are not yet known to be in the file (unsent)."""
        ...

    @property
    def failing(self) -> bool:
        """True while writes to the file fail (from the first failure until one succeeds)."""
        ...


class MemoryBacklog:
    """No durability: every method is a no-op; what is on the queue dies with the process."""

    path: None = None
    journal: None = None
    write_failures: Final = 0
    unwritten: Final = 0
    failing: Final = False

    def __repr__(self) -> str:
        return "MemoryBacklog()"

    def accept(self, item: QueuedEvent, now: float) -> None:
        """Nothing to record."""

    async def make_durable(self, item: QueuedEvent) -> None:
        """Nothing to wait for."""

    async def settle(self, item: QueuedEvent, state: Settled) -> None:
        """Nothing to record."""

    def drop(self, item: QueuedEvent) -> None:
        """Nothing to record."""

    def recover(self) -> list[QueuedEvent]:
        """Nothing was left."""
        return []

    def trim(self) -> None:
        """Nothing to bound."""

    def keep(self, items: Sequence[QueuedEvent]) -> list[QueuedEvent]:
        """Nothing outlives the process: every item is lost."""
        return list(items)

    def close(self) -> None:
        """Nothing to release."""


class DurableBacklog:
    """The durable outbox: one SQLite file holding the events and the task journal.

    Args:
        path: the SQLite file (created with its directory if missing).
        server_name: named in log lines.
        queue_max: the most pending events the file keeps (the poster's queue bound).
        delivered_tail: settled events kept beyond the pending ones.
        adopt: called with each event the journal commits after :meth:`recover` ran (a
            manager built on a running poster reports ``INTERRUPTED`` tasks that way);
            before that such events are simply among the pending rows.
        sleep: awaited between two attempts to write unwritten event rows (the poster's
            clock's).

    Raises:
        OutboxLocked: another process holds the file.
        robot_mcp_kit.store.StoreError: the file cannot be opened (damaged, too new, ...).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        server_name: str,
        queue_max: int,
        delivered_tail: int = 1_000,
        adopt: Callable[[QueuedEvent], None],
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.server_name = server_name
        self.queue_max = queue_max
        self._outbox = Outbox(path, delivered_tail=delivered_tail)
        self._adopt = adopt
        self._sleep = sleep
        self._journal = TaskJournal(self._outbox, self._on_journal_event)
        self._recovered = False
        self._closed = False
        self._accepted_n = 0  # events accepted so far (their numbers, for the logs)
        # Accepted events whose rows are not yet known to be in the file, in acceptance
        # order, with their wall time of acceptance; none of them has been sent.
        self._unwritten: dict[str, tuple[QueuedEvent, float]] = {}
        # True from a row found missing until the cold rewrite that follows succeeds: new
        # rows then wait for that rewrite (so rows stay in acceptance order), not the store.
        self._rewriting = False
        self._episodes = FailureEpisodes()  # of writing event rows
        self._write_lock: asyncio.Lock | None = None
        self._write_lock_loop: asyncio.AbstractEventLoop | None = None
        self._settled_since_trim = 0

    def __repr__(self) -> str:
        state = "failing" if self.failing else "ok"
        return (
            f"<DurableBacklog {str(self.path)!r} {state} accepted={self._accepted_n} "
            f"unwritten={len(self._unwritten)} write_failures={self.write_failures}>"
        )

    @property
    def path(self) -> Path:
        """The outbox file."""
        return self._outbox.path

    @property
    def journal(self) -> TaskJournal:
        """The task journal in this file (a view; this backlog owns the file)."""
        return self._journal

    @property
    def write_failures(self) -> int:
        """Writes to the file that failed: event rows, settlements, task rows, trims."""
        return self._outbox.write_failures

    @property
    def unwritten(self) -> int:
        """Events accepted whose rows are not yet known to be in the file (none sent)."""
        return len(self._unwritten)

    @property
    def failing(self) -> bool:
        """True while event rows cannot be written, or the store's writes fail."""
        return self._episodes.failing or self._outbox.failing

    def accept(self, item: QueuedEvent, now: float) -> None:
        """Number ``item`` and queue its pending row (a hot write; held while rewriting)."""
        self._accepted_n += 1
        item.n = self._accepted_n
        self._unwritten[item.event_id] = (item, now)
        if not self._rewriting and not self._episodes.failing:
            self._outbox.add(item.row(now))

    async def make_durable(self, item: QueuedEvent) -> None:
        """Return once ``item``'s row is in the file; at once if it already is.

        One flush and one read cover every event accepted before it started, so a burst
        costs one wait. Rows the store did not write are written again, with every other
        unwritten one, until that succeeds (see the module docstring): ``item`` is never
        reported durable before it is. Cancelling the wait (the poster's close) leaves
        ``item`` unwritten, for :meth:`keep`.
        """
        if item.event_id not in self._unwritten:
            return
        loop = asyncio.get_running_loop()
        if self._write_lock is None or self._write_lock_loop is not loop:
            self._write_lock, self._write_lock_loop = asyncio.Lock(), loop
        async with self._write_lock:
            pause = WRITE_RETRY_FIRST_S
            while item.event_id in self._unwritten:
                if await self._write_unwritten():
                    continue
                await self._sleep(pause)
                pause = min(pause * 2, WRITE_RETRY_MAX_S)

    async def _write_unwritten(self) -> bool:
        """One attempt to get every unwritten row into the file; False when it failed."""
        batch = dict(self._unwritten)
        try:
            if not self._rewriting and not self._episodes.failing:
                missing = await asyncio.to_thread(self._outbox.missing, list(batch))
                if not missing:
                    self._written(batch)
                    return True
                # Rewrite them all, in acceptance order, with whatever came in meanwhile.
                self._rewriting = True
                batch = dict(self._unwritten)
            await asyncio.to_thread(self._outbox.write_events, _rows(batch))
        except Exception as exc:
            self._write_failed(exc)
            return False
        self._rewriting = False
        self._written(batch)
        return True

    def _written(self, batch: dict[str, tuple[QueuedEvent, float]]) -> None:
        for event_id, (item, _) in batch.items():
            self._unwritten.pop(event_id, None)
            self._journal.written(item.task_id, item.seq)
        if self._episodes.succeeded():
            _log.warning(
                "outbox_write_recovered",
                server=self.server_name,
                outbox=str(self.path),
                failed_attempts=self._episodes.failures,
                seconds=self._episodes.seconds(),
                written=len(batch),
                write_failures=self.write_failures,
            )

    def _write_failed(self, exc: BaseException) -> None:
        self._rewriting = True
        if not self._episodes.failed():
            return  # logged once per episode
        _log.error(
            "outbox_write_failing",
            server=self.server_name,
            outbox=str(self.path),
            error=f"{type(exc).__name__}: {exc}",
            unwritten=len(self._unwritten),
            then=(
                "no event is sent before its row is in the file: they wait in memory "
                f"(queue_max {self.queue_max}, oldest dropped beyond it) and the write is "
                f"retried every {WRITE_RETRY_FIRST_S:g} s to {WRITE_RETRY_MAX_S:g} s; "
                "free space or fix the file's permissions"
            ),
        )

    async def settle(self, item: QueuedEvent, state: Settled) -> None:
        """Mark ``item``'s row; every so often trim the file (in a thread)."""
        self._outbox.mark(item.event_id, state)
        self._settled_since_trim += 1
        if self._settled_since_trim >= max(100, self._outbox.delivered_tail):
            self._settled_since_trim = 0
            try:
                await asyncio.to_thread(self._outbox.trim)
            except Exception:
                _log.exception("outbox_trim_failed", server=self.server_name, outbox=str(self.path))

    def drop(self, item: QueuedEvent) -> None:
        """Mark ``item``'s row ``dropped`` (an unwritten one has no row to mark)."""
        self._unwritten.pop(item.event_id, None)
        self._outbox.mark(item.event_id, "dropped")

    def recover(self) -> list[QueuedEvent]:
        """Read the pending rows a previous process left (once; logged)."""
        if self._recovered:
            return []
        self._recovered = True
        try:
            rows = self._outbox.pending()
        except Exception:
            _log.exception("outbox_read_failed", server=self.server_name, outbox=str(self.path))
            return []
        if rows:
            _log.warning(
                "outbox_recovered",
                server=self.server_name,
                outbox=str(self.path),
                events=len(rows),
                first_event_id=rows[0].event_id,
                first_task_id=rows[0].task_id,
                first_seq=rows[0].seq,
            )
        return [QueuedEvent.from_row(row) for row in rows]

    def trim(self) -> None:
        """Keep the pending event rows and the newest ``delivered_tail`` others (a cold write)."""
        try:
            self._outbox.trim()
        except Exception:
            _log.exception("outbox_trim_failed", server=self.server_name, outbox=str(self.path))

    def keep(self, items: Sequence[QueuedEvent]) -> list[QueuedEvent]:
        """Write the rows of undelivered events not yet in the file; return those lost.

        Every item already in the file stays pending there for the next start. Blocking:
        the poster's close runs it in a thread, once no lane runs any more.
        """
        if not self._unwritten:
            return []
        batch = dict(self._unwritten)
        try:
            missing = (
                set(batch)
                if self._rewriting or self._episodes.failing
                else self._outbox.missing(list(batch))
            )
            if missing:
                self._outbox.write_events(_rows(batch))
        except Exception as exc:
            lost = [item for item in items if item.event_id in batch]
            self._unwritten.clear()
            if lost:
                _log.error(
                    "outbox_events_lost",
                    server=self.server_name,
                    outbox=str(self.path),
                    events=len(lost),
                    first_event_id=lost[0].event_id,
                    first_task_id=lost[0].task_id,
                    first_seq=lost[0].seq,
                    error=f"{type(exc).__name__}: {exc}",
                    reason="the poster closed and their rows could not be written",
                    covered_by="the brain's reconciliation poll",
                )
            return lost
        self._written(batch)
        return []

    def close(self) -> None:
        """Write what is queued and close the file. Idempotent; a failure is logged."""
        self._closed = True
        try:
            self._outbox.close()
        except Exception:
            _log.exception("outbox_close_failed", server=self.server_name, outbox=str(self.path))

    def _on_journal_event(self, row: OutboxRow) -> None:
        # Before recover() the row is read back with the other pending rows; after close()
        # it stays pending in the file for the next start.
        if self._recovered and not self._closed:
            self._adopt(QueuedEvent.from_row(row))


def _rows(batch: dict[str, tuple[QueuedEvent, float]]) -> list[EventRow]:
    return [i.row(at) for i, at in batch.values()]
