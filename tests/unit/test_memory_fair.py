"""Issue 18, finding 3: each robot's lane of the tool runner (:class:`FairScheduler`).

The scheduler runs on the event loop; the tests drive it with real tasks and events (no
sleeps to order things: each step waits for the state it needs), and a fake clock where
durations matter.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from robot_mcp_memory import Busy
from robot_mcp_memory.tools import FairScheduler


async def settle() -> None:
    """Let every ready task run until nothing moves (the scheduler never sleeps)."""
    for _ in range(20):
        await asyncio.sleep(0)


class Calls:
    """Calls through one scheduler: each holds its place until the test lets it finish."""

    def __init__(self, scheduler: FairScheduler) -> None:
        self.scheduler = scheduler
        self.order: list[str] = []
        self.refused: list[Busy] = []
        self.release: dict[str, asyncio.Event] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}

    def start(self, key: str, name: str) -> asyncio.Task[None]:
        self.release[name] = asyncio.Event()

        async def call() -> None:
            try:
                async with self.scheduler.slot(key):
                    self.order.append(name)
                    await self.release[name].wait()
            except Busy as exc:
                self.refused.append(exc)

        task = asyncio.create_task(call(), name=name)
        self.tasks[name] = task
        return task

    def finish(self, name: str) -> None:
        self.release[name].set()


@pytest.fixture
def calls() -> Callable[..., Calls]:
    made: list[Calls] = []

    def make(max_running: int = 2, max_queued: int = 3, **kwargs: float) -> Calls:
        c = Calls(FairScheduler(max_running, max_queued, **kwargs))  # type: ignore[arg-type]
        made.append(c)
        return c

    yield make
    for c in made:
        for task in c.tasks.values():
            task.cancel()


async def until(condition: Callable[[], bool], what: str) -> None:
    for _ in range(200):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never happened: {what}")


class TestShare:
    async def test_a_robot_runs_its_share_then_waits_in_arrival_order(self, calls) -> None:
        """max_running at once; the rest start one by one as places free, first come first."""
        c: Calls = calls(max_running=2, max_queued=3)
        for n in range(5):
            c.start("robot:a", f"a{n}")
        await settle()
        assert c.order == ["a0", "a1"]
        assert (c.scheduler.running("robot:a"), c.scheduler.waiting("robot:a")) == (2, 3)
        c.finish("a1")
        await until(lambda: c.order == ["a0", "a1", "a2"], "a2 admitted")
        c.finish("a0")
        await until(lambda: c.order[3:] == ["a3"], "a3 admitted")
        c.finish("a2")
        await until(lambda: c.order[4:] == ["a4"], "a4 admitted")
        assert (c.scheduler.running("robot:a"), c.scheduler.waiting("robot:a")) == (2, 0)

    async def test_past_the_queue_a_call_is_refused_at_once_and_takes_nothing(self, calls) -> None:
        """The call after max_running + max_queued raises Busy with the lane's counts."""
        c: Calls = calls(max_running=2, max_queued=3)
        for n in range(7):
            c.start("robot:a", f"a{n}")
        await settle()
        assert len(c.refused) == 2
        busy = c.refused[0]
        assert (busy.key, busy.running, busy.waiting, busy.retry_after_s) == ("robot:a", 2, 3, 1)
        assert "robot:a" in str(busy)
        assert (c.scheduler.running("robot:a"), c.scheduler.waiting("robot:a")) == (2, 3)
        assert c.scheduler.refused == 2
        assert c.tasks["a5"].done()
        assert c.tasks["a6"].done()

    async def test_no_queue_means_refused_as_soon_as_the_share_runs(self, calls) -> None:
        c: Calls = calls(max_running=1, max_queued=0)
        c.start("robot:a", "a0")
        c.start("robot:a", "a1")
        await settle()
        assert c.order == ["a0"]
        assert [b.waiting for b in c.refused] == [0]

    async def test_one_robots_backlog_never_delays_another_robot(self, calls) -> None:
        """A's lane is full (running and queued); B's call starts at once, and so does C's."""
        c: Calls = calls(max_running=2, max_queued=3)
        for n in range(6):
            c.start("robot:a", f"a{n}")
        await settle()
        c.start("robot:b", "b0")
        c.start("robot:c", "c0")
        await settle()
        assert c.order == ["a0", "a1", "b0", "c0"]
        assert c.scheduler.waiting("robot:a") == 3
        # When A's places free, they go to A's own queue, in order; B's next call still
        # starts at once.
        c.finish("a0")
        c.start("robot:b", "b1")
        await settle()
        assert c.order[:4] == ["a0", "a1", "b0", "c0"]
        assert sorted(c.order[4:]) == ["a2", "b1"]
        assert c.scheduler.waiting("robot:a") == 2

    async def test_repr_counts_lanes_and_calls(self, calls) -> None:
        c: Calls = calls(max_running=1, max_queued=1)
        c.start("robot:a", "a0")
        c.start("robot:a", "a1")
        c.start("robot:a", "a2")
        await settle()
        assert repr(c.scheduler) == (
            "FairScheduler(max_running=1, max_queued=1, lanes=1, busy_lanes=1, admitted=1, "
            "waited=1, refused=1)"
        )
        c.finish("a0")
        c.finish("a1")
        await until(lambda: all(t.done() for t in c.tasks.values()), "all done")
        assert "busy_lanes=0, admitted=2" in repr(c.scheduler)

    def test_bad_bounds_are_refused(self) -> None:
        with pytest.raises(ValueError, match="max_running must be >= 1"):
            FairScheduler(0, 1)
        with pytest.raises(ValueError, match="max_queued >= 0"):
            FairScheduler(1, -1)


