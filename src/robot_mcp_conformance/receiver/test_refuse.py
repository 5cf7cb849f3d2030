"""Refusing: every bad post gets a 4xx — never a 2xx (acknowledged), never a 5xx (retried).

A 2xx tells the poster the event is delivered: a forged, stale or tampered event would be
acted on. A 5xx (or no answer) tells it to retry: it re-sends a post that can never pass,
for ten minutes, and the receiver's error log fills with what is only bad input. Each post
is signed properly except for its one defect (see ``_receiver_runs.REFUSAL_CASES``).
"""

from __future__ import annotations

import pytest

from robot_mcp_conformance._checks import Clause, enforces, violation
from robot_mcp_conformance._receiver_checks import receiver_clauses as clauses
from robot_mcp_conformance._receiver_runs import REFUSAL_CASES, Refusals


def require_refused(clause: Clause, refusals: Refusals, group: str, case: str) -> None:
    """Fail unless the receiver answered the post of ``(group, case)`` with a 4xx."""
    exchange = refusals.get(group, case)
    if exchange.refused:
        return
    if exchange.acknowledged:
        why = "acknowledged it: the receiver accepted what it must refuse"
    elif exchange.status is None:
        why = "no answer: a poster retries that (contract §5.1); answer a 4xx"
    elif exchange.status >= 500:
        why = "a 5xx: a poster retries that for 10 minutes; bad input is a 4xx"
    else:
        why = "not a 4xx"
    violation(
        clause,
        f"{exchange.label}: answered {exchange.describe_answer()}, {why}",
        exchange.evidence(),
    )


@enforces(clauses.BAD_SIGNATURE_REFUSED)
@pytest.mark.parametrize("case", REFUSAL_CASES["bad-signature"])
def test_a_bad_signature_is_refused(refusals: Refusals, case: str) -> None:
    """§4.3: a signature that does not match the body and timestamp is refused."""
    require_refused(clauses.BAD_SIGNATURE_REFUSED, refusals, "bad-signature", case)


@enforces(clauses.WRONG_SECRET_REFUSED)
@pytest.mark.parametrize("case", REFUSAL_CASES["wrong-secret"])
def test_an_event_signed_with_another_secret_is_refused(refusals: Refusals, case: str) -> None:
    """§4.3: a genuine HMAC made with any other key (the empty one too) is refused."""
    require_refused(clauses.WRONG_SECRET_REFUSED, refusals, "wrong-secret", case)


@enforces(clauses.UNKNOWN_SERVER_REFUSED)
@pytest.mark.parametrize("case", REFUSAL_CASES["unknown-server"])
def test_an_unknown_server_is_refused(refusals: Refusals, case: str) -> None:
    """§4.3: an X-RVC-Server the receiver has no secret for is refused."""
    require_refused(clauses.UNKNOWN_SERVER_REFUSED, refusals, "unknown-server", case)


@enforces(clauses.MISSING_HEADER_REFUSED)
@pytest.mark.parametrize("case", REFUSAL_CASES["missing-header"])
def test_a_post_missing_a_header_is_refused(refusals: Refusals, case: str) -> None:
    """§4.3: a post without one of the three X-RVC headers is refused."""
    require_refused(clauses.MISSING_HEADER_REFUSED, refusals, "missing-header", case)


@enforces(clauses.STALE_TIMESTAMP_REFUSED)
@pytest.mark.parametrize("case", REFUSAL_CASES["stale-timestamp"])
def test_a_stale_timestamp_is_refused(refusals: Refusals, case: str) -> None:
    """§4.3: a timestamp more than 300 s old is refused (a replayed post)."""
    require_refused(clauses.STALE_TIMESTAMP_REFUSED, refusals, "stale-timestamp", case)


@enforces(clauses.FUTURE_TIMESTAMP_REFUSED)
@pytest.mark.parametrize("case", REFUSAL_CASES["future-timestamp"])
def test_a_future_timestamp_is_refused(refusals: Refusals, case: str) -> None:
    """§4.3: a timestamp more than 300 s ahead is refused."""
    require_refused(clauses.FUTURE_TIMESTAMP_REFUSED, refusals, "future-timestamp", case)


@enforces(clauses.MALFORMED_TIMESTAMP_REFUSED)
@pytest.mark.parametrize("case", REFUSAL_CASES["malformed-timestamp"])
def test_a_malformed_timestamp_is_refused(refusals: Refusals, case: str) -> None:
    """§4.1, §4.3: X-RVC-Timestamp is 1-12 ASCII digits; anything else is refused."""
    require_refused(clauses.MALFORMED_TIMESTAMP_REFUSED, refusals, "malformed-timestamp", case)


@enforces(clauses.TAMPERED_BODY_REFUSED)
@pytest.mark.parametrize("case", REFUSAL_CASES["tampered-body"])
def test_a_tampered_body_is_refused(refusals: Refusals, case: str) -> None:
    """§4.1, §4.3: the signature covers the exact bytes; other bytes are refused."""
    require_refused(clauses.TAMPERED_BODY_REFUSED, refusals, "tampered-body", case)


@enforces(clauses.NON_JSON_REFUSED)
@pytest.mark.parametrize("case", REFUSAL_CASES["non-json"])
def test_a_body_that_is_not_json_is_refused(refusals: Refusals, case: str) -> None:
    """§4.4: a signed body that is not JSON is refused with a 4xx, not a crash."""
    require_refused(clauses.NON_JSON_REFUSED, refusals, "non-json", case)


@enforces(clauses.NON_TASK_EVENT_REFUSED)
@pytest.mark.parametrize("case", REFUSAL_CASES["non-task-event"])
def test_a_body_that_is_not_a_task_event_is_refused(refusals: Refusals, case: str) -> None:
    """§3.1, §4.4: signed JSON that is not a TaskEvent is refused."""
    require_refused(clauses.NON_TASK_EVENT_REFUSED, refusals, "non-task-event", case)


@enforces(clauses.SERVER_MISMATCH_REFUSED)
@pytest.mark.parametrize("case", REFUSAL_CASES["server-mismatch"])
def test_an_event_of_another_server_is_refused(refusals: Refusals, case: str) -> None:
    """§3.1, §4.4: a server may not post events in another server's name."""
    require_refused(clauses.SERVER_MISMATCH_REFUSED, refusals, "server-mismatch", case)


@enforces(clauses.OVERSIZE_REFUSED)
@pytest.mark.parametrize("case", REFUSAL_CASES["oversize"])
def test_an_oversize_body_is_refused(refusals: Refusals, case: str) -> None:
    """§4.4: a body past the receiver's limit is refused (413)."""
    require_refused(clauses.OVERSIZE_REFUSED, refusals, "oversize", case)


@enforces(clauses.DEEPLY_NESTED_REFUSED)
@pytest.mark.parametrize("case", REFUSAL_CASES["deeply-nested"])
def test_a_deeply_nested_body_is_refused(refusals: Refusals, case: str) -> None:
    """§4.4: a body nested far past §3.2's 32 levels is refused, not a parser crash."""
    require_refused(clauses.DEEPLY_NESTED_REFUSED, refusals, "deeply-nested", case)
