"""Acknowledging: a valid event, the same event again, the edges of the window, a rotation."""

from __future__ import annotations

import pytest

from robot_mcp_conformance._checks import Clause, enforces, violation
from robot_mcp_conformance._probe import Exchange
from robot_mcp_conformance._receiver_checks import receiver_clauses as clauses
from robot_mcp_conformance._receiver_runs import INSIDE_WINDOW_S, VALID_CASES, Acceptance


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
