"""Closing an :class:`~robot_mcp_kit.events.EventPoster`: the grace, then what is left.

``aclose()`` delivers what is queued for up to ``close_grace_s``, then stops the worker,
closes the HTTP client and the outbox, and counts what is still undelivered as dropped
(or, with a durable outbox, as kept for the next start). :class:`PosterClosing` is a base
of the poster, whose ``__init__`` sets the attributes declared here.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING

import httpx

from robot_mcp_kit._attempt import _Item
from robot_mcp_kit._outbox import Outbox
from robot_mcp_kit._retry import Clock
from robot_mcp_kit.log import get_logger

__all__ = ["PosterClosing"]

_log = get_logger("robot_mcp_kit.events")


class PosterClosing:
    """The closing of an :class:`~robot_mcp_kit.events.EventPoster`."""

    if TYPE_CHECKING:

        @property
        def server_name(self) -> str: ...

        @property
        def close_grace_s(self) -> float: ...

        @property
        def enabled(self) -> bool: ...

    outbox: Outbox | None
    _clock: Clock
    _queue: deque[_Item]
    _inflight: _Item | None
    _loop: asyncio.AbstractEventLoop | None
    _wakeup: asyncio.Event | None
    _idle: asyncio.Event | None
    _worker: asyncio.Task[None] | None
    _client: httpx.AsyncClient | None
    _closed: bool
    _close_done: asyncio.Event | None
    _close_deadline: float | None
    _sent: int
    _dropped: int
    _kept: int

    async def aclose(self) -> None:
        """Deliver what is queued for up to ``close_grace_s``, then stop. Idempotent.

        Whatever is still undelivered after the grace is dropped, counted and logged at
        WARNING; then the HTTP client is closed.
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
            worker = self._worker
            if worker is not None and not worker.done() and same_loop:
                self._close_deadline = self._clock.monotonic() + self.close_grace_s
                if self._wakeup is not None:
                    self._wakeup.set()
                try:
                    async with asyncio.timeout(self.close_grace_s):
                        await asyncio.shield(worker)
                except TimeoutError:
                    pass
                finally:
                    if not worker.done():
                        worker.cancel()
                        await asyncio.wait([worker])
            client, self._client = self._client, None
            if client is not None and same_loop:
                await client.aclose()
        finally:
            self._drop_leftovers()
            outbox = self.outbox
            if outbox is not None:
                outbox.on_recovered_event = None
                try:
                    if same_loop:
                        await asyncio.to_thread(outbox.close)
                    else:
                        outbox.close()
                except Exception:
                    _log.exception(
                        "outbox_close_failed", server=self.server_name, outbox=str(outbox.path)
                    )
            if self._close_done is not None:
                self._close_done.set()
            if self._idle is not None and same_loop:
                self._idle.set()

    def _drop_leftovers(self) -> None:
        left = list(self._queue)
        if self._inflight is not None:
            left.insert(0, self._inflight)
        self._queue.clear()
        self._inflight = None
        if left and self.outbox is not None:
            self._kept += len(left)
            _log.warning(
                "poster_closed",
                server=self.server_name,
                sent=self._sent,
                kept=len(left),
                outbox=str(self.outbox.path),
                first_event_id=left[0].event_id,
                first_task_id=left[0].task_id,
                first_seq=left[0].seq,
            )
            return
        if not left:
            _log.info("poster_closed", server=self.server_name, sent=self._sent, undelivered=0)
            return
        self._dropped += len(left)
        first = left[0]
        _log.warning(
            "poster_closed",
            server=self.server_name,
            sent=self._sent,
            dropped=len(left),
            grace_s=self.close_grace_s,
            first_event_id=first.event_id,
            first_task_id=first.task_id,
            first_seq=first.seq,
            covered_by="the brain's reconciliation poll",
        )
