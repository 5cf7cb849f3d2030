"""Each robot's share of the tool runner: :class:`CallShares`.

Every robot token gets lanes of its own (the runner keys them by robot and
:class:`~robot_mcp_memory.tools.Lane`). A lane bounds three things:

- **calls at once**: at most ``max_running`` of its calls run; further calls wait in the
  lane, first come first served;
- **calls waiting**: at most ``max_queued`` wait; the next one is refused at once
  (:class:`~robot_mcp_memory.Busy`) without running;
- **time**: with ``time_share`` set, the lane's calls may keep running at most that
  fraction of the time on average. A lane has a budget of running time, ``burst_s`` when
  full, refilled at ``time_share`` seconds per second; each call is charged its running
  time when it ends, and the next call starts only once the budget is no longer negative.
  A robot making a few calls never notices; one that keeps the server busy is slowed to
  its share, its further calls waiting (and past the queue refused) like any others.

Lanes never wait for each other, so one robot's backlog never delays another robot's call.
Bounding calls at once is not enough by itself: the calls of every robot run in worker
threads of one process, sharing its event loop and the GIL, so a robot running even one
call after another without pause slows every other robot's calls (by about 3 x at the
95th percentile in ``benchmarks/bench_fairness.py``); the time share is what bounds that.

Why the bounds live here: on SSE the MCP SDK answers every ``POST /messages/`` with 202 at
once and spawns one task per message, so nothing below the runner stops a client from
having thousands of calls in flight. With the lanes, a robot holds at most
``max_running + max_queued`` of them per lane beyond those being refused, each waiting call
holding only its parsed arguments.

Used from the event loop's thread only (not thread-safe). A lane is kept once made (a few
numbers, an empty queue, and what ``retry_after_s`` and the time budget are computed from),
so keys must come from a bounded set: the runner's are the robot tokens' lanes.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from enum import StrEnum

import anyio

from robot_mcp_memory._exceptions import Busy

__all__ = ["CallShares", "Lane"]

_SMOOTHING = 0.2
"""Weight of the newest duration in a lane's moving mean (for ``retry_after_s``)."""


class Lane(StrEnum):
    """Which of its robot's two lanes a tool's calls wait in; each lane has the full share.

    Two, so a robot's brain searching documents never makes the same robot's grasp service
    wait for its lessons.
    """

    DOCUMENTS = "documents"  # the process tools: they read or write documents and their index
    RECORDS = "records"  # the registry and lesson tools: small rows


class _Lane:
    """One key's calls: how many run, who waits (in arrival order), how long calls take,
    and its time budget (seconds, negative when in debt, as of ``budget_at``)."""

    def __init__(self, budget_s: float, now: float) -> None:
        self.running = 0
        self.waiting: deque[anyio.Event] = deque()
        self.mean_s = 0.0
        self.budget_s = budget_s
        self.budget_at = now


