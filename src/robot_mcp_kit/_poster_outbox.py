"""The poster's side of its durable outbox (issue 14; ``docs/delivery.md``).

Recovering the events a previous process left pending (they go first), adopting events
the task manager's recovery writes, waiting until an event's row is committed before its
first attempt, and settling each event's row when it is delivered or given up.
:class:`PosterOutbox` is a base of :class:`~robot_mcp_kit.events.EventPoster`, whose
``__init__`` sets the attributes declared here.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING, Literal

from robot_mcp_kit._attempt import _Item
from robot_mcp_kit._outbox import Outbox, OutboxRow
from robot_mcp_kit.log import get_logger

__all__ = ["PosterOutbox"]

_log = get_logger("robot_mcp_kit.events")


class PosterOutbox:
    """The durable outbox's part of an :class:`~robot_mcp_kit.events.EventPoster`."""

    if TYPE_CHECKING:

        @property
        def server_name(self) -> str: ...

        @property
        def queue_max(self) -> int: ...

    outbox: Outbox | None
    _queue: deque[_Item]
    _closed: bool
    _wakeup: asyncio.Event | None
    _idle: asyncio.Event | None
    _outbox_loaded: bool
    _accepted_n: int
    _durable_n: int
    _settled_since_trim: int
    _posted: int
    _dropped: int
    _recovered: int

    def _drop_oldest(self, outbox: Outbox | None, reason: str) -> None:
        """Drop the oldest queued event (counted, its outbox row marked, one ERROR line).

        The brain's reconciliation poll (``get_task`` / ``list_tasks``) is what covers a
        dropped event; the log line says so.
        """
        old = self._queue.popleft()
        self._dropped += 1
        if outbox is not None:
            outbox.mark(old.event_id, "dropped")
        _log.error(
            "event_dropped",
            server=self.server_name,
            event_id=old.event_id,
            task_id=old.task_id,
            seq=old.seq,
            reason=reason,
            queue_max=self.queue_max,
            covered_by="the brain's reconciliation poll",
        )

    def _load_outbox(self, outbox: Outbox) -> None:
        """Put the events a previous process left pending at the head of the queue (once)."""
        self._outbox_loaded = True
        try:
            rows = outbox.pending()
        except Exception:
            _log.exception("outbox_read_failed", server=self.server_name, outbox=str(outbox.path))
            rows = []
        if rows:
            self._recovered += len(rows)
            _log.warning(
                "outbox_recovered",
                server=self.server_name,
                outbox=str(outbox.path),
                events=len(rows),
                first_event_id=rows[0].event_id,
                first_task_id=rows[0].task_id,
                first_seq=rows[0].seq,
            )
        for row in reversed(rows):
            self._queue.appendleft(self._recovered_item(row))
        while len(self._queue) > self.queue_max:
            self._drop_oldest(outbox, "the outbox holds more than queue_max events")
        self._posted += len(self._queue)
        try:
            outbox.trim(self.queue_max)
        except Exception:
            _log.exception("outbox_trim_failed", server=self.server_name, outbox=str(outbox.path))
        outbox.on_recovered_event = self._adopt

    def _recovered_item(self, row: OutboxRow) -> _Item:
        # Committed already: numbered 0, so no durability wait before its first attempt.
        return _Item(row.event_id, row.task_id, row.seq, row.body, 0, row.enqueued_at)

    def _adopt(self, row: OutboxRow) -> None:
        """Take an event written to the outbox by someone else (the manager's recovery)."""
        if self._closed:
            return
        queue = self._queue
        if len(queue) >= self.queue_max:
            old = queue.popleft()
            self._dropped += 1
            if self.outbox is not None:
                self.outbox.mark(old.event_id, "dropped")
        queue.append(self._recovered_item(row))
        self._posted += 1
        self._recovered += 1
        if self._wakeup is not None and self._idle is not None:
            self._idle.clear()
            self._wakeup.set()

    async def _make_durable(self, item: _Item) -> None:
        """With an outbox: wait until ``item``'s row is committed, before its first attempt.

        One flush covers every item accepted before it started, so a burst costs one wait.
        """
        outbox = self.outbox
        if outbox is None or item.n <= self._durable_n:
            return
        target = self._accepted_n
        try:
            await outbox.make_durable()
        except Exception:  # a closed or broken store must not stop delivery
            _log.exception(
                "outbox_flush_failed",
                server=self.server_name,
                outbox=str(outbox.path),
                then="sending anyway",
            )
        self._durable_n = max(self._durable_n, target)

    async def _settle(self, item: _Item, state: Literal["delivered", "given_up"]) -> None:
        outbox = self.outbox
        if outbox is None:
            return
        outbox.mark(item.event_id, state)
        self._settled_since_trim += 1
        if self._settled_since_trim >= max(100, outbox.delivered_tail):
            self._settled_since_trim = 0
            try:
                await asyncio.to_thread(outbox.trim, self.queue_max)
            except Exception:
                _log.exception(
                    "outbox_trim_failed", server=self.server_name, outbox=str(outbox.path)
                )
