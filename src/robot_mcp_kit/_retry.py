"""The poster's retry schedule and its clock port (kit spec §3.1, DESIGN §3).

The schedule is the contract's: wait 0.5 s, 2 s and 8 s between the first attempts, then
every 30 s, and give up once the next attempt would start more than 10 minutes after the
first. It is deterministic (no jitter): one poster per server sends one event at a time,
so there is no herd of clients to spread out, and a fixed schedule is what the spec
states and what the tests pin.

Time is a port. :class:`Clock` gives the wall clock (to sign each attempt), a monotonic
clock (to measure the 10-minute cap) and an awaitable sleep. :class:`SystemClock` is the
real one; tests pass a fake whose ``sleep`` advances virtual time at once, so the whole
10-minute schedule runs in milliseconds.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from robot_mcp_kit._exceptions import ConfigurationError, InvalidArgument

__all__ = ["Clock", "RetryPolicy", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """Where the poster reads time and waits."""

    def time(self) -> float:
        """Wall-clock unix seconds; signs each attempt (``X-RVC-Timestamp``)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back; measures the give-up cap."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (the pause between two attempts)."""
        ...


class SystemClock:
    """The real clock: :func:`time.time`, :func:`time.monotonic`, :func:`asyncio.sleep`."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def __repr__(self) -> str:
        return "SystemClock()"


@dataclass(frozen=True)
class RetryPolicy:
    """When to retry an undelivered event, and when to give up on it.

    Attributes:
        delays_s: the pauses after the 1st, 2nd, 3rd... failed attempt.
        then_every_s: the pause after every later failed attempt.
        give_up_after_s: no attempt starts later than this many seconds after the
            event's first attempt; when the next one would, the event is given up.
        retry_after_cap_s: a receiver's ``Retry-After`` lengthens a pause up to this
            many seconds, never more (it is a lower bound, not an order).
    """

    delays_s: tuple[float, ...] = (0.5, 2.0, 8.0)
    then_every_s: float = 30.0
    give_up_after_s: float = 600.0
    retry_after_cap_s: float = 30.0

    def __post_init__(self) -> None:
        if any(d < 0 for d in self.delays_s):
            raise ConfigurationError(
                f"RetryPolicy.delays_s must not be negative, got {self.delays_s!r}"
            )
        if self.then_every_s < 0:
            raise ConfigurationError(
                f"RetryPolicy.then_every_s must not be negative, got {self.then_every_s!r}"
            )
        if self.give_up_after_s < 0:
            raise ConfigurationError(
                f"RetryPolicy.give_up_after_s must not be negative, got {self.give_up_after_s!r}"
            )
        if self.retry_after_cap_s < 0:
            raise ConfigurationError(
                "RetryPolicy.retry_after_cap_s must not be negative, "
                f"got {self.retry_after_cap_s!r}"
            )

    def delay_after(self, attempt: int) -> float:
        """Return the scheduled pause after failed attempt number ``attempt`` (1-based)."""
        if attempt < 1:
            raise InvalidArgument(f"attempt numbers start at 1, got {attempt}")
        if attempt <= len(self.delays_s):
            return self.delays_s[attempt - 1]
        return self.then_every_s

    def next_delay(
        self, attempt: int, elapsed_s: float, retry_after_s: float | None = None
    ) -> float | None:
        """Return the pause before the next attempt, or None to give the event up.

        Args:
            attempt: how many attempts have failed so far (1 after the first).
            elapsed_s: seconds since the event's first attempt started.
            retry_after_s: the receiver's ``Retry-After`` in seconds, if it sent one;
                it lengthens the pause (capped at ``retry_after_cap_s``), never shortens it.

        Returns:
            The pause in seconds, or None when the next attempt would start more than
            ``give_up_after_s`` after the first.
        """
        delay = self.delay_after(attempt)
        if retry_after_s is not None and retry_after_s > delay:
            delay = max(delay, min(retry_after_s, self.retry_after_cap_s))
        if elapsed_s + delay > self.give_up_after_s:
            return None
        return delay
