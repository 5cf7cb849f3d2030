"""Is the receiver's signature compare measurably faster for a wrong first byte? (§4.3)

A compare that stops at the first differing character answers a signature wrong in its
first hex digit sooner than one wrong in its last: the difference is what a timing attack
measures. Over HTTP the suite can only see a gross leak (tens of microseconds and up,
e.g. a compare that does work per character); ``hmac.compare_digest`` leaks nothing, and a
naive ``==`` on 64 characters leaks nanoseconds, far below what the network lets through.
So the check is best effort, and its finding is a *warning*, never a failure.

It must never cry wolf on a loaded machine (a CI runner with two busy cores). The suite
sends the two kinds in pairs, in random order within each pair, so that load and any
first-or-second effect fall on both alike, and applies a one-sided sign test to the
paired differences: the receiver leaks only when the wrong-first-byte post was the faster
one in so many pairs that chance explains it less than once in :data:`P_VALUE` runs, **and**
the median difference is at least :data:`MIN_EFFECT_S`. Noise, however large, is symmetric
between the two kinds, so it only makes a leak harder to see, never invents one.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["MIN_EFFECT_S", "P_VALUE", "WARMUP_POSTS", "TimingVerdict", "judge", "sign_test_p"]

P_VALUE = 1e-6
"""How unlikely by chance the ordering must be before the check warns."""

MIN_EFFECT_S = 0.001
"""The least median difference (wrong last digit minus wrong first digit) that counts."""

WARMUP_POSTS = 4
"""Posts sent (and not measured) before the pairs, to open and warm the connection."""


def sign_test_p(wins: int, trials: int) -> float:
    """P(at least ``wins`` successes in ``trials`` fair coin flips): the one-sided sign test."""
    if trials <= 0:
        return 1.0
    tail = sum(math.comb(trials, k) for k in range(max(wins, 0), trials + 1))
    return float(tail / 2**trials)


@dataclass(frozen=True)
class TimingVerdict:
    """What the pairs showed."""

    pairs: int
    """Pairs measured (ties left out)."""
    first_faster: int
    """Pairs in which the signature wrong in its first digit was answered sooner."""
    p_value: float
    median_difference_s: float
    """Median of (time for the wrong last digit - time for the wrong first digit)."""
    leaks: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "pairs": self.pairs,
            "first_digit_wrong_answered_sooner": self.first_faster,
            "p_value": float(f"{self.p_value:.3g}"),
            "median_difference_ms": round(self.median_difference_s * 1000, 3),
            "threshold": {"p_value": P_VALUE, "median_difference_ms": MIN_EFFECT_S * 1000},
        }


def judge(
    first_wrong_s: Sequence[float],
    last_wrong_s: Sequence[float],
    *,
    p_value: float = P_VALUE,
    min_effect_s: float = MIN_EFFECT_S,
) -> TimingVerdict:
    """Judge paired answer times: pair ``i`` is ``(first_wrong_s[i], last_wrong_s[i])``.

    Raises:
        ValueError: the two sequences differ in length.
    """
    if len(first_wrong_s) != len(last_wrong_s):
        raise ValueError("judge() needs one time of each kind per pair.")
    differences = [last - first for first, last in zip(first_wrong_s, last_wrong_s, strict=True)]
    untied = [d for d in differences if d != 0]
    wins = sum(1 for d in untied if d > 0)
    p = sign_test_p(wins, len(untied))
    median = statistics.median(differences) if differences else 0.0
    return TimingVerdict(
        pairs=len(untied),
        first_faster=wins,
        p_value=p,
        median_difference_s=median,
        leaks=p < p_value and median >= min_effect_s,
    )
