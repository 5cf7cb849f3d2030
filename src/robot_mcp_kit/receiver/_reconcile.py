"""Reconciliation: poll is the truth. Ask each server what became of its tasks.

At start and every ``every_s`` seconds, for each server with an MCP URL, in one session:
``list_tasks``; then, for each task the receiver holds as running,

- listed and finished, or listed running but quiet for ``quiet_s``: fetch its events after
  the cursor (``get_task_events``) and hand over the missing ones; when no event says how
  it ended (cancelled, or the server has no events tool or no longer retains them), a
  STATE update with the task as the server reports it follows them;
- not listed: ``get_task``; ``not_found`` (the server restarted without its outbox, or
  forgot it) hands the task over as far as it goes, then LOST.

A task the server lists that the receiver never heard of (one cancelled before its first
event, or every event of it lost) is adopted the same way, unless ``adopt`` is False. A
server that cannot be reached is tried again on its backoff, sooner than ``every_s``, and
reported (:meth:`Receiver.status <robot_mcp_kit.receiver.Receiver.status>`, the log);
it never stops the receiver.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

from robot_mcp_kit.log import get_logger
from robot_mcp_kit.models import TaskInfo, TaskState
from robot_mcp_kit.receiver._exceptions import ServerCallFailed
from robot_mcp_kit.receiver._links import ServerLink
from robot_mcp_kit.receiver._repair import Absorb
from robot_mcp_kit.receiver._state import Final, ReceiverState, TaskRecord
from robot_mcp_kit.receiver._stats import Counters
from robot_mcp_kit.receiver._tools import EventsPage, ToolSession
from robot_mcp_kit.receiver._updates import UpdateKind

__all__ = ["Listed", "Reconciler"]

_log = get_logger("robot_mcp_kit.receiver")

Listed = Callable[[str, list[TaskInfo]], None]
"""Called with each server's ``list_tasks`` answer (fake_rvc shows the states)."""


