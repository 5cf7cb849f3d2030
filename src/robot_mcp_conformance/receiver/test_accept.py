"""Acknowledging: a valid event, one of an unknown type, the same event again, the edges of
the window, a rotation."""

from __future__ import annotations

import pytest

from robot_mcp_conformance._checks import Clause, enforces, violation
from robot_mcp_conformance._probe import Exchange
from robot_mcp_conformance._receiver_checks import receiver_clauses as clauses
from robot_mcp_conformance._receiver_runs import (
    INSIDE_WINDOW_S,
    UNKNOWN_EVENT_TYPE,
    VALID_CASES,
    Acceptance,
)


def require_acknowledged(clause: Clause, exchange: Exchange, why: str = "") -> None:
    """Fail unless the receiver answered ``exchange`` with a 2xx."""
    if not exchange.acknowledged:
        violation(
            clause,
            f"{exchange.label}: answered {exchange.describe_answer()}, not a 2xx{why}",
            exchange.evidence(),
        )


@enforces(clauses.VALID_EVENT_ACKNOWLEDGED)
@pytest.mark.parametrize("case", VALID_CASES)
def test_a_valid_event_is_acknowledged(accepted: Acceptance, case: str) -> None:
    """§5.1, §5.3: a valid, signed TaskEvent is acknowledged with a 2xx, one whose payload
    is as deep or as large as §3.2 allows too."""
    require_acknowledged(clauses.VALID_EVENT_ACKNOWLEDGED, accepted.valid[case])


@enforces(clauses.UNKNOWN_TYPE_ACKNOWLEDGED)
def test_an_event_of_an_unknown_type_is_acknowledged(accepted: Acceptance) -> None:
    """§4.4: an event of a type the receiver does not know is acknowledged (and ignored),
    and so are the task's events after it: the kit adds event types within schema_version 1."""
    clause = clauses.UNKNOWN_TYPE_ACKNOWLEDGED
    first, unknown, later = accepted.unknown_type
    require_acknowledged(clause, first, " (seq 1 of the task, a progress event)")
    require_acknowledged(
        clause,
        unknown,
        f"; acknowledge an event of a type you do not know ({UNKNOWN_EVENT_TYPE!r} here) and "
        "ignore it: a refusal is retried for 10 minutes (§5.2) and holds back the task's "
        "later events (§5.1), and a later kit may send new types",
    )
    require_acknowledged(clause, later, " (seq 3 of the task, after the unknown type)")


@enforces(clauses.DUPLICATE_ACKNOWLEDGED)
def test_the_same_event_again_is_acknowledged(accepted: Acceptance) -> None:
    """§5.3: delivery is at least once, so a re-sent event is acknowledged again."""
    clause = clauses.DUPLICATE_ACKNOWLEDGED
    require_acknowledged(clause, accepted.first, " (the first post of the event)")
    require_acknowledged(
        clause,
        accepted.again,
        "; a poster retries anything but a 2xx, so refusing a duplicate makes it re-send "
        "the event until it gives up",
    )


@enforces(clauses.TIMESTAMP_WINDOW_ACCEPTED)
@pytest.mark.parametrize("side", ["past", "future"])
def test_a_timestamp_inside_the_window_is_accepted(accepted: Acceptance, side: str) -> None:
    """§4.3: a timestamp within 300 s of the receiver's clock, either way, is accepted."""
    exchange = accepted.past if side == "past" else accepted.future
    require_acknowledged(
        clauses.TIMESTAMP_WINDOW_ACCEPTED,
        exchange,
        f" (the window is ±300 s; {INSIDE_WINDOW_S} s leaves 60 s for clocks that disagree)",
    )


@enforces(clauses.ROTATION_ACCEPTED)
def test_either_secret_of_a_rotation_is_accepted(accepted: Acceptance) -> None:
    """§4.3: during a rotation both of a server's secrets are accepted."""
    if accepted.rotation is None:
        pytest.skip(
            "not checked: give --second-secret when the receiver is configured with two "
            "secrets for --server-name (a rotation)"
        )
    for exchange in accepted.rotation:
        require_acknowledged(clauses.ROTATION_ACCEPTED, exchange)
