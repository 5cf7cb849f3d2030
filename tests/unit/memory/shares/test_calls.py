"""Issue 18, finding 3: each robot's lane of the tool runner (:class:`CallShares`).

The scheduler runs on the event loop; the tests drive it with real tasks and events (no
sleeps to order things: each step waits for the state it needs), and a fake clock where
durations matter.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from robot_mcp_memory import Busy
from robot_mcp_memory.shares import CallShares


async def settle() -> None:
    """Let every ready task run until nothing moves (the scheduler never sleeps)."""
    for _ in range(20):
        await asyncio.sleep(0)


class Calls:
    """Calls through one scheduler: each holds its place until the test lets it finish."""

    def __init__(self, scheduler: CallShares) -> None:
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
        c = Calls(CallShares(max_running, max_queued, **kwargs))  # type: ignore[arg-type]
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
            "CallShares(max_running=1, max_queued=1, time_share=None, lanes=1, "
            "busy_lanes=1, admitted=1, waited=1, paced=0, refused=1)"
        )
        c.finish("a0")
        c.finish("a1")
        await until(lambda: all(t.done() for t in c.tasks.values()), "all done")
        assert "busy_lanes=0, admitted=2" in repr(c.scheduler)

    def test_bad_bounds_are_refused(self) -> None:
        with pytest.raises(ValueError, match="max_running must be >= 1"):
            CallShares(0, 1)
        with pytest.raises(ValueError, match="max_queued >= 0"):
            CallShares(1, -1)
        with pytest.raises(ValueError, match="time_share must be in"):
            CallShares(1, 1, time_share=0)
        with pytest.raises(ValueError, match="burst_s must be > 0"):
            CallShares(1, 1, time_share=0.5, burst_s=0)


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
    """Monotonic seconds the test moves; ``sleep`` moves them too and records each wait."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


class TestTimeShare:
    async def run_for(self, scheduler: CallShares, clock: FakeClock, key: str, s: float) -> float:
        """One call of ``key`` that runs ``s`` seconds of the fake clock; the wait it had."""
        async with scheduler.slot(key) as waited_s:
            clock.now += s
        return waited_s

    async def test_a_burst_runs_at_once_then_the_lane_is_paced_to_its_share(self) -> None:
        """Share 0.25, burst 1 s: calls run at once while the budget lasts; then each waits
        until its lane's running time is back within a quarter of the time."""
        clock = FakeClock()
        scheduler = CallShares(1, 4, time_share=0.25, burst_s=1.0, clock=clock, sleep=clock.sleep)
        waits = [await self.run_for(scheduler, clock, "robot:a", 0.5) for _ in range(6)]
        # Budget 1, 0.5, 0.125 (each call refills 0.125 while it runs): three at once; then
        # -0.25 to wait out (1 s at 0.25/s), then -0.375 after every call: 1.5 s each, so
        # 0.5 s running in every 2 s, the share.
        assert waits == pytest.approx([0.0, 0.0, 0.0, 1.0, 1.5, 1.5])
        assert "paced=3" in repr(scheduler)

    async def test_another_lane_is_never_paced_by_ones_debt(self) -> None:
        clock = FakeClock()
        scheduler = CallShares(1, 4, time_share=0.1, burst_s=0.5, clock=clock, sleep=clock.sleep)
        await self.run_for(scheduler, clock, "robot:a", 3.0)
        assert scheduler.budget_s("robot:a") == pytest.approx(-2.5)
        assert await self.run_for(scheduler, clock, "robot:b", 0.1) == 0.0
        assert clock.slept == []
        # The 0.1 s b ran refilled a by 0.01 s: 2.49 s of debt at 0.1/s.
        waited = await self.run_for(scheduler, clock, "robot:a", 0.1)
        assert waited == pytest.approx(24.9)

    async def test_the_budget_refills_while_idle_up_to_the_burst(self) -> None:
        clock = FakeClock()
        scheduler = CallShares(1, 4, time_share=0.5, burst_s=1.0, clock=clock, sleep=clock.sleep)
        await self.run_for(scheduler, clock, "robot:a", 2.0)
        assert scheduler.budget_s("robot:a") == pytest.approx(-1.0)
        clock.now += 100.0
        assert scheduler.budget_s("robot:a") == 1.0
        assert scheduler.budget_s("robot:unknown") == 1.0

    async def test_a_call_cancelled_while_waiting_for_budget_frees_the_place(self) -> None:
        """A call waiting out its lane's debt holds the running place; cancelled, it leaves
        it to the next in line, which waits out the debt in turn, and nothing is charged."""
        gate = asyncio.Event()
        clock = FakeClock()

        async def real_sleep(seconds: float) -> None:
            clock.slept.append(seconds)
            await gate.wait()  # a sleep the test ends by cancelling or releasing

        scheduler = CallShares(1, 2, time_share=0.5, burst_s=0.5, clock=clock, sleep=real_sleep)
        await self.run_for(scheduler, clock, "robot:a", 1.5)  # budget -1.0: 2 s to wait out
        started: list[str] = []

        async def call(name: str) -> None:
            async with scheduler.slot("robot:a"):
                started.append(name)

        first = asyncio.create_task(call("first"))
        second = asyncio.create_task(call("second"))
        await settle()
        assert (scheduler.running("robot:a"), scheduler.waiting("robot:a")) == (1, 1)
        first.cancel()
        await settle()
        assert (scheduler.running("robot:a"), scheduler.waiting("robot:a")) == (1, 0)
        assert clock.slept == [2.0, 2.0]  # the second now waits out the same debt
        gate.set()
        await second
        assert started == ["second"]
        assert first.cancelled()
        assert scheduler.running("robot:a") == 0

    async def test_retry_after_counts_the_debt(self) -> None:
        """A lane in debt with a full queue: retry after the debt plus the backlog at the
        share's pace."""
        gate = asyncio.Event()
        clock = FakeClock()

        async def held_sleep(seconds: float) -> None:
            await gate.wait()

        scheduler = CallShares(1, 0, time_share=0.5, burst_s=0.5, clock=clock, sleep=held_sleep)
        await self.run_for(scheduler, clock, "robot:a", 1.5)  # budget -1.0, mean 0.3 s
        task = asyncio.create_task(self.run_for(scheduler, clock, "robot:a", 0.0))
        await settle()  # waiting out its debt in the lane's one running place
        with pytest.raises(Busy) as info:
            async with scheduler.slot("robot:a"):
                pytest.fail("refused calls never run")
        assert info.value.retry_after_s == 3  # ceil(1.0 / 0.5 debt + 1 x 0.3 / 0.5 backlog)
        gate.set()
        await task


class TestRetryAfter:
    async def test_retry_after_is_the_backlog_at_the_lanes_recent_pace(self) -> None:
        """Calls of A take 2 s each: with 2 running and 2 waiting (share 2), the backlog
        drains in about 4 s; the wait is reported to the caller too."""
        clock = FakeClock()
        scheduler = CallShares(2, 2, clock=clock)
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