class Reconciler:
    """The receiver's reconciliation polls. Use from its event loop only.

    Args:
        state: the tasks.
        links: the servers by name.
        absorb: stores a page of fetched events.
        wake: restarts a task's lane.
        counters: where polls are counted.
        every_s: the interval of the background polls (None: only at start and on
            request).
        quiet_s: a running task that got no event for this long is asked for its events.
        adopt: take on tasks the server lists that the receiver never heard of.
        on_listed: called with each server's ``list_tasks`` answer.
        clock: unix seconds.
    """

    def __init__(
        self,
        state: ReceiverState,
        links: dict[str, ServerLink],
        absorb: Absorb,
        wake: Callable[[TaskRecord], None],
        counters: Counters,
        *,
        every_s: float | None = 60.0,
        quiet_s: float = 60.0,
        adopt: bool = True,
        on_listed: Listed | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._state = state
        self._links = links
        self._absorb = absorb
        self._wake = wake
        self._counters = counters
        self.every_s = every_s
        self.quiet_s = quiet_s
        self.adopt = adopt
        self._on_listed = on_listed
        self._clock = clock
        self._loop_task: asyncio.Task[None] | None = None
        self._poke = asyncio.Event()

    def __repr__(self) -> str:
        return f"<Reconciler every_s={self.every_s} servers={sorted(self._links)}>"

    async def reconcile(self) -> dict[str, dict[str, Any]]:
        """Poll every server with an MCP URL once; per server, what came of it.

        ``{"tasks": N, "caught_up": M}`` when it answered; ``{"error": code, "detail":
        ..., "retry_in_s": S}`` when it did not (or is in its backoff pause); servers
        without an MCP URL are left out. Never raises for a server's failure.
        """
        links = [link for link in self._links.values() if link.tools is not None]
        results = await asyncio.gather(*(self._poll(link) for link in links))
        return {link.name: result for link, result in zip(links, results, strict=True)}

    async def _poll(self, link: ServerLink) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        if not link.health.ready(loop.time()):
            return {
                "error": "unreachable",
                "detail": f"{link.name} is in its backoff pause after {link.health.failures} "
                f"failed call(s): {link.health.last_error}",
                "retry_in_s": round(link.health.wait_s(loop.time()), 3),
            }
        try:
            return await link.call("reconcile", self._catch_up_all)
        except ServerCallFailed as exc:
            return {
                "error": exc.code,
                "detail": exc.detail,
                "retry_in_s": round(link.health.wait_s(loop.time()), 3),
            }

    async def _catch_up_all(self, session: ToolSession) -> dict[str, Any]:
        server = session.server.name
        infos = await session.list_tasks()
        now = self._clock()
        if self._on_listed is not None:
            try:
                self._on_listed(server, infos)
            except Exception:
                _log.exception("receiver_on_listed_failed", server=server)
        listed = {info.task_id: info for info in infos}
        known: list[str] = []
        caught_up = 0
        for info in infos:
            record = self._state.find((server, info.task_id))
            if record is None:
                if not self.adopt:
                    continue
                record = self._state.learn(server, info, now)
            else:
                known.append(info.task_id)
            if not record.running:
                continue
            quiet = now - record.last_event_at >= self.quiet_s
            if info.state == TaskState.RUNNING and not quiet:
                continue
            caught_up += await self._catch_up(session, record, info)
        if known:
            self._state.store.touch(server, known, now)
        for record in self._state.running(server):
            if record.task_id in listed:
                continue
            asked = await session.get_task(record.task_id)
            if asked is None:
                self._lost(record)
                caught_up += 1
            else:
                caught_up += await self._catch_up(session, record, asked)
        self._counters.add("reconciles")
        return {"tasks": len(infos), "caught_up": caught_up}

    async def _catch_up(self, session: ToolSession, record: TaskRecord, info: TaskInfo) -> int:
        """Fetch the task's events after its cursor; queue the server's word if needed.

        Returns 1 when something was learnt (events, a state, its loss), else 0.
        """
        link = self._links[record.server]
        page: EventsPage | None = None
        if link.events_tool:
            try:
                page = await session.task_events(record.task_id, record.delivered_seq)
            except ServerCallFailed as exc:
                if exc.code != "error":
                    raise
                link.events_tool = False  # the server has no get_task_events
            else:
                if page is None:
                    self._lost(record)
                    return 1
        new = 0 if page is None else await self._absorb(record.server, page, "reconcile")
        learnt = 1 if new else 0
        if info.state != TaskState.RUNNING and record.terminal_seq is None:
            # No event of the task says how it ended: a cancel posts none, and the server
            # may no longer have (or never had) the events that would.
            hole = _hole_after(record, page)
            if hole is not None:
                self._state.skip(record, hole[0], hole[1], "reconcile")
            self._state.finish(record, Final(UpdateKind.STATE, info, "reconcile"))
            learnt = 1
        if learnt:
            self._wake(record)
        return learnt

    def _lost(self, record: TaskRecord) -> None:
        _log.warning("receiver_task_lost", server=record.server, task_id=record.task_id)
        hole = record.missing()
        if hole is not None:
            self._state.skip(record, hole[0], hole[1], "reconcile")
        self._state.finish(record, Final(UpdateKind.LOST, source="reconcile"))
        self._wake(record)

    # -- the background loop --------------------------------------------------------------

    def start(self) -> None:
        """Poll now, then every ``every_s`` (a failed server on its backoff), until
        :meth:`aclose`."""
        if self._loop_task is None:
            self._loop_task = asyncio.get_running_loop().create_task(
                self._every(), name="receiver reconcile"
            )

    def poke(self) -> None:
        """Poll again now (the background loop)."""
        self._poke.set()

    async def _every(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                await self.reconcile()
            except Exception:  # never let the loop die
                _log.exception("receiver_reconcile_failed")
            waits = [
                link.health.wait_s(loop.time())
                for link in self._links.values()
                if link.tools is not None and link.health.reachable is False
            ]
            pause = min([*waits, self.every_s if self.every_s is not None else float("inf")])
            if pause == float("inf"):
                return
            self._poke.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._poke.wait(), timeout=max(pause, 0.05))

    async def aclose(self) -> None:
        """Stop the background polls (idempotent)."""
        task, self._loop_task = self._loop_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _hole_after(record: TaskRecord, page: EventsPage | None) -> tuple[int, int] | None:
    """The hole that keeps the task's waiting events from being handed over, if the server
    cannot fill it (it gave what it had: ``page``, or nothing)."""
    hole = record.missing()
    if hole is None:
        return None
    if page is not None and any(hole[0] <= f.event.seq <= hole[1] for f in page.events):
        return None
    return hole
