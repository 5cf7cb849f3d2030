"""The clauses of ``docs/contract.md`` a receiver of ``POST /api/agent/events`` is held to.

The receiver suite (``robot-mcp-conformance receiver URL``) cites these the way the server
suite cites :class:`~robot_mcp_conformance._checks.clauses`: each failure names the
section and the requirement, and each clause has a stable id (``receiver.`` plus its name
here, lower case with hyphens: ``BAD_SIGNATURE_REFUSED`` → ``receiver.bad-signature-refused``)
listed in ``docs/contract.md`` ("Clause ids").
"""

from __future__ import annotations

from robot_mcp_conformance._checks import Clause

__all__ = ["receiver_clauses"]


class receiver_clauses:
    """The catalogue of the receiver suite; each test cites one of these."""

    PARTY = "receiver"

    VALID_EVENT_ACKNOWLEDGED = Clause(
        "3.2, 5.1, 5.3",
        "a valid signed TaskEvent is acknowledged with a 2xx, one whose payload is as deep "
        "(32 levels) or as large (256 KiB) as §3.2 allows too",
    )
    UNKNOWN_TYPE_ACKNOWLEDGED = Clause(
        "3.1, 4.4",
        "a signed, well-formed TaskEvent of a type the receiver does not know is acknowledged "
        "with a 2xx (and ignored), and the task's later events with it",
    )
    DUPLICATE_ACKNOWLEDGED = Clause(
        "5.3",
        "the same event again (same event_id and body, re-signed: delivery is at least "
        "once) is acknowledged with a 2xx too",
    )
    DUPLICATE_PROCESSED_ONCE = Clause(
        "5.3, 5.5", "an event sent twice is processed once (dedupe on event_id)"
    )
    ACKNOWLEDGED_IS_STORED = Clause(
        "5.4", "a receiver acknowledges only what it has stored: every 2xx event is processed"
    )
    REFUSED_NOT_PROCESSED = Clause("4.4, 5.4", "a refused post is not processed")
    TIMESTAMP_WINDOW_ACCEPTED = Clause(
        "4.3", "a timestamp within 300 s of the receiver's clock, either way, is accepted"
    )
    ROTATION_ACCEPTED = Clause(
        "4.3", "during a secret rotation, events signed with either configured secret are accepted"
    )
    BAD_SIGNATURE_REFUSED = Clause(
        "4.3, 4.4",
        "a signature that does not match is refused with a 4xx (never a 5xx, never a 2xx)",
    )
    WRONG_SECRET_REFUSED = Clause(
        "4.3, 4.4", "an event signed with another secret is refused with a 4xx"
    )
    UNKNOWN_SERVER_REFUSED = Clause(
        "4.3, 4.4", "an X-RVC-Server the receiver does not know is refused with a 4xx"
    )
    MISSING_HEADER_REFUSED = Clause(
        "4.3, 4.4",
        "a post without X-RVC-Server, X-RVC-Timestamp or X-RVC-Signature is refused with a 4xx",
    )
    STALE_TIMESTAMP_REFUSED = Clause(
        "4.3, 4.4", "a timestamp more than 300 s in the past is refused with a 4xx"
    )
    FUTURE_TIMESTAMP_REFUSED = Clause(
        "4.3, 4.4", "a timestamp more than 300 s in the future is refused with a 4xx"
    )
    MALFORMED_TIMESTAMP_REFUSED = Clause(
        "4.1, 4.3, 4.4",
        "a timestamp that is not 1-12 ASCII digits is refused with a 4xx, even when the "
        "signature covers it",
    )
    TAMPERED_BODY_REFUSED = Clause(
        "4.1, 4.3, 4.4",
        "a body changed after signing (the signature covers the exact bytes) is refused with a 4xx",
    )
    NON_JSON_REFUSED = Clause(
        "4.4", "a signed body that is not JSON (or not UTF-8, or NaN) is refused with a 4xx"
    )
    NON_TASK_EVENT_REFUSED = Clause(
        "3.1, 4.4",
        "a signed JSON body that is not a TaskEvent (every field of its type, seq of at least "
        "1, type a non-empty string: known or not) is refused with a 4xx",
    )
    SERVER_MISMATCH_REFUSED = Clause(
        "3.1, 4.4",
        "a signed TaskEvent whose server differs from X-RVC-Server is refused with a 4xx",
    )
    OVERSIZE_REFUSED = Clause(
        "4.4", "a body larger than the receiver's limit is refused with a 4xx (413)"
    )
    DEEPLY_NESTED_REFUSED = Clause(
        "4.4", "a deeply nested body is refused with a 4xx before a parser recurses into it"
    )
    GAP_ACCEPTED = Clause(
        "5.3", "an event whose seq skips ahead (a gap) is acknowledged, not refused"
    )
    OUT_OF_ORDER_ACCEPTED = Clause(
        "5.3", "an event whose seq is lower than one already seen (out of order) is acknowledged"
    )
    GAP_REPORTED = Clause("5.3, 5.5", "the receiver notices a gap in a task's seq")
    ANSWERS_WITHIN_BUDGET = Clause(
        "5.4", "the receiver answers an event within the time budget (5 s by default)"
    )
    CONSTANT_TIME_COMPARE = Clause(
        "4.3",
        "the signature compare takes constant time (best effort, statistical: a warning, "
        "never a failure)",
    )
