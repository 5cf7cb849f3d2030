"""What the poster keeps of its queue beyond memory: a backlog strategy.

:class:`MemoryBacklog` keeps nothing (an event lives only on the poster's queue);
:class:`DurableBacklog` is the one owner of the durable outbox file (see
:mod:`robot_mcp_kit._outbox`): it writes each accepted event's row, makes it durable before
the event's first attempt, settles it, reads back what a previous process left pending,
hands the manager its :class:`~robot_mcp_kit._task_journal.TaskJournal`, and closes the file.
The poster talks to either through :class:`Backlog`.

Delivery comes first. When the file cannot be written (a full disk, a read-only file), an
event whose row is not in it is sent all the same (in order with its task's other events,
signed, retried as usual) and counted *not durable*: until its row is written, a crash
loses it. :meth:`DurableBacklog.write_ahead` tries the write once before an event's first
attempt and never holds the event back for it; while writes fail a background task
retries them, pausing :data:`WRITE_RETRY_FIRST_S` doubling to :data:`WRITE_RETRY_MAX_S`,
and once the disk has room the rows are written in acceptance order, each with the state
its event reached by then (delivered, given up), so a later crash recovers what is still
pending. Memory stays bounded meanwhile: past ``queue_max`` unwritten rows, the oldest rows
of events already delivered or given up are forgotten (counted in
:attr:`DurableBacklog.forgotten`; the file then lacks them, which a restart does not
notice: it sends pending rows only). A settlement handed to the store as a hot write is
checked a moment later; if the store failed to write it, the background writer writes it,
so a delivered event is not sent again after a crash even when the poster idles. One ERROR
line starts such an episode (``outbox_write_failing``) and one WARNING ends it
(``outbox_write_recovered``), folded as :class:`~robot_mcp_kit._failures.FailureEpisodes`
says. Rows still unwritten when the poster closes are written once more; an undelivered
event whose row is not in the file and cannot be written then is counted lost
(``outbox_events_lost``, ERROR).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, Protocol

from robot_mcp_kit._failures import FailureEpisodes
from robot_mcp_kit._outbox import EventRow, Outbox, OutboxRow, OutboxState
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

    async def write_ahead(self, item: QueuedEvent) -> None:
        """Before ``item``'s first attempt: make it survive a crash if the file takes it.

        Never holds ``item`` back for a write that fails: it is then sent not durable.
        """
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

    async def stop(self) -> None:
        """At close, before :meth:`keep`: stop writing in the background."""
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
        """Events accepted whose rows are not yet known to be in the file."""
        ...

    @property
    def not_durable(self) -> int:
        """Events sent before their rows were in the file, so far (each counted once)."""
        ...

    @property
    def written_late(self) -> int:
        """Of :attr:`not_durable`, the events whose rows were written afterwards."""
        ...

    @property
    def forgotten(self) -> int:
        """Unwritten rows of delivered or given-up events let go to bound memory, so far."""
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
    not_durable: Final = 0
    written_late: Final = 0
    forgotten: Final = 0
    failing: Final = False

    def __repr__(self) -> str:
        return "MemoryBacklog()"

    def accept(self, item: QueuedEvent, now: float) -> None:
        """Nothing to record."""

    async def write_ahead(self, item: QueuedEvent) -> None:
        """Nothing to write."""

    async def settle(self, item: QueuedEvent, state: Settled) -> None:
        """Nothing to record."""

    def drop(self, item: QueuedEvent) -> None:
        """Nothing to record."""

    def recover(self) -> list[QueuedEvent]:
        """Nothing was left."""
        return []

    def trim(self) -> None:
        """Nothing to bound."""

    async def stop(self) -> None:
        """Nothing runs in the background."""

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
        queue_max: the most pending events the file keeps (the poster's queue bound),
            and the most unwritten rows kept in memory while the file cannot be written
            (beyond it, the oldest of delivered or given-up events are forgotten).
        delivered_tail: settled events kept beyond the pending ones.
        adopt: called with each event the journal commits after :meth:`recover` ran (a
            manager built on a running poster reports ``INTERRUPTED`` tasks that way);
            before that such events are simply among the pending rows.
        sleep: awaited between two attempts to write unwritten event rows while writes
            fail (the poster's clock's).

    Raises:
        OutboxLocked: another process holds the file.
        robot_mcp_kit.store.StoreError: the file cannot be opened (damaged, too new, ...).

    Not thread-safe: the poster's loop calls it, and :meth:`keep` runs in a thread once
    nothing else does.
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
        # order, with their wall time of acceptance.
        self._unwritten: dict[str, tuple[QueuedEvent, float]] = {}
        # Of those, the ones whose events were delivered or given up, oldest settled first:
        # forgotten past queue_max unwritten rows (a missing settled row resends nothing).
        self._settled_unwritten: dict[str, None] = {}
        # Of those, the rows handed to the store as hot writes and not yet checked: the
        # file may hold them (pending), so a forgotten one keeps its settlement to write.
        self._maybe_in_file: set[str] = set()
        # The rows of the cold write under way (it may land them without their settlement).
        self._writing: frozenset[str] = frozenset()
        # Of those, the ones already sent (not durable): the background writer runs until
        # none is left.
        self._exposed: set[str] = set()
        # Settlements the file may lack: of events whose rows are unwritten, made while
        # writes fail, or handed to the store when one of its hot writes then failed.
        # Written with the rows, after them.
        self._marks: dict[str, OutboxState] = {}
        # Settlements handed to the store as hot writes and not yet known written: kept
        # until a flush shows that none of the store's hot writes failed meanwhile.
        self._hot_marks: dict[str, OutboxState] = {}
        # True from a row found missing until the cold rewrite that follows succeeds: new
        # rows then wait for that rewrite (so rows stay in acceptance order), not the store.
        self._rewriting = False
        self._episodes = FailureEpisodes()  # of writing event rows
        self._write_lock: asyncio.Lock | None = None
        self._write_lock_loop: asyncio.AbstractEventLoop | None = None
        self._writer: asyncio.Task[None] | None = None  # the background writer, while it runs
        self._stopped = False
        self._not_durable = 0
        self._written_late = 0
        self._forgotten = 0
        self._hot_failed_seen = 0  # the store's failed hot writes at our last check
        self._settled_since_trim = 0

    def __repr__(self) -> str:
        state = "failing" if self.failing else "ok"
        return (
            f"<DurableBacklog {str(self.path)!r} {state} accepted={self._accepted_n} "
            f"unwritten={len(self._unwritten)} not_durable={self._not_durable} "
            f"written_late={self._written_late} rows_forgotten={self._forgotten} "
            f"write_failures={self.write_failures}>"
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
        """Events accepted whose rows are not yet known to be in the file."""
        return len(self._unwritten)

    @property
    def not_durable(self) -> int:
        """Events sent before their rows were in the file, so far (each counted once)."""
        return self._not_durable

    @property
    def written_late(self) -> int:
        """Of :attr:`not_durable`, the events whose rows were written afterwards."""
        return self._written_late

    @property
    def forgotten(self) -> int:
        """Unwritten rows of delivered or given-up events let go to bound memory, so far.

        Past ``queue_max`` unwritten rows (the file cannot be written for that long), the
        oldest of those whose events were delivered or given up are forgotten: the file
        never gets them, which only shortens the replay after a restart (a restart sends
        pending rows only). Undelivered events' rows are never forgotten: the poster's
        queue bound (``queue_max``, oldest dropped) bounds them.
        """
        return self._forgotten

    @property
    def failing(self) -> bool:
        """True while writes to the file fail: event rows, from a failure until a write of
        them succeeds, or the store's hot writes, when one failed since the last check."""
        return self._episodes.failing or (
            self._outbox.failing and self._outbox.hot_write_failures > self._hot_failed_seen
        )

    def accept(self, item: QueuedEvent, now: float) -> None:
        """Number ``item`` and queue its pending row (a hot write; held while rewriting)."""
        self._accepted_n += 1
        item.n = self._accepted_n
        self._unwritten[item.event_id] = (item, now)
        if not self._rewriting and not self._episodes.failing:
            self._outbox.add(item.row(now))
            self._maybe_in_file.add(item.event_id)
        self._forget_settled()

    def _forget_settled(self) -> None:
        """Bound the unwritten rows at ``queue_max``: forget the oldest settled ones."""
        while len(self._unwritten) > self.queue_max and self._settled_unwritten:
            event_id = next(iter(self._settled_unwritten))
            del self._settled_unwritten[event_id]
            del self._unwritten[event_id]
            self._exposed.discard(event_id)
            if event_id not in self._maybe_in_file and event_id not in self._writing:
                self._marks.pop(event_id, None)  # the file lacks the row: nothing to mark
            self._maybe_in_file.discard(event_id)
            self._forgotten += 1

    async def write_ahead(self, item: QueuedEvent) -> None:
        """Before ``item``'s first attempt: get its row into the file if the file takes it.

        Returns at once if the row is in the file already. Otherwise one flush and one
        read cover every event accepted so far (a burst costs one wait), and rows the
        store did not write are written again, with every other unwritten one, in
        acceptance order. If that fails, or writes are failing already, ``item`` is not
        held back: it goes out *not durable* (counted once), and the background writer
        puts its row into the file once the file takes it (see the module docstring).
        Cancelling the wait (the poster's close) leaves ``item`` unwritten, for
        :meth:`keep`.
        """
        if item.event_id not in self._unwritten:
            return
        if not self._episodes.failing:
            async with self._lock():
                if item.event_id in self._unwritten and not self._episodes.failing:
                    await self._write_unwritten()
        if item.event_id in self._unwritten and item.event_id not in self._exposed:
            self._exposed.add(item.event_id)
            self._not_durable += 1
            # A receiver may see it: the journal may claim its seq (see TaskJournal).
            self._journal.reached(item.task_id, item.seq)
            self._start_writer()

    def _lock(self) -> asyncio.Lock:
        """The lock of this loop that one write attempt at a time holds."""
        loop = asyncio.get_running_loop()
        if self._write_lock is None or self._write_lock_loop is not loop:
            self._write_lock, self._write_lock_loop = asyncio.Lock(), loop
        return self._write_lock

    def _start_writer(self) -> None:
        """Start the background writer on the running loop unless it runs there (or we
        stopped). A writer left on a loop that stopped (the poster moved) is replaced."""
        if self._stopped or self._closed:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # pragma: no cover - every caller runs on the poster's loop
            return
        writer = self._writer
        if writer is not None and not writer.done() and writer.get_loop() is loop:
            return
        self._writer = loop.create_task(
            self._write_in_background(), name=f"DurableBacklog[{self.server_name}] writer"
        )

    async def _write_in_background(self) -> None:
        """Write the rows of events sent not durable, and remembered settlements, until
        they are all in the file: at once, then every 0.1 s doubling to 5 s while it fails.

        Settlements handed to the store as hot writes are checked after 0.1 s (one flush,
        unless an event's write-ahead checked them meanwhile): those the store failed to
        write join the ones written here. So a failed settlement is written even when no
        event follows it.
        """
        pause = WRITE_RETRY_FIRST_S
        while not self._closed:
            if not (self._exposed or self._marks):
                if not self._hot_marks:
                    return
                await self._sleep(WRITE_RETRY_FIRST_S)  # the store's writer goes first
                if not (self._exposed or self._marks or self._hot_marks) or self._closed:
                    return
            elif self._episodes.failing:
                await self._sleep(pause)
                pause = min(pause * 2, WRITE_RETRY_MAX_S)
            async with self._lock():
                if await self._write_unwritten():
                    pause = WRITE_RETRY_FIRST_S

    async def _write_unwritten(self) -> bool:
        """One attempt to get every unwritten row and remembered settlement into the file.

        False when it failed (logged once per episode).
        """
        batch, hot = dict(self._unwritten), dict(self._hot_marks)
        try:
            if not self._rewriting and not self._episodes.failing:
                missing = await asyncio.to_thread(self._outbox.missing, list(batch))
                self._maybe_in_file.difference_update(batch)  # checked: in or not
                self._check_hot_marks(hot, flushed=True)
                marks = dict(self._marks)
                if missing:
                    # Rewrite them all, in acceptance order, with whatever came in meanwhile.
                    self._rewriting = True
                    batch, marks = dict(self._unwritten), dict(self._marks)
                else:
                    if marks:
                        await asyncio.to_thread(self._outbox.write_events, (), marks)
                    self._written(batch, marks)
                    return True
            else:
                self._check_hot_marks(hot, flushed=False)
                marks = dict(self._marks)
            self._writing = frozenset(batch)
            await asyncio.to_thread(self._outbox.write_events, _rows(batch), marks)
        except Exception as exc:
            self._write_failed(exc)
            return False
        finally:
            self._writing = frozenset()
        self._rewriting = False
        self._written(batch, marks)
        return True

    def _check_hot_marks(self, hot: dict[str, OutboxState], *, flushed: bool) -> None:
        """Settle what is known of the hot settlements ``hot`` (those handed to the store
        before a flush, when ``flushed``): if a hot write failed since the last check, or
        the store was not flushed, they join the settlements to write cold."""
        failed = self._outbox.hot_write_failures
        if not flushed or failed > self._hot_failed_seen:
            for event_id, state in hot.items():
                self._marks.setdefault(event_id, state)
        self._hot_failed_seen = failed
        for event_id, state in hot.items():
            if self._hot_marks.get(event_id) == state:
                del self._hot_marks[event_id]

    def _written(
        self, batch: dict[str, tuple[QueuedEvent, float]], marks: dict[str, OutboxState]
    ) -> None:
        late = 0
        for event_id, (item, _) in batch.items():
            self._unwritten.pop(event_id, None)
            self._settled_unwritten.pop(event_id, None)
            self._maybe_in_file.discard(event_id)
            if event_id in self._exposed:
                self._exposed.discard(event_id)
                late += 1
            self._journal.reached(item.task_id, item.seq)
        self._written_late += late
        for event_id, state in marks.items():
            if self._marks.get(event_id) == state:
                del self._marks[event_id]
        if self._episodes.succeeded():
            _log.warning(
                "outbox_write_recovered",
                server=self.server_name,
                outbox=str(self.path),
                failed_attempts=self._episodes.failures,
                seconds=self._episodes.seconds(),
                written=len(batch),
                written_late=late,
                rows_forgotten=self._forgotten,
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
                "events are sent all the same, in order, and are not durable until their "
                "rows are written: a crash before then loses those not yet delivered; the "
                f"write is retried every {WRITE_RETRY_FIRST_S:g} s to {WRITE_RETRY_MAX_S:g} s; "
                "free space or fix the file's permissions"
            ),
        )

    async def settle(self, item: QueuedEvent, state: Settled) -> None:
        """Mark ``item``'s row; every so often trim the file (in a thread)."""
        self._mark(item.event_id, state)
        self._settled_since_trim += 1
        if self._settled_since_trim >= max(100, self._outbox.delivered_tail):
            self._settled_since_trim = 0
            try:
                await asyncio.to_thread(self._outbox.trim)
            except Exception:
                _log.exception("outbox_trim_failed", server=self.server_name, outbox=str(self.path))

    def drop(self, item: QueuedEvent) -> None:
        """Mark ``item``'s row ``dropped``; an unwritten one (never sent) is not written."""
        self._unwritten.pop(item.event_id, None)
        self._settled_unwritten.pop(item.event_id, None)
        self._maybe_in_file.discard(item.event_id)
        self._exposed.discard(item.event_id)
        self._mark(item.event_id, "dropped")

    def _mark(self, event_id: str, state: OutboxState) -> None:
        """Record a settlement: a hot write (after the row's own, if the store has it),
        also remembered for the next write of unwritten rows when the file may lack the
        row or the write may fail, and checked by the background writer otherwise."""
        if event_id in self._unwritten or self.failing:
            self._marks[event_id] = state
            if event_id in self._unwritten and state != "dropped":
                self._settled_unwritten[event_id] = None
        else:
            self._hot_marks[event_id] = state
        self._outbox.mark(event_id, state)
        self._start_writer()
        self._forget_settled()

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

    async def stop(self) -> None:
        """Stop the background writer (for good), waiting for it; :meth:`keep` follows."""
        self._stopped = True
        writer, self._writer = self._writer, None
        if writer is None or writer.done() or writer.get_loop() is not asyncio.get_running_loop():
            return
        writer.cancel()
        await asyncio.wait([writer])

    def keep(self, items: Sequence[QueuedEvent]) -> list[QueuedEvent]:
        """Write the rows (and settlements) not yet in the file; return the ``items`` lost.

        ``items`` are the undelivered events: every one already in the file stays pending
        there for the next start (the file is read to know which are: those the store
        wrote but no write-ahead checked yet); one whose row is not in the file and cannot
        be written now is lost (ERROR ``outbox_events_lost``). A delivered event whose row
        cannot be written is not lost to any receiver, only absent from the file (WARNING
        ``outbox_rows_unwritten``). Blocking: the poster's close runs it in a thread, once
        no lane runs any more and :meth:`stop` returned.
        """
        if self._outbox.hot_write_failures > self._hot_failed_seen:
            self._check_hot_marks(dict(self._hot_marks), flushed=False)
        if not self._unwritten and not self._marks:
            return []
        batch, marks = dict(self._unwritten), dict(self._marks)
        try:
            missing = self._outbox.missing(list(batch))  # flushes the store, then reads
        except Exception:  # cannot tell: count them all as missing
            missing = set(batch)
        try:
            if missing or marks:
                # Rewritten all together when one is missing: acceptance order (see
                # Outbox.write_events).
                self._outbox.write_events(_rows(batch) if missing else (), marks)
        except Exception as exc:
            lost = [item for item in items if item.event_id in missing]
            self._unwritten.clear()
            self._settled_unwritten.clear()
            self._maybe_in_file.clear()
            self._exposed.clear()
            self._marks.clear()
            self._log_unwritten_at_close(lost, len(missing) - len(lost), len(marks), exc)
            return lost
        self._written(batch, marks)
        return []

    def _log_unwritten_at_close(
        self, lost: list[QueuedEvent], settled: int, marks: int, exc: BaseException
    ) -> None:
        common: dict[str, Any] = {
            "server": self.server_name,
            "outbox": str(self.path),
            "error": f"{type(exc).__name__}: {exc}",
            "settled_unwritten": settled,  # delivered or given up, absent from the file
            "settlements_unwritten": marks,  # a restart sends those events again
        }
        if lost:
            _log.error(
                "outbox_events_lost",
                events=len(lost),
                first_event_id=lost[0].event_id,
                first_task_id=lost[0].task_id,
                first_seq=lost[0].seq,
                reason="the poster closed and their rows could not be written",
                covered_by="the brain's reconciliation poll",
                **common,
            )
        elif settled or marks:
            _log.warning(
                "outbox_rows_unwritten",
                reason=(
                    "the poster closed with the outbox still failing: these events were "
                    "delivered or given up, but the file lacks them or how they ended"
                ),
                **common,
            )

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
