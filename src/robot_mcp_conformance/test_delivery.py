"""Delivery under failure: after 500s and dropped connections every event still arrives,
in order, retried on the contract's back-off schedule; a refused task holds back no other.

fake_rvc answers the server's next POST with 500 and drops the connection of the one
after; a compliant poster retries that event 0.5 s after the 500 and 2 s after the drop,
then delivers everything else in seq order. Then fake_rvc answers 413 to every post of
one task: a second task's events must still arrive meanwhile.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from robot_mcp_conformance._checks import Clause, clauses, enforces, violation
from robot_mcp_conformance._runs import DeliveryRun, RefusalRun

SCHEDULE_S = (0.5, 2.0, 8.0, 30.0)
FAILED = ("fault", "dropped")


def _window(expected_s: float) -> tuple[float, float]:
    """The accepted range for a measured pause (real clocks, loopback, a busy machine).

    A pause can only come out longer than the poster slept (a loaded machine delays the
    retry, never hastens it), so the upper bound is generous: twice the pause plus 0.5 s.
    It still tells each step from the next one (0.5 s is accepted up to 1.5 s, not 2 s;
    2 s up to 4.5 s, not 8 s), and the lower bound catches a poster that retries early.
    """
    return expected_s * 0.8 - 0.05, expected_s * 2 + 0.5


def _key(attempt: Any) -> Any:
    return attempt.event_id or (attempt.task_id, attempt.seq)


def _by_event(attempts: list[Any]) -> dict[Any, list[Any]]:
    grouped: dict[Any, list[Any]] = {}
    for attempt in attempts:
        grouped.setdefault(_key(attempt), []).append(attempt)
    return grouped


def _require_judgeable(delivery: DeliveryRun, clause: Clause) -> str:
    """Return the delivery task's id, or fail when its delivery cannot be judged.

    fake_rvc rejects a POST with a bad signature (or timestamp, or body) every time, so
    a server whose posts are rejected never gets an event through, faults or not.
    """
    task_id = delivery.run.require_task(clause)
    rejected = delivery.rejected()
    if rejected:
        counts = ", ".join(f"{k} x{v}" for k, v in sorted(rejected.items()))
        violation(
            clause,
            f"delivery cannot be judged because fake_rvc rejects this server's posts "
            f"({counts}): whether task {task_id}'s events are retried after a 500 or a "
            "dropped connection cannot be seen until they are accepted",
            {
                "attempts": [_brief(a) for a in delivery.attempts],
                "other_attempts": [_brief(a) for a in delivery.others],
            },
        )
    return task_id


def _faults_went_elsewhere(delivery: DeliveryRun) -> str:
    """A note for failure messages when the faults hit posts of other tasks."""
    hit = sorted({str(a.task_id) for a in delivery.others if a.outcome in FAILED})
    if not hit:
        return ""
    return (
        f"; the injected faults hit posts of other task(s) {', '.join(hit)} instead: the "
        "server was still posting for them during the delivery test"
    )


def _brief(attempt: Any) -> dict[str, Any]:
    return {
        "n": attempt.n,
        "at_s": round(attempt.received_mono, 3),
        "outcome": attempt.outcome,
        "status": attempt.status,
        "seq": attempt.seq,
        "type": attempt.type,
    }


@enforces(clauses.DELIVERY)
def test_every_event_arrives_in_order_despite_500s_and_drops(delivery: DeliveryRun) -> None:
    """§3.1: non-2xx answers and connection errors are retried; one task's events in seq order."""
    clause = clauses.DELIVERY
    run = delivery.run
    task_id = _require_judgeable(delivery, clause)
    failed = [a for a in delivery.attempts if a.outcome in FAILED]
    if not failed:
        violation(
            clause,
            f"fake_rvc never got to answer 500 or drop a post of task {task_id} "
            f"({delivery.faults_left} injected faults unused)" + _faults_went_elsewhere(delivery),
            {
                "attempts": [_brief(a) for a in delivery.attempts],
                "other_tasks_attempts": [_brief(a) for a in delivery.others],
            },
        )
    accepted = {_key(a) for a in delivery.attempts if a.outcome in ("accepted", "duplicate")}
    for attempt in failed:
        if _key(attempt) not in accepted:
            violation(
                clause,
                f"event seq {attempt.seq} ({attempt.type}) of task {attempt.task_id} was "
                f"{'dropped' if attempt.outcome == 'dropped' else f'answered {attempt.status}'} "
                "and never delivered afterwards",
                {
                    "failed_attempt": attempt.to_dict(),
                    "attempts": [_brief(a) for a in delivery.attempts],
                },
            )
    events = run.require_events(clause)
    seqs = [e.seq for e in events]
    for before, after in itertools.pairwise(events):
        if after.seq <= before.seq:
            violation(
                clause,
                f"task {task_id}'s events arrived as seqs {seqs}: seq {after.seq} after "
                f"{before.seq}",
                {"offending_event": after.to_dict(), "seqs": seqs},
            )
    if not run.terminal_events():
        violation(
            clause,
            f"task {task_id}'s terminal event never arrived after the faults"
            + (f" ({run.note})" if run.note else ""),
            {"seqs": seqs, "attempts": [_brief(a) for a in delivery.attempts]},
        )