class TestCancellation:
    async def test_a_cancelled_waiting_call_gives_its_place_back(self, calls) -> None:
        """The client cancels a queued call: the queue shrinks, a new call may queue, and the
        cancelled one never runs."""
        c: Calls = calls(max_running=1, max_queued=2)
        for n in range(3):
            c.start("robot:a", f"a{n}")
        await settle()
        assert c.scheduler.waiting("robot:a") == 2
        c.tasks["a1"].cancel()
        await settle()
        assert c.scheduler.waiting("robot:a") == 1
        c.start("robot:a", "a3")  # fits where a1 was
        await settle()
        assert c.refused == []
        c.finish("a0")
        await until(lambda: c.order == ["a0", "a2"], "a2 admitted after a0")
        c.finish("a2")
        await until(lambda: c.order == ["a0", "a2", "a3"], "a3 admitted after a2")
        assert "a1" not in c.order

    async def test_cancelled_as_it_is_admitted_hands_the_place_on(self, calls) -> None:
        """A waiting call cancelled in the same instant its place is handed to it passes the
        place to the next in line: no place is lost."""
        c: Calls = calls(max_running=1, max_queued=2)
        for n in range(3):
            c.start("robot:a", f"a{n}")
        await settle()
        c.finish("a0")
        await asyncio.sleep(0)  # a0 leaves its slot: the place is handed to a1 ...
        c.tasks["a1"].cancel()  # ... which is cancelled before it could run
        await until(lambda: c.order == ["a0", "a2"], "a2 admitted")
        assert c.scheduler.running("robot:a") == 1
        c.finish("a2")
        await until(lambda: c.scheduler.running("robot:a") == 0, "lane empty")
        assert c.scheduler.waiting("robot:a") == 0

    async def test_a_session_closing_cancels_every_waiting_call(self, calls) -> None:
        """When the transport closes, the SDK cancels the session's handler tasks: every
        waiting call leaves the queue and the lane empties once the running ones end."""
        c: Calls = calls(max_running=1, max_queued=5)
        for n in range(6):
            c.start("robot:a", f"a{n}")
        await settle()
        for n in range(1, 6):
            c.tasks[f"a{n}"].cancel()
        await settle()
        assert c.scheduler.waiting("robot:a") == 0
        c.finish("a0")
        await until(lambda: "busy_lanes=0" in repr(c.scheduler), "lane idle")
        assert c.order == ["a0"]


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class TestRetryAfter:
    async def test_retry_after_is_the_backlog_at_the_lanes_recent_pace(self) -> None:
        """Calls of A take 2 s each: with 2 running and 2 waiting (share 2), the backlog
        drains in about 4 s; the wait is reported to the caller too."""
        clock = FakeClock()
        scheduler = FairScheduler(2, 2, clock=clock)
        waits: list[float] = []

        async def call(hold: asyncio.Event) -> None:
            async with scheduler.slot("robot:a") as waited_s:
                waits.append(waited_s)
                await hold.wait()

        for _ in range(10):  # teach the lane its pace: 2 s a call
            hold = asyncio.Event()
            task = asyncio.create_task(call(hold))
            await settle()
            clock.now += 2.0
            hold.set()
            await task
        holds = [asyncio.Event() for _ in range(4)]
        tasks = [asyncio.create_task(call(h)) for h in holds]
        await settle()
        with pytest.raises(Busy) as info:
            async with scheduler.slot("robot:a"):
                pytest.fail("a refused call must not run")
        assert info.value.retry_after_s == 4
        clock.now += 3.0
        holds[0].set()
        await settle()
        assert waits[-1] == 3.0  # the first waiting call waited 3 s of the fake clock
        for h in holds:
            h.set()
        await asyncio.gather(*tasks)
