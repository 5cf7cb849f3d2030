"""A task's seq: a gap and an out-of-order event are acknowledged, and the gap is noticed.

One task's events reach a receiver in seq order as long as its poster runs, but a poster
that restarts (its outbox lost, or events dropped after 10 minutes of retries) leaves a
gap, and a receiver must keep taking the task's later events: it notices the gap and
reconciles (§5.3, §6) rather than refusing what follows it.
"""

from __future__ import annotations

import pytest

from robot_mcp_conformance._checks import enforces, violation
from robot_mcp_conformance._hook import InspectionHook, ask
from robot_mcp_conformance._receiver_checks import receiver_clauses as clauses
from robot_mcp_conformance._receiver_runs import Acceptance
from robot_mcp_conformance.receiver.test_accept import require_acknowledged


@enforces(clauses.GAP_ACCEPTED)
def test_an_event_after_a_gap_is_acknowledged(accepted: Acceptance) -> None:
    """§5.3: seq 1 then seq 3: both acknowledged (the gap is the receiver's to repair)."""
    for exchange in accepted.gap:
        require_acknowledged(clauses.GAP_ACCEPTED, exchange)


@enforces(clauses.OUT_OF_ORDER_ACCEPTED)
def test_an_out_of_order_event_is_acknowledged(accepted: Acceptance) -> None:
    """§5.3: seq 1, 3, then 2: the late seq 2 is acknowledged, not refused."""
    first, third, late = accepted.reorder
    if not (first.acknowledged and third.acknowledged):
        pytest.skip(
            "not checked: the receiver refused seq 1 or 3 of the task, so seq 2 was not "
            f"late (answers {first.describe_answer()}, {third.describe_answer()}; see "
            "receiver.gap-accepted)"
        )
    require_acknowledged(clauses.OUT_OF_ORDER_ACCEPTED, late)


@enforces(clauses.GAP_REPORTED)
def test_a_gap_is_noticed(accepted: Acceptance, inspection: InspectionHook) -> None:
    """§5.3, §5.5: after seq 1 and 3, the hook names seq 2 among the task's gaps."""
    judged = 0
    for label, exchanges in (("gap", accepted.gap), ("out-of-order", accepted.reorder)):
        if not all(e.acknowledged for e in exchanges[:2]):
            continue
        judged += 1
        third = exchanges[1]
        assert third.server is not None
        assert third.task_id is not None
        view = ask(inspection, clauses.GAP_REPORTED, third.server, third.task_id)
        if 2 not in view.gaps:
            violation(
                clauses.GAP_REPORTED,
                f"task {third.task_id} ({label}) got seq 1 then seq 3, but the inspection "
                f"hook reports gaps {sorted(view.gaps)}, without seq 2",
                {"hook": view.to_dict(), "posts": [e.evidence() for e in exchanges]},
            )
    if not judged:
        pytest.skip("not checked: the receiver refused the posts that make a gap")
