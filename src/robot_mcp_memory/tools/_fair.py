"""Each robot's share of the tool runner: :class:`FairScheduler`.

Every robot token gets a lane of its own. At most ``max_running`` calls of one lane run at
once; further calls wait in the lane, first come first served, and at most ``max_queued``
wait: the next one is refused at once (:class:`~robot_mcp_memory.Busy`) without running.
Lanes never wait for each other, so one robot's backlog never delays another robot's call:
a robot's calls compete with the others' only for the CPU, and only with as many calls as
its share lets run.

Why the bound lives here: on SSE the MCP SDK answers every ``POST /messages/`` with 202 at
once and spawns one task per message, so nothing below the runner stops a client from
having thousands of calls in flight. With the lanes, a robot holds at most
``max_running + max_queued`` of them beyond those being refused, each waiting call holding
only its parsed arguments.

Used from the event loop's thread only (not thread-safe). A lane is kept once made (a
few numbers and an empty queue, and the lane's recent pace is what ``retry_after_s`` is
estimated from), so keys must come from a bounded set: the runner's are the robot tokens'
tenants.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio

from robot_mcp_memory._exceptions import Busy

__all__ = ["FairScheduler"]

_SMOOTHING = 0.2
"""Weight of the newest duration in a lane's moving mean (for ``retry_after_s``)."""


class _Lane:
    """One tenant's calls: how many run, who waits (in arrival order), how long calls take."""

    def __init__(self) -> None:
        self.running = 0
        self.waiting: deque[anyio.Event] = deque()
        self.mean_s = 0.0


class FairScheduler:
    """Bounds the calls each tenant runs and queues; tenants never wait for each other.

    Args:
        max_running: calls of one tenant running at once (>= 1).
        max_queued: calls of one tenant waiting for a running place (>= 0); past it
            :meth:`slot` raises :class:`~robot_mcp_memory.Busy`.
        clock: monotonic seconds, for the durations behind ``retry_after_s``.
    """

    def __init__(
        self,
        max_running: int,
        max_queued: int,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_running < 1 or max_queued < 0:
            raise ValueError(
                f"max_running must be >= 1 and max_queued >= 0, got {max_running}, {max_queued}"
            )
        self.max_running = max_running
        self.max_queued = max_queued
        self._clock = clock
        self._lanes: dict[str, _Lane] = {}
        self.admitted = 0
        self.waited = 0
        self.refused = 0

    def __repr__(self) -> str:
        busy = sum(1 for lane in self._lanes.values() if lane.running)
        return (
            f"FairScheduler(max_running={self.max_running}, max_queued={self.max_queued}, "
            f"lanes={len(self._lanes)}, busy_lanes={busy}, admitted={self.admitted}, "
            f"waited={self.waited}, refused={self.refused})"
        )

    def running(self, key: str) -> int:
        """How many calls of ``key`` run now."""
        lane = self._lanes.get(key)
        return lane.running if lane is not None else 0

    def waiting(self, key: str) -> int:
        """How many calls of ``key`` wait now."""
        lane = self._lanes.get(key)
        return len(lane.waiting) if lane is not None else 0

    @asynccontextmanager
    async def slot(self, key: str) -> AsyncIterator[float]:
        """Hold one of ``key``'s running places for the ``async with`` body.

        Waits (first come first served within the lane) while ``key`` already runs
        ``max_running`` calls. A waiting call that is cancelled gives its place in the
        queue back; one cancelled just as it was admitted hands its running place to the
        next. Yields the seconds it waited (0.0 when a place was free).

        Raises:
            Busy: ``key`` already has ``max_queued`` calls waiting; nothing was taken.
        """
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = _Lane()
        arrived = started = self._clock()
        if lane.running < self.max_running:
            lane.running += 1  # a free place means nobody waits in this lane
        elif len(lane.waiting) >= self.max_queued:
            self.refused += 1
            raise Busy(key, lane.running, len(lane.waiting), self._retry_after_s(lane))
        else:
            turn = anyio.Event()
            lane.waiting.append(turn)
            self.waited += 1
            try:
                await turn.wait()
            except BaseException:  # cancelled (the client's cancel, or its session closed)
                if turn.is_set():  # admitted in the same instant: pass the place on
                    self._release(lane, None)
                else:
                    lane.waiting.remove(turn)
                raise
            started = self._clock()
        self.admitted += 1
        try:
            yield started - arrived
        finally:
            self._release(lane, self._clock() - started)

    def _release(self, lane: _Lane, duration_s: float | None) -> None:
        if duration_s is not None:
            lane.mean_s += _SMOOTHING * (duration_s - lane.mean_s)
        if lane.waiting:
            lane.waiting.popleft().set()  # the place goes straight to the next in line
        else:
            lane.running -= 1

    def _retry_after_s(self, lane: _Lane) -> int:
        """Whole seconds for the lane's backlog to drain at its recent pace (at least 1;
        1 too while the lane has no finished call to learn its pace from)."""
        backlog = lane.running + len(lane.waiting)
        return max(1, math.ceil(lane.mean_s * backlog / self.max_running))
