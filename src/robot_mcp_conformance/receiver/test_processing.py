"""What the receiver did with the posts, seen through its inspection hook (§5.5).

Without the hook (``--inspect-url``) these clauses are reported as not checked: from the
outside, an acknowledged event that was never stored and a refused one that was processed
anyway look like the right answers.
"""

from __future__ import annotations

from robot_mcp_conformance._checks import Clause, enforces, violation
from robot_mcp_conformance._hook import InspectionHook, ask
from robot_mcp_conformance._probe import Exchange
from robot_mcp_conformance._receiver_checks import receiver_clauses as clauses
from robot_mcp_conformance._receiver_runs import Acceptance, Refusals


def _times(
    inspection: InspectionHook, clause: Clause, exchange: Exchange, server: str | None = None
) -> int:
    where = server or exchange.server
    if where is None or exchange.task_id is None or exchange.event_id is None:
        return 0  # nothing the hook could be asked about
    view = ask(inspection, clause, where, exchange.task_id)
    return view.times_processed(exchange.event_id)


@enforces(clauses.DUPLICATE_PROCESSED_ONCE)
def test_an_event_sent_twice_is_processed_once(
    accepted: Acceptance, inspection: InspectionHook
) -> None:
    """§5.3: dedupe on event_id: the re-sent event is not processed a second time."""
    times = _times(inspection, clauses.DUPLICATE_PROCESSED_ONCE, accepted.first)
    if times > 1:
        violation(
            clauses.DUPLICATE_PROCESSED_ONCE,
            f"event {accepted.first.event_id} was posted twice and processed {times} times",
            {"first": accepted.first.evidence(), "again": accepted.again.evidence()},
        )


@enforces(clauses.ACKNOWLEDGED_IS_STORED)
def test_every_acknowledged_event_is_processed(
    accepted: Acceptance, inspection: InspectionHook
) -> None:
    """§5.4: a 2xx means stored: every acknowledged event shows in the hook."""
    clause = clauses.ACKNOWLEDGED_IS_STORED
    acknowledged = [e for e in accepted.new_events() if e.acknowledged]
    lost = [e for e in acknowledged if _times(inspection, clause, e) == 0]
    if lost:
        violation(
            clauses.ACKNOWLEDGED_IS_STORED,
            f"{len(lost)} acknowledged event(s) are not among the task's processed events, "
            f"first: {lost[0].label} (event {lost[0].event_id}); the poster will never send "
            "them again",
            [e.evidence() for e in lost[:5]],
        )


@enforces(clauses.REFUSED_NOT_PROCESSED)
def test_a_refused_post_is_not_processed(refusals: Refusals, inspection: InspectionHook) -> None:
    """§5.4: a post answered with a 4xx left no event behind."""
    processed = []
    for exchange in refusals.exchanges.values():
        if not exchange.refused or exchange.task_id is None or exchange.event_id is None:
            continue
        servers = {exchange.server, exchange.body_server} - {None}
        clause = clauses.REFUSED_NOT_PROCESSED
        if any(_times(inspection, clause, exchange, server) for server in servers):
            processed.append(exchange)
    if processed:
        violation(
            clauses.REFUSED_NOT_PROCESSED,
            f"{len(processed)} refused post(s) were processed anyway, first: "
            f"{processed[0].label} (answered {processed[0].describe_answer()})",
            [e.evidence() for e in processed[:5]],
        )
