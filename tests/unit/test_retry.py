"""Tests of RetryPolicy and the Clock port: the 0.5/2/8/30 s schedule, the cap, Retry-After."""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest

from robot_mcp_kit import Clock, RetryPolicy, SystemClock

SPEC_SCHEDULE = [0.5, 2.0, 8.0] + [30.0] * 19  # attempts at 0, 0.5, 2.5, 10.5, 40.5 ... 580.5 s


def run_schedule(policy: RetryPolicy, retry_after_s: float | None = None) -> list[float]:
    """Return the pauses a never-acknowledged event gets (attempts take no time)."""
    pauses: list[float] = []
    elapsed = 0.0
    for attempt in itertools.count(1):
        delay = policy.next_delay(attempt, elapsed, retry_after_s)
        if delay is None:
            return pauses
        pauses.append(delay)
        elapsed += delay
    raise AssertionError("unreachable")  # pragma: no cover


class TestSchedule:
    def test_delays_follow_the_spec_then_repeat_forever(self):
        """delay_after(n) is 0.5, 2, 8 s for the first three attempts, then 30 s for ever."""
        assert [RetryPolicy().delay_after(n) for n in range(1, 9)] == [
            0.5,
            2.0,
            8.0,
            30.0,
            30.0,
            30.0,
            30.0,
            30.0,
        ]

    def test_default_policy_gives_up_before_ten_minutes(self):
        """A never-acknowledged event is retried 0.5, 2, 8, then every 30 s, until 600 s."""
        pauses = run_schedule(RetryPolicy())
        assert pauses == SPEC_SCHEDULE
        assert sum(pauses) == 580.5  # the last attempt; the next would start at 610.5 s

    def test_attempt_duration_counts_towards_the_cap(self):
        """Elapsed time includes the attempts themselves, not only the pauses."""
        policy = RetryPolicy()
        assert policy.next_delay(5, 570.0) == 30.0
        assert policy.next_delay(5, 570.1) is None

    def test_delay_after_rejects_attempt_zero(self):
        """Attempt numbers start at 1."""
        with pytest.raises(ValueError, match="start at 1"):
            RetryPolicy().delay_after(0)

    def test_custom_policy_is_used_as_given(self):
        """A policy with tiny delays (for real-clock tests) keeps its own shape."""
        policy = RetryPolicy(delays_s=(0.01, 0.02), then_every_s=0.05, give_up_after_s=0.2)
        assert run_schedule(policy) == [0.01, 0.02, 0.05, 0.05, 0.05]

    @pytest.mark.parametrize(
        "kwargs",
        [
            {"delays_s": (0.5, -1.0)},
            {"then_every_s": -1.0},
            {"give_up_after_s": -1.0},
            {"retry_after_cap_s": -0.1},
        ],
    )
    def test_negative_settings_are_refused(self, kwargs):
        """A policy with a negative duration is a programming error, refused at once."""
        with pytest.raises(ValueError, match="must not be negative"):
            RetryPolicy(**kwargs)


class TestRetryAfter:
    def test_retry_after_lengthens_a_short_pause(self):
        """Retry-After is a lower bound on the pause."""
        assert RetryPolicy().next_delay(1, 0.0, retry_after_s=5.0) == 5.0

    def test_retry_after_never_shortens_the_schedule(self):
        """A Retry-After below the scheduled pause leaves the schedule alone."""
        assert RetryPolicy().next_delay(4, 10.0, retry_after_s=1.0) == 30.0

    def test_retry_after_is_capped(self):
        """A huge Retry-After waits at most retry_after_cap_s (30 s)."""
        assert RetryPolicy().next_delay(1, 0.0, retry_after_s=3600.0) == 30.0

    def test_retry_after_still_respects_the_give_up_cap(self):
        """A lengthened pause that would end past 600 s gives up instead."""
        assert RetryPolicy().next_delay(2, 590.0, retry_after_s=20.0) is None


class TestSystemClock:
    async def test_system_clock_reads_real_time_and_sleeps(self):
        """SystemClock is the real time.time / time.monotonic / asyncio.sleep."""
        clock = SystemClock()
        assert isinstance(clock, Clock)
        assert abs(clock.time() - time.time()) < 5
        before = clock.monotonic()
        await clock.sleep(0.01)
        assert clock.monotonic() >= before + 0.005
        assert repr(clock) == "SystemClock()"

    async def test_system_clock_sleep_is_cancellable(self):
        """A pause between attempts can be cancelled (poster shutdown)."""
        task = asyncio.create_task(SystemClock().sleep(60))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