class CallShares:
    """Bounds the calls each key runs, queues and the time they take; keys never wait for
    each other.

    Args:
        max_running: calls of one key running at once (>= 1).
        max_queued: calls of one key waiting for a running place (>= 0); past it
            :meth:`slot` raises :class:`~robot_mcp_memory.Busy`.
        time_share: the fraction of time (0 < share <= 1) one key's calls may keep running
            on average; None: no time bound.
        burst_s: the running time a key may use at once before ``time_share`` applies.
        clock: monotonic seconds (durations, the time budget).
        sleep: how a call waits for its key's budget (tests pass a fake with the clock).
    """

    def __init__(
        self,
        max_running: int,
        max_queued: int,
        *,
        time_share: float | None = None,
        burst_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        if max_running < 1 or max_queued < 0:
            raise ValueError(
                f"max_running must be >= 1 and max_queued >= 0, got {max_running}, {max_queued}"
            )
        if time_share is not None and not 0 < time_share <= 1:
            raise ValueError(f"time_share must be in (0, 1] or None, got {time_share}")
        if burst_s <= 0:
            raise ValueError(f"burst_s must be > 0, got {burst_s}")
        self.max_running = max_running
        self.max_queued = max_queued
        self.time_share = time_share
        self.burst_s = burst_s
        self._clock = clock
        self._sleep = sleep
        self._lanes: dict[str, _Lane] = {}
        self.admitted = 0
        self.waited = 0
        self.paced = 0
        self.refused = 0

    def __repr__(self) -> str:
        busy = sum(1 for lane in self._lanes.values() if lane.running)
        return (
            f"CallShares(max_running={self.max_running}, max_queued={self.max_queued}, "
            f"time_share={self.time_share}, lanes={len(self._lanes)}, busy_lanes={busy}, "
            f"admitted={self.admitted}, waited={self.waited}, paced={self.paced}, "
            f"refused={self.refused})"
        )

    def running(self, key: str) -> int:
        """How many calls of ``key`` run now (a call waiting for its budget counts)."""
        lane = self._lanes.get(key)
        return lane.running if lane is not None else 0

    def waiting(self, key: str) -> int:
        """How many calls of ``key`` wait for a running place now."""
        lane = self._lanes.get(key)
        return len(lane.waiting) if lane is not None else 0

    def budget_s(self, key: str) -> float:
        """``key``'s time budget now, in seconds (negative: the debt it must wait out)."""
        lane = self._lanes.get(key)
        return self.burst_s if lane is None else self._refill(lane)

    @asynccontextmanager
    async def slot(self, key: str) -> AsyncIterator[float]:
        """Hold one of ``key``'s running places for the ``async with`` body.

        Waits (first come first served within the lane) while ``key`` already runs
        ``max_running`` calls, then, with a time share, while its budget is negative. A
        waiting call that is cancelled gives its place back (in the queue, or the running
        place it was waiting for budget in, which goes to the next in line). Yields the
        seconds it waited (0.0 when it could start at once).

        Raises:
            Busy: ``key`` already has ``max_queued`` calls waiting; nothing was taken.
        """
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = _Lane(self.burst_s, self._clock())
        arrived = self._clock()
        queued = False
        if lane.running < self.max_running:
            lane.running += 1  # a free place means nobody waits in this lane
        elif len(lane.waiting) >= self.max_queued:
            self.refused += 1
            raise Busy(key, lane.running, len(lane.waiting), self._retry_after_s(lane))
        else:
            turn = anyio.Event()
            lane.waiting.append(turn)
            self.waited += 1
            queued = True
            try:
                await turn.wait()
            except BaseException:  # cancelled (the client's cancel, or its session closed)
                if turn.is_set():  # admitted in the same instant: pass the place on
                    self._release(lane, None)
                else:
                    lane.waiting.remove(turn)
                raise
        started: float | None = None
        try:
            paced = await self._wait_for_budget(lane)
            started = self._clock()
            self.admitted += 1
            yield started - arrived if queued or paced else 0.0
        finally:
            self._release(lane, None if started is None else self._clock() - started)

    async def _wait_for_budget(self, lane: _Lane) -> bool:
        """Sleep out the lane's debt, if any; whether it had to."""
        if self.time_share is None:
            return False
        debt = -self._refill(lane)
        if debt <= 0:
            return False
        self.paced += 1
        await self._sleep(debt / self.time_share)
        return True

    def _refill(self, lane: _Lane) -> float:
        """The lane's budget brought up to now (refilled at the share, capped at the burst)."""
        now = self._clock()
        if self.time_share is not None:
            lane.budget_s = min(
                self.burst_s, lane.budget_s + (now - lane.budget_at) * self.time_share
            )
        lane.budget_at = now
        return lane.budget_s

    def _release(self, lane: _Lane, duration_s: float | None) -> None:
        if duration_s is not None:
            lane.mean_s += _SMOOTHING * (duration_s - lane.mean_s)
            if self.time_share is not None:
                self._refill(lane)
                lane.budget_s -= duration_s
        if lane.waiting:
            lane.waiting.popleft().set()  # the place goes straight to the next in line
        else:
            lane.running -= 1

    def _retry_after_s(self, lane: _Lane) -> int:
        """Whole seconds for the lane's backlog to drain at its recent pace (at least 1;
        1 too while the lane has no finished call to learn its pace from)."""
        backlog = lane.running + len(lane.waiting)
        rate = float(self.max_running)
        debt_s = 0.0
        if self.time_share is not None:
            rate = min(rate, self.time_share)
            debt_s = max(0.0, -self._refill(lane)) / self.time_share
        return max(1, math.ceil(debt_s + lane.mean_s * backlog / rate))