@enforces(clauses.RETRY_SCHEDULE)
def test_retries_follow_the_backoff_schedule(delivery: DeliveryRun) -> None:
    """§3.1: retry pauses are 0.5 s, 2 s, 8 s, then 30 s (measured at fake_rvc)."""
    clause = clauses.RETRY_SCHEDULE
    task_id = _require_judgeable(delivery, clause)
    measured = 0
    for attempts in _by_event(delivery.attempts).values():
        for index, (prev, nxt) in enumerate(itertools.pairwise(attempts)):
            if prev.outcome not in FAILED:
                break
            expected = SCHEDULE_S[min(index, len(SCHEDULE_S) - 1)]
            pause = nxt.received_mono - prev.received_mono
            low, high = _window(expected)
            measured += 1
            if not low <= pause <= high:
                violation(
                    clause,
                    f"retry #{index + 1} of event seq {prev.seq} came {pause:.2f} s after the "
                    f"failed attempt; the schedule says {expected:g} s (accepted "
                    f"{low:.2f}-{high:.2f} s)",
                    {"attempts_of_this_event": [_brief(a) for a in attempts]},
                )
    if measured == 0:
        violation(
            clause,
            f"no event of task {task_id} was retried after fake_rvc answered 500 / "
            "dropped the connection" + _faults_went_elsewhere(delivery),
            {"attempts": [_brief(a) for a in delivery.attempts]},
        )


@enforces(clauses.LANES)
def test_a_refused_task_does_not_hold_back_other_tasks(refusal: RefusalRun) -> None:
    """§5.1: while one task's event is refused and retried, another task's events arrive."""
    clause = clauses.LANES
    refused_id = refusal.refused.require_task(clause)
    other_id = refusal.other.require_task(clause)
    if not refusal.refused_before_its_end:
        pytest.skip(
            f"task {refused_id} posted all its events before fake_rvc could refuse one; "
            "give --start-args a task that runs for a second or more to judge this clause"
        )
    if not refusal.other.terminal_events():
        violation(
            clause,
            f"while fake_rvc answered 413 to every post of task {refused_id}, task "
            f"{other_id}'s terminal event never arrived"
            + (f" ({refusal.other.note})" if refusal.other.note else "")
            + f"; it got seqs {[e.seq for e in refusal.other.events]}: the poster keeps "
            "other tasks' events waiting behind the refused one (one FIFO queue for the "
            "process?)",
            {
                "refused_attempts": [_brief(a) for a in refusal.refusals],
                "other_task_attempts": [_brief(a) for a in refusal.other.attempts],
            },
        )
