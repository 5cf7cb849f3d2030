"""Events: signed, valid TaskEvents, timestamped, numbered 1, 2, 3..., one terminal, then silence.

Every check runs over each shared task run (succeeding, failing, with triggers), as
fake_rvc received it.
"""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

from pydantic import ValidationError

from robot_mcp_conformance._checks import clauses, enforces, violation
from robot_mcp_conformance._config import Config
from robot_mcp_conformance._harness import Harness
from robot_mcp_conformance._runs import Runs
from robot_mcp_kit import SignatureReason
from robot_mcp_kit.models import TaskFailure

SIGNATURE_REASONS = frozenset(
    {
        SignatureReason.UNKNOWN_SERVER,
        SignatureReason.MISSING_TIMESTAMP,
        SignatureReason.MISSING_SIGNATURE,
        SignatureReason.MALFORMED_TIMESTAMP,
        SignatureReason.STALE_TIMESTAMP,
        SignatureReason.FUTURE_TIMESTAMP,
        SignatureReason.MALFORMED_SIGNATURE,
        SignatureReason.BAD_SIGNATURE,
        SignatureReason.INVALID_HEADER,
        SignatureReason.DUPLICATE_HEADER,
    }
)
MAX_CLOCK_SKEW = timedelta(seconds=300)
TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}")


@enforces(clauses.SIGNED)
def test_events_are_signed_with_the_shared_secret(
    runs: Runs, harness: Harness, conformance_config: Config
) -> None:
    """§3.1: X-RVC-Server, X-RVC-Timestamp and X-RVC-Signature = HMAC-SHA256 of ts.body."""
    clause = clauses.SIGNED
    for attempt in harness.rvc.state.attempts():
        if attempt.outcome == "rejected" and attempt.reason in SIGNATURE_REASONS:
            violation(
                clause,
                f"fake_rvc rejected a POST (task {attempt.task_id}, seq {attempt.seq}): "
                f"{attempt.reason} — {attempt.detail} (expected X-RVC-Server "
                f"{conformance_config.server_name!r}, signed with --secret)",
                attempt.to_dict(),
            )
    for run in runs.all():
        run.require_events(clause)


def _traceparent_problem(traceparent: str | None, tracestate: str | None) -> str | None:
    """What is wrong with one POST's trace headers (contract §4.5), or None."""
    if traceparent is None:
        return None if tracestate is None else "tracestate without a traceparent"
    match = TRACEPARENT.fullmatch(traceparent)
    if match is None:
        return f"traceparent {traceparent!r} is not 00-<32 hex>-<16 hex>-<2 hex> (lowercase)"
    trace_id, parent_id = match.groups()
    if trace_id == "0" * 32 or parent_id == "0" * 16:
        return f"traceparent {traceparent!r} has an all-zero trace id or parent id"
    return None


@enforces(clauses.TRACEPARENT)
def test_a_traceparent_is_well_formed_when_present(runs: Runs, harness: Harness) -> None:
    """§4.5: a traceparent header, when sent, is a W3C version 00 one; tracestate only with it."""
    clause = clauses.TRACEPARENT
    for attempt in harness.rvc.state.attempts():
        problem = _traceparent_problem(attempt.traceparent, attempt.tracestate)
        if problem is not None:
            violation(
                clause,
                f"a POST of task {attempt.task_id} (seq {attempt.seq}): {problem}",
                attempt.to_dict(),
            )
    for run in runs.all():
        run.require_events(clause)


@enforces(clauses.EVENT_BODY)
def test_event_bodies_are_task_events(runs: Runs) -> None:
    """§3.1, §4.1: each body is a TaskEvent with schema_version 1."""
    clause = clauses.EVENT_BODY
    for run in runs.all():
        run.require_task(clause)
        for attempt in run.attempts:
            if attempt.outcome == "rejected" and attempt.status == 422:
                violation(
                    clause,
                    f"fake_rvc refused a POST of task {run.task_id} ({run.label}): "
                    f"{attempt.reason} — {attempt.detail}",
                    attempt.to_dict(),
                )
        for event in run.require_events(clause):
            if event.event.schema_version != 1:
                violation(clause, "schema_version is not 1", event.to_dict())


@enforces(clauses.EVENT_IDENTITY)
def test_events_name_their_task_server_and_tool(runs: Runs, conformance_config: Config) -> None:
    """§3.1: each event carries its task_id, the server name and the tool that started it."""
    clause = clauses.EVENT_IDENTITY
    cfg = conformance_config
    for run in runs.all():
        for event in run.require_events(clause):
            body = event.event
            wrong = {
                key: (got, want)
                for key, got, want in (
                    ("task_id", body.task_id, run.task_id),
                    ("server", body.server, cfg.server_name),
                    ("server (X-RVC-Server)", event.server, cfg.server_name),
                    ("tool", body.tool, cfg.start_tool),
                )
                if got != want
            }
            if wrong:
                detail = ", ".join(f"{k}={g!r} (expected {w!r})" for k, (g, w) in wrong.items())
                violation(clause, f"event seq {body.seq} of {run.label}: {detail}", event.to_dict())


