"""The clauses of the Async Task Contract and the failure messages that cite them.

Every failing conformance test ends in :func:`violation`, which fails the test with a
message of the form::

    docs/contract.md §3.3 (seq is per task, starts at 1, ...): task slee-1a2b3c got seqs [1, 2, 4]
      evidence: {...the offending event or response...}

The sections are those of ``docs/contract.md``, the wire contract shipped with this
repository (and linked from the distribution's metadata as "Contract"), so an author can
look the requirement up by its section number. A test checks that every cited section
exists there.

Every clause also has a stable id (``server.seq-contiguous``): ``server.`` plus its name in
this catalogue, lower case with hyphens. The ids are listed in ``docs/contract.md``
("Clause ids"), key the JSON report and are what an expected-failures file names
(:mod:`._report`); a test pins the list. Each test says which clause it enforces with
:func:`enforces`, and :func:`violation` carries the clause in the failure it raises.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NoReturn

import pytest

__all__ = [
    "CLAUSE_MARKER",
    "CONTRACT",
    "Clause",
    "ClauseFailure",
    "catalogue",
    "clauses",
    "enforces",
    "short",
    "violation",
]

CONTRACT = "docs/contract.md"
"""The document the clauses cite."""

_EVIDENCE_LIMIT = 4000


CLAUSE_MARKER = "clause"
"""The pytest marker :func:`enforces` puts on a test: ``clause(<Clause>)``."""


@dataclass(frozen=True)
class Clause:
    """One requirement of the contract: where it is written, what it says, its stable id.

    ``id`` is given, or set when the clause is assigned in a catalogue class (``clauses``,
    ``receiver_clauses``): the class's ``PARTY`` (``server``) and the attribute name,
    lower case with hyphens (``SEQ_CONTIGUOUS`` → ``server.seq-contiguous``).
    """

    section: str
    text: str
    id: str = ""

    def __set_name__(self, owner: type, name: str) -> None:
        party = getattr(owner, "PARTY", None)
        if not self.id and isinstance(party, str):
            object.__setattr__(self, "id", f"{party}.{name.lower().replace('_', '-')}")

    def __str__(self) -> str:
        where = ", ".join(f"§{part.strip()}" for part in self.section.split(","))
        return f"{CONTRACT} {where} ({self.text})"


def catalogue(owner: type) -> list[Clause]:
    """The clauses of a catalogue class, in the order they are written."""
    return [value for value in vars(owner).values() if isinstance(value, Clause)]


def enforces(clause: Clause) -> pytest.MarkDecorator:
    """Mark a test as the check of ``clause`` (the JSON report and expected failures key on it)."""
    mark: pytest.MarkDecorator = getattr(pytest.mark, CLAUSE_MARKER)
    return mark(clause)


class clauses:
    """The catalogue of the server suite; each test cites one of these."""

    PARTY = "server"

    TOOLS_EXIST = Clause(
        "6", "every task-capable server exposes get_task, cancel_task and list_tasks"
    )
    TOOL_SCHEMA = Clause(
        "6.1, 6.2, 6.3",
        "get_task(task_id: str), cancel_task(task_id: str), "
        "list_tasks(states: list[str] | None = None)",
    )
    TOOL_DESCRIPTION = Clause(
        "6.5",
        "the tools' descriptions tell the LLM they are for status/cancel of long-running "
        "tasks, not for starting work",
    )
    TOOLS_RETURN_JSON = Clause(
        "6.4",
        "the reconciliation tools answer objects: a declared output schema describes the "
        'object (never {"result": string}), structuredContent is the object itself and '
        "the text content is that object as JSON, never a JSON string inside a string",
    )
    START_RETURNS_AT_ONCE = Clause(
        "2.1",
        "a long-running tool returns immediately with a task_id (state running) and the "
        "work continues in the server; callers expect a ~30 s call timeout",
    )
    TASK_INFO_SHAPE = Clause(
        "2.2",
        "TaskInfo = {task_id, server, tool, state, created_at, updated_at, triggers, "
        "est_duration_s, progress, result, failure}",
    )
    TASK_ID_FORM = Clause(
        "2.3", 'task_id is "<server-short>-<6 hex>", server_short = first 4 chars of the name'
    )
    SIGNED = Clause(
        "4.1",
        "every event POST carries X-RVC-Server, X-RVC-Timestamp (unix s, ±300 s) and "
        'X-RVC-Signature: sha256=HMAC-SHA256(secret, f"{timestamp}.{raw_body}")',
    )
    TRACEPARENT = Clause(
        "4.5",
        "a POST that carries traceparent carries a well-formed W3C one (version 00: "
        "00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>, neither id all zeros), and "
        "tracestate only with it",
    )
    EVENT_BODY = Clause(
        "3.1",
        "the body is a TaskEvent: schema_version 1, event_id, task_id, server, tool, type, "
        "seq, ts, payload",
    )
    EVENT_IDENTITY = Clause(
        "3.1",
        "an event names its task_id, the server (= X-RVC-Server) and the tool that started it",
    )
    EVENT_ID_UNIQUE = Clause("3.1", "event_id is a uuid4, unique per event")
    TIMESTAMP = Clause("3.1", "ts is the event's time, UTC ISO 8601")
    PAYLOAD = Clause(
        "3.2",
        'payload by type: progress a dict; trigger_fired {"trigger": <the trigger dict>, ...}; '
        'task_done {"result": <dict>}; task_failed a TaskFailure',
    )
    SEQ_CONTIGUOUS = Clause(
        "3.3", "seq is per task, starts at 1, increases by one, posted in seq order"
    )
    ONE_TERMINAL = Clause(
        "3.4", "a finished task emits exactly one terminal event (task_done or task_failed)"
    )
    NOTHING_AFTER_TERMINAL = Clause("3.4", "a task emits nothing after task_done / task_failed")
    GET_TASK_AGREES = Clause(
        "6.1",
        "get_task returns the TaskInfo: state, last progress payload, result when "
        "succeeded, failure when failed, as the events said",
    )
    FAILURE = Clause(
        "3.4",
        "a body that raises TaskError ends in state failed and emits task_failed carrying "
        "the TaskFailure",
    )
    CANCEL_RETURNS = Clause(
        "6.2", 'cancel_task(task_id) → {"task_id": ..., "state": "cancelled", ...}'
    )
    CANCEL_IDEMPOTENT = Clause("6.2", "cancel_task is idempotent")
    CANCEL_NO_EVENT = Clause(
        "7", 'a cancelled task ends in state "cancelled" with no failure event (no task_failed)'
    )
    CANCEL_STOPS_WORK = Clause(
        "7",
        "cancel(task_id) must asyncio-cancel the underlying task, await its teardown (5 s "
        "grace), mark cancelled: the work stops and reports nothing more",
    )
    CANCEL_FINISHED = Clause(
        "6.2", "cancelling a finished task returns its terminal state unchanged"
    )
    LIST_TASKS = Clause("6.3", 'list_tasks(states=None) → {"tasks": [TaskInfo, ...]}')
    LIST_FILTER = Clause(
        "6.3", 'list_tasks(states=[...]) returns only tasks in those states, e.g. ["running"]'
    )
    NOT_FOUND = Clause("6.1, 6.2", 'an unknown task id → {"error": "not_found"}')
    DELIVERY = Clause(
        "5.1",
        "delivery is at-least-once: anything but a 2xx (or a connection error) is retried "
        "and events for one task are POSTed in seq order",
    )
    LANES = Clause(
        "5.1",
        "an event that is not acknowledged holds back only its own task's later events; "
        "other tasks' events keep going out while it is retried",
    )
    RETRY_SCHEDULE = Clause(
        "5.2", "retries back off exponentially: 0.5 s, 2 s, 8 s, then every 30 s, for 10 minutes"
    )
    UNKNOWN_TRIGGER = Clause(
        "8.1", "servers must ignore unknown trigger types (with a WARNING log)"
    )
    PROGRESS_ABOVE = Clause(
        "8.2",
        "progress_above fires once when progress ≥ percent; at most once per task unless "
        '"repeat": true',
    )
    INPUT_ANNOUNCED = Clause(
        "11.1",
        "a task that asks for input emits input_required {request_id, method "
        '"elicitation/create", params {message, requestedSchema}} and stays running',
    )
    INPUT_ANSWERED = Clause(
        "11.2",
        "answer_task_input(task_id, request_id, action, content) answers the TaskInfo, "
        "emits input_answered {request_id, action} and the task goes on; a request no "
        'longer waited on answers {"error": "not_found"}',
    )
    NATIVE_AGREES = Clause(
        "12",
        "a task created through the MCP tasks extension is the task the events tell of: "
        "tasks/get and the events agree on its end, result and failure",
    )
    TASK_EVENTS = Clause(
        "3.3",
        "optional get_task_events(task_id, after_seq=0): the task's retained events with "
        "seq > after_seq, oldest first, as posted",
    )
    TASK_OWNERSHIP = Clause(
        "13",
        "with authentication, a task is its starter's: to another principal it is an "
        "unknown id; list_tasks leaves it out, get_task, get_task_events, "
        "answer_task_input and cancel_task answer not_found as for an id that never "
        "existed, and change nothing",
    )


def _render(value: Any, indent: str, width: int) -> str:
    flat = json.dumps(value, default=str, ensure_ascii=False)
    if len(indent) + len(flat) <= width or not isinstance(value, dict | list) or not value:
        return flat
    inner = indent + "  "
    if isinstance(value, dict):
        items = [
            f"{inner}{json.dumps(str(k), ensure_ascii=False)}: {_render(v, inner, width)}"
            for k, v in value.items()
        ]
        return "{\n" + ",\n".join(items) + f"\n{indent}}}"
    items = [inner + _render(v, inner, width) for v in value]
    return "[\n" + ",\n".join(items) + f"\n{indent}]"


def short(value: Any, limit: int = _EVIDENCE_LIMIT, width: int = 96) -> str:
    """Render evidence as JSON, short parts on one line, cut to ``limit`` characters."""
    try:
        text = _render(value, "", width)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > limit:
        text = text[:limit] + f"\n... ({len(text) - limit} more characters)"
    return text


class ClauseFailure(pytest.fail.Exception):  # type: ignore[name-defined,misc]
    """The failure :func:`violation` raises: pytest's own, plus the clause and the evidence.

    pytest reports it as any ``pytest.fail``; the report plugin reads ``clause``,
    ``summary`` and ``evidence`` from it.
    """

    def __init__(self, message: str, clause: Clause, summary: str, evidence: Any) -> None:
        super().__init__(message, pytrace=False)
        self.clause = clause
        self.summary = summary
        self.evidence = evidence


def violation(clause: Clause, summary: str, evidence: Any = None) -> NoReturn:
    """Fail the current test: the clause, what broke, and the evidence."""
    message = f"{clause}: {summary}"
    if evidence is not None:
        body = short(evidence).replace("\n", "\n    ")
        message += f"\n  evidence:\n    {body}"
    raise ClauseFailure(message, clause, summary, evidence)
