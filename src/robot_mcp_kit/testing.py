"""Helpers for testing servers built on robot-mcp-kit.

Use :class:`RecordingPoster` in place of :class:`~robot_mcp_kit.events.EventPoster` to
run a :class:`~robot_mcp_kit.tasks.TaskManager` without any HTTP, then assert on the
events it produced::

    from robot_mcp_kit import TaskManager
    from robot_mcp_kit.testing import RecordingPoster

    async def test_navigation_reports_done():
        poster = RecordingPoster()
        manager = TaskManager("navigation", poster)
        info = manager.start("navigate_to", my_body)
        done = await poster.wait_for(info.task_id, "task_done", timeout_s=5)
        assert done.payload["result"] == {"arrived": True}
        assert [e.seq for e in poster.events_for(info.task_id)] == [1, 2, 3]

To run an :class:`~robot_mcp_kit.events.EventPoster`'s retry schedule in milliseconds,
pass it a :class:`FakeClock`: its ``sleep`` records the pause and advances virtual time at
once, so ``clock.sleeps`` is the schedule the poster followed::

    clock = FakeClock()
    poster = EventPoster("nav", URL, SECRET, clock=clock, transport=failing_transport)
    ...
    assert clock.sleeps[:3] == [0.5, 2.0, 8.0]

To test a server as a real process, :class:`ServiceProcess` starts it, waits until it is
ready (its port answers, a URL answers 2xx, or a probe of your own says so) and stops it by
pid, optionally in its own process group; :func:`free_port` picks a loopback port.

Nothing here needs the ``mcp`` extra; the process helpers use loopback only.
"""

from __future__ import annotations

import asyncio

from robot_mcp_kit._exceptions import ServiceStartError
from robot_mcp_kit._processes import (
    ReadyProbe,
    ServiceProcess,
    free_port,
    http_ok,
    wait_for_port,
)
from robot_mcp_kit.models import EventType, TaskEvent

__all__ = [
    "FakeClock",
    "ReadyProbe",
    "RecordingPoster",
    "ServiceProcess",
    "ServiceStartError",
    "free_port",
    "http_ok",
    "wait_for_port",
]


class FakeClock:
    """A :class:`~robot_mcp_kit.Clock` in virtual time, for the poster's retry schedule.

    ``sleep`` records the pause in :attr:`sleeps`, yields to the loop once and moves both
    clocks to the pause's end (the virtual time it began plus its length) unless they are
    already past it, so a 10-minute schedule runs in milliseconds and its pauses can be
    asserted exactly. Pauses that overlap (the poster's task lanes retrying side by side)
    overlap in virtual time too: two 8 s pauses begun at once end at +8 s, not +16 s.
    ``time()`` is ``wall0`` plus the virtual seconds elapsed; ``monotonic()`` starts at 0.
    :meth:`advance` moves time without a sleep.
    """

    def __init__(self, wall0: float = 1_765_532_000.0) -> None:
        self.wall0 = wall0
        self.mono = 0.0
        self.sleeps: list[float] = []

    def time(self) -> float:
        """Virtual wall-clock unix seconds."""
        return self.wall0 + self.mono

    def monotonic(self) -> float:
        """Virtual seconds since the clock was made."""
        return self.mono

    async def sleep(self, seconds: float) -> None:
        """Record ``seconds``, yield to the loop once, and move virtual time to the end."""
        self.sleeps.append(seconds)
        end = self.mono + seconds
        await asyncio.sleep(0)
        self.mono = max(self.mono, end)

    def advance(self, seconds: float) -> None:
        """Move virtual time forward by ``seconds`` (no sleep recorded)."""
        self.mono += seconds

    def __repr__(self) -> str:
        return (
            f"FakeClock(wall0={self.wall0!r}, elapsed_s={self.mono!r}, sleeps={len(self.sleeps)})"
        )


class RecordingPoster:
    """An :class:`~robot_mcp_kit.tasks.EventSink` that keeps every event in memory.

    ``events`` holds all events in the order they were posted. ``post`` never raises and
    never blocks. ``start`` and ``aclose`` exist so the recorder can stand in for an
    ``EventPoster`` wherever one is started and closed (a
    :class:`~robot_mcp_kit.TaskRuntime` too); ``aclose`` only sets :attr:`closed`.
    """

    def __init__(self) -> None:
        self.events: list[TaskEvent] = []
        self.closed = False
        self._waiters: list[tuple[str, str, asyncio.Future[TaskEvent]]] = []

    async def post(self, event: TaskEvent) -> None:
        """Record ``event`` and wake any :meth:`wait_for` it satisfies."""
        self.events.append(event)
        for task_id, type_, future in list(self._waiters):
            if event.task_id == task_id and event.type == type_ and not future.done():
                future.set_result(event)

    async def start(self) -> None:
        """Nothing to start (the recorder delivers nothing)."""

    async def aclose(self) -> None:
        """Mark the recorder closed (it keeps its events)."""
        self.closed = True

    @property
    def waiting(self) -> int:
        """How many :meth:`wait_for` calls are waiting now (0 once each returned or timed out)."""
        return len(self._waiters)

    def events_for(self, task_id: str) -> list[TaskEvent]:
        """Return the events of one task, in the order they were posted."""
        return [e for e in self.events if e.task_id == task_id]

    def types_for(self, task_id: str) -> list[str]:
        """Return the event types of one task, in order (handy in assertion messages)."""
        return [e.type for e in self.events if e.task_id == task_id]

    def clear(self) -> None:
        """Forget every recorded event."""
        self.events.clear()

    async def wait_for(self, task_id: str, type: EventType, timeout_s: float = 5.0) -> TaskEvent:
        """Return the first event of ``type`` for ``task_id``, waiting up to ``timeout_s``.

        Returns at once if such an event was already recorded.

        Raises:
            TimeoutError: no such event arrived in time; the message lists what did.
        """
        for event in self.events:
            if event.task_id == task_id and event.type == type:
                return event
        future: asyncio.Future[TaskEvent] = asyncio.get_running_loop().create_future()
        waiter = (task_id, str(type), future)
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(timeout_s):
                return await future
        except TimeoutError:
            raise TimeoutError(
                f"no {type!r} event for task {task_id!r} within {timeout_s} s; "
                f"its events so far: {self.types_for(task_id)!r}"
            ) from None
        finally:
            self._waiters.remove(waiter)