@enforces(clauses.EVENT_ID_UNIQUE)
def test_event_ids_are_unique_uuid4(runs: Runs) -> None:
    """§3.1: event_id is a uuid4, unique per event."""
    clause = clauses.EVENT_ID_UNIQUE
    seen: dict[str, str] = {}
    for run in runs.all():
        for event in run.require_events(clause):
            try:
                parsed = uuid.UUID(event.event_id)
            except ValueError:
                violation(clause, f"event_id {event.event_id!r} is not a uuid", event.to_dict())
            if parsed.version != 4:
                violation(
                    clause,
                    f"event_id {event.event_id!r} is a version {parsed.version} uuid, not 4",
                    event.to_dict(),
                )
            where = f"{run.task_id} seq {event.seq}"
            if parsed.hex in seen:
                violation(
                    clause,
                    f"event_id {event.event_id} is used by {seen[parsed.hex]} and {where}",
                    event.to_dict(),
                )
            seen[parsed.hex] = where
        # Re-sending an event (same body) is legal: delivery is at least once and the brain
        # dedupes. Reusing an event_id for a different event is not: dedupe would drop it.
        for attempt in run.attempts:
            reused = [a for a in attempt.anomalies if a.get("kind") == "event_id_reused"]
            if reused:
                violation(
                    clause,
                    f"task {run.task_id} reused event_id {attempt.event_id} for a different "
                    f"event ({', '.join(reused[0]['differs'])} differ)",
                    attempt.to_dict(),
                )


@enforces(clauses.TIMESTAMP)
def test_event_timestamps_are_utc_and_current(runs: Runs) -> None:
    """§3.1: ts is UTC ISO 8601, the time of the event, non-decreasing along seq."""
    clause = clauses.TIMESTAMP
    for run in runs.all():
        previous = None
        for event in sorted(run.require_events(clause), key=lambda e: e.seq):
            ts = event.event.ts
            if ts.utcoffset() != timedelta(0):
                violation(clause, f"ts {ts.isoformat()} is not in UTC", event.to_dict())
            received = event.received_wall
            if abs(ts.timestamp() - received) > MAX_CLOCK_SKEW.total_seconds():
                violation(
                    clause,
                    f"ts {ts.isoformat()} is {ts.timestamp() - received:+.0f} s away from when "
                    "fake_rvc received the event",
                    event.to_dict(),
                )
            if previous is not None and ts < previous.event.ts:
                violation(
                    clause,
                    f"seq {event.seq} has ts {ts.isoformat()}, earlier than seq "
                    f"{previous.seq}'s {previous.event.ts.isoformat()}",
                    {"earlier_seq": previous.to_dict(), "later_seq": event.to_dict()},
                )
            previous = event


@enforces(clauses.PAYLOAD)
def test_event_payloads_match_their_type(runs: Runs) -> None:
    """§3.1: progress a dict; trigger_fired {"trigger": ...}; task_done {"result": ...};
    task_failed a TaskFailure."""
    clause = clauses.PAYLOAD
    for run in runs.all():
        for event in run.require_events(clause):
            payload = event.payload
            if event.type == "trigger_fired" and not (
                isinstance(payload.get("trigger"), dict) and "type" in payload["trigger"]
            ):
                violation(clause, "trigger_fired without the trigger dict", event.to_dict())
            if event.type == "task_done" and not isinstance(payload.get("result"), dict):
                violation(clause, 'task_done payload is not {"result": {...}}', event.to_dict())
            if event.type == "task_failed":
                try:
                    TaskFailure.model_validate(payload)
                except ValidationError as exc:
                    violation(
                        clause, f"task_failed payload is not a TaskFailure: {exc}", event.to_dict()
                    )


@enforces(clauses.SEQ_CONTIGUOUS)
def test_seq_is_contiguous_from_1(runs: Runs) -> None:
    """§3.1, §4.2: seq is per task, starts at 1, goes up by one, and arrives in order."""
    clause = clauses.SEQ_CONTIGUOUS
    for run in runs.all():
        events = run.require_events(clause)
        seqs = [e.seq for e in events]
        for index, event in enumerate(events):
            if event.seq != index + 1:
                violation(
                    clause,
                    f"task {run.task_id} ({run.label}) got seqs {seqs}; event #{index + 1} "
                    f"has seq {event.seq}",
                    {"offending_event": event.to_dict(), "seqs": seqs},
                )


@enforces(clauses.ONE_TERMINAL)
def test_a_finished_task_emits_exactly_one_terminal_event(runs: Runs) -> None:
    """§4.2: a task that ends emits exactly one task_done or task_failed, matching its end."""
    clause = clauses.ONE_TERMINAL
    for run in runs.all():
        events = run.require_events(clause)
        terminals = run.terminal_events()
        expected = "task_failed" if run.label == "failing" else "task_done"
        types = [e.type for e in events]
        if not terminals:
            violation(
                clause,
                f"task {run.task_id} ({run.label}) never emitted {expected}"
                + (f" ({run.note})" if run.note else ""),
                {"event_types": types, "get_task": run.final_evidence()},
            )
        if len(terminals) > 1:
            violation(
                clause,
                f"task {run.task_id} ({run.label}) emitted {len(terminals)} terminal events",
                [e.to_dict() for e in terminals],
            )
        if terminals[0].type != expected:
            violation(
                clause,
                f"task {run.task_id} ({run.label}) ended with {terminals[0].type}, expected "
                f"{expected}",
                terminals[0].to_dict(),
            )


@enforces(clauses.NOTHING_AFTER_TERMINAL)
def test_nothing_is_emitted_after_the_terminal_event(runs: Runs) -> None:
    """§4.2: after task_done / task_failed a task emits nothing more."""
    clause = clauses.NOTHING_AFTER_TERMINAL
    for run in runs.all():
        events = run.require_events(clause)
        for index, event in enumerate(events):
            if event.type in ("task_done", "task_failed"):
                later = events[index + 1 :] or [
                    e for e in events if e.seq > event.seq and e is not event
                ]
                if later:
                    violation(
                        clause,
                        f"task {run.task_id} ({run.label}) emitted {later[0].type} seq "
                        f"{later[0].seq} after its {event.type} seq {event.seq}",
                        {"terminal": event.to_dict(), "offending_event": later[0].to_dict()},
                    )
                break
