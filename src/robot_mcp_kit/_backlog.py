"""What the poster keeps of its queue beyond memory: a backlog strategy.

:class:`MemoryBacklog` keeps nothing (an event lives only on the poster's queue);
:class:`DurableBacklog` is the one owner of the durable outbox file (see
:mod:`robot_mcp_kit._outbox`): it writes each accepted event's row, makes it durable before
the event's first attempt, settles it, reads back what a previous process left pending,
hands the manager its :class:`~robot_mcp_kit._task_journal.TaskJournal`, and closes the file.
The poster talks to either through :class:`Backlog`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from robot_mcp_kit._outbox import Outbox, OutboxRow
from robot_mcp_kit._task_journal import TaskJournal
from robot_mcp_kit.log import get_logger

__all__ = ["Backlog", "DurableBacklog", "MemoryBacklog", "QueuedEvent", "Settled"]

_log = get_logger("robot_mcp_kit.events")

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

    @classmethod
    def from_row(cls, row: OutboxRow) -> QueuedEvent:
        """An event read back from the outbox file (committed already, so numbered 0)."""
        return cls(row.event_id, row.task_id, row.seq, row.body, 0, row.enqueued_at)


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

    def close(self) -> None:
        """Write what is queued and release the file. Idempotent."""
        ...


class MemoryBacklog:
    """No durability: every method is a no-op; what is on the queue dies with the process."""

    path: None = None
    journal: None = None

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

    Raises:
        robot_mcp_kit.store.StoreError: the file cannot be opened.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        server_name: str,
        queue_max: int,
        delivered_tail: int = 1_000,
        adopt: Callable[[QueuedEvent], None],
    ) -> None:
        self.server_name = server_name
        self.queue_max = queue_max
        self._outbox = Outbox(path, delivered_tail=delivered_tail)
        self._adopt = adopt
        self._journal = TaskJournal(self._outbox, self._on_journal_event)
        self._recovered = False
        self._closed = False
        self._accepted_n = 0  # events accepted so far (the durability numbering)
        self._durable_n = 0  # events whose rows are known committed
        self._settled_since_trim = 0

    def __repr__(self) -> str:
        return f"<DurableBacklog {str(self.path)!r} accepted={self._accepted_n}>"

    @property
    def path(self) -> Path:
        """The outbox file."""
        return self._outbox.path

    @property
    def journal(self) -> TaskJournal:
        """The task journal in this file (a view; this backlog owns the file)."""
        return self._journal

    def accept(self, item: QueuedEvent, now: float) -> None:
        """Number ``item`` and queue its pending row (a hot write)."""
        self._accepted_n += 1
        item.n = self._accepted_n
        self._outbox.add(item.event_id, item.task_id, item.seq, item.body, now)

    async def make_durable(self, item: QueuedEvent) -> None:
        """Wait until ``item``'s row is committed; at once if it already is.

        One flush covers every event accepted before it started, so a burst costs one
        wait. A failed flush is logged and delivery goes on.
        """
        if item.n <= self._durable_n:
            return
        target = self._accepted_n
        try:
            await self._outbox.make_durable()
        except Exception:  # a closed or broken store must not stop delivery
            _log.exception(
                "outbox_flush_failed",
                server=self.server_name,
                outbox=str(self.path),
                then="sending anyway",
            )
        self._durable_n = max(self._durable_n, target)

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
        """Mark ``item``'s row ``dropped``."""
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
