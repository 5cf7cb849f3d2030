"""Gap repair: fill the hole that blocks a task through its server's ``get_task_events``.

A task is blocked when its next seq is missing while later ones wait (a post was lost,
or acknowledged and lost). The receiver first waits ``wait_s`` (the missing post may only
be late), then asks the server for the task's events after its cursor, stores the ones it
lacks (as ``repair``) and hands them over in place. What the server can no longer give
(before its ``first_retained_seq``) becomes one GAP update, and a task the server no
longer knows is handed over as far as it goes, then LOST. A server that cannot be
reached is tried again on its backoff; a hole nobody fills within ``gap_timeout_s`` of
being noticed (no MCP URL, a server unreachable that long) becomes a GAP update too, so
the task's later events are not held back for good.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from robot_mcp_kit.log import get_logger
from robot_mcp_kit.receiver._exceptions import ServerCallFailed
from robot_mcp_kit.receiver._links import ServerLink
from robot_mcp_kit.receiver._state import Final, ReceiverState, TaskKey, TaskRecord
from robot_mcp_kit.receiver._tools import EventsPage
from robot_mcp_kit.receiver._updates import UpdateKind, UpdateSource

__all__ = ["Repairs"]

_log = get_logger("robot_mcp_kit.receiver")

Absorb = Callable[[str, EventsPage, UpdateSource], Awaitable[int]]
"""Stores fetched events of a server (committed when it returns); how many were new."""


class Repairs:
    """The receiver's gap repairs. Use from its event loop only.

    Args:
        state: the tasks.
        links: the servers by name.
        absorb: stores a page of fetched events.
        wake: restarts a task's lane.
        wait_s: how long a hole may stay before the server is asked.
        gap_timeout_s: how long a hole may stay before it is given up (a GAP update).
    """

    def __init__(
        self,
        state: ReceiverState,
        links: dict[str, ServerLink],
        absorb: Absorb,
        wake: Callable[[TaskRecord], None],
        *,
        wait_s: float = 1.0,
        gap_timeout_s: float = 600.0,
    ) -> None:
        self._state = state
        self._links = links
        self._absorb = absorb
        self._wake = wake
        self.wait_s = wait_s
        self.gap_timeout_s = gap_timeout_s
        self._timers: dict[TaskKey, asyncio.TimerHandle] = {}
        self._running: dict[TaskKey, asyncio.Task[None]] = {}
        self._closing = False

    def __repr__(self) -> str:
        return f"<Repairs scheduled={len(self._timers)} running={len(self._running)}>"

    @property
    def scheduled(self) -> int:
        """Repairs waiting for their time or running."""
        return len(self._timers) + len(self._running)

    def schedule(self, record: TaskRecord, delay_s: float | None = None) -> None:
        """Repair ``record``'s hole after ``wait_s`` from when it was first seen blocked
        (or after ``delay_s``); a repair already due or running is left as it is."""
        running = self._running.get(record.key)
        if (
            self._closing
            or record.key in self._timers
            or (running is not None and running is not asyncio.current_task())
        ):
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        if record.blocked_since is None:
            record.blocked_since = now
        delay = max(0.0, record.blocked_since + self.wait_s - now) if delay_s is None else delay_s
        self._timers[record.key] = loop.call_later(delay, self._start, record.key)

    def _start(self, key: TaskKey) -> None:
        self._timers.pop(key, None)
        if self._closing or key in self._running:
            return
        task = asyncio.get_running_loop().create_task(
            self._repair(key), name=f"receiver repair {key[0]}/{key[1]}"
        )
        self._running[key] = task

        def done(finished: asyncio.Task[None]) -> None:
            if self._running.get(key) is finished:
                del self._running[key]

        task.add_done_callback(done)

    async def _repair(self, key: TaskKey) -> None:
        record = self._state.tasks.get(key)
        if record is None or record.missing() is None:
            if record is not None:
                record.blocked_since = None
            return
        try:
            await self._fill(record)
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug here must not leave the task blocked silently
            _log.exception("receiver_repair_failed", server=key[0], task_id=key[1])
            self.schedule(record, delay_s=max(self.wait_s, 1.0))

    async def _fill(self, record: TaskRecord) -> None:
        loop = asyncio.get_running_loop()
        link = self._links[record.server]
        hole = record.missing()
        assert hole is not None
        since = record.blocked_since if record.blocked_since is not None else loop.time()
        timed_out = loop.time() - since >= self.gap_timeout_s
        can_ask = link.tools is not None and link.events_tool
        if not can_ask or not link.health.ready(loop.time()):
            if timed_out:
                self._give_up(record, hole, "repair" if can_ask else "post")
                return
            until_timeout = since + self.gap_timeout_s - loop.time()
            wait = link.health.wait_s(loop.time()) if can_ask else until_timeout
            self.schedule(record, delay_s=max(0.0, min(wait, until_timeout)))
            return
        after = record.delivered_seq
        try:
            page = await link.call(
                "repair", lambda session: session.task_events(record.task_id, after)
            )
        except ServerCallFailed as exc:
            if exc.code == "error":
                link.events_tool = False  # no get_task_events on this server
            if loop.time() - since >= self.gap_timeout_s:
                self._give_up(record, hole, "repair")
            else:
                wait = link.health.wait_s(loop.time()) or max(self.wait_s, 1.0)
                self.schedule(record, delay_s=min(wait, since + self.gap_timeout_s - loop.time()))
            return
        if page is None:  # the server no longer knows the task
            _log.warning("receiver_task_lost", server=record.server, task_id=record.task_id)
            self._give_up(record, hole, "repair")
            self._state.finish(record, Final(UpdateKind.LOST, source="repair"))
            self._wake(record)
            return
        await self._absorb(record.server, page, "repair")
        hole = record.missing()
        if hole is not None:
            first = hole[0]
            retained = page.first_retained_seq
            if retained is None or retained > first:
                # Not retained (or never given): they will never come.
                last = hole[1] if retained is None else min(hole[1], retained - 1)
                self._give_up(record, (first, last), "repair")
            elif not any(f.event.seq == first for f in page.events):
                self._give_up(record, hole, "repair")  # retained, yet not given: a bad server
        record.blocked_since = None if record.missing() is None else loop.time()
        self._wake(record)

    def _give_up(self, record: TaskRecord, hole: tuple[int, int], source: UpdateSource) -> None:
        _log.warning(
            "receiver_gap_given_up",
            server=record.server,
            task_id=record.task_id,
            first=hole[0],
            last=hole[1],
        )
        self._state.skip(record, hole[0], hole[1], source)
        record.blocked_since = None
        self._wake(record)

    async def aclose(self) -> None:
        """Cancel the repairs due and running."""
        self._closing = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        running = list(self._running.values())
        for task in running:
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*running, return_exceptions=True)
