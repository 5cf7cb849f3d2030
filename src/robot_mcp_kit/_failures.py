"""Write failures grouped into episodes: one log line when writes start failing, one when
they work again, and a health flag in between.

A full disk fails every write until space comes back: logging each failure would flood the
log with the same line. :class:`FailureEpisodes` tells its owner when to log. Near the
limit a disk flaps (a small write fits, a larger one does not), so an episode that starts
within :data:`EPISODE_LOG_GAP_S` of the end of a logged one is folded into it: its start
and end are not logged, unless it is still failing that long after it started (then its
start is logged, so the last line never claims a recovery that did not last).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

__all__ = ["EPISODE_LOG_GAP_S", "FailureEpisodes"]

EPISODE_LOG_GAP_S: Final = 60.0
"""Episodes starting within this many seconds of a logged one's end are not logged."""


class FailureEpisodes:
    """The failure episodes of one kind of write. Not thread-safe: one owner calls it.

    Args:
        log_gap_s: see :data:`EPISODE_LOG_GAP_S`.
        clock: monotonic seconds (tests pass a fake).
    """

    def __init__(
        self,
        *,
        log_gap_s: float = EPISODE_LOG_GAP_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log_gap_s = log_gap_s
        self._clock = clock
        self.failing = False
        """True from a failure until the next success."""
        self.failures = 0
        """Failures in the current (or last) episode."""
        self.started_at: float | None = None
        """Monotonic time the current (or last) episode started."""
        self._ended_at: float | None = None
        self._logged = False  # the current episode's start was logged
        self._last_logged_end: float | None = None

    def __repr__(self) -> str:
        state = "failing" if self.failing else "ok"
        return f"<FailureEpisodes {state} failures={self.failures}>"

    def failed(self, count: int = 1) -> bool:
        """Record ``count`` failures; True when the caller should log them (an episode starts)."""
        now = self._clock()
        if not self.failing:
            self.failing, self.failures, self.started_at = True, count, now
            gap = None if self._last_logged_end is None else now - self._last_logged_end
            self._logged = gap is None or gap >= self.log_gap_s
            return self._logged
        self.failures += count
        if not self._logged and self.started_at is not None:
            # A folded episode that lasts: log it after all.
            self._logged = now - self.started_at >= self.log_gap_s
            return self._logged
        return False

    def succeeded(self) -> bool:
        """Record a success; True when the caller should log it (a logged episode ends)."""
        if not self.failing:
            return False
        self.failing = False
        self._ended_at = self._clock()
        if self._logged:
            self._last_logged_end = self._ended_at
        return self._logged

    def seconds(self) -> float:
        """How long the current (or last) episode lasted, in seconds."""
        if self.started_at is None:
            return 0.0
        end = self._clock() if self.failing or self._ended_at is None else self._ended_at
        return round(end - self.started_at, 3)
