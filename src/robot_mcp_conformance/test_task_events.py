"""Optional: get_task_events, the gap-repair tool (robot-mcp-kit issue 14).

A server that lists ``get_task_events`` must answer it as the kit does: the task's
retained events with ``seq > after_seq``, oldest first, as TaskEvents of that task with
contiguous seqs, the same events (type and payload) it posted, ending with the terminal
event of a finished task; an unknown id answers ``not_found``. A server that does not list
the tool is not judged: these tests are reported as skipped.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from robot_mcp_conformance._checks import clauses, enforces, violation
from robot_mcp_conformance._harness import Harness
from robot_mcp_conformance._runs import Runs, TaskRun
from robot_mcp_kit import TASK_EVENTS_TOOL_NAME, TaskEvent

TOOL = TASK_EVENTS_TOOL_NAME
NO_SUCH_TASK = "zzzz-000000"
TASK_EVENTS = clauses.TASK_EVENTS
_TERMINAL_OF = {"succeeded": "task_done", "failed": "task_failed"}


@pytest.fixture
def task_events_tool(tools: dict[str, dict[str, Any]]) -> dict[str, Any]:
    tool = tools.get(TOOL)
    if tool is None:
        pytest.skip(f"the server does not list {TOOL} (optional tool)")
    return tool


def _events(harness: Harness, task_id: str, after_seq: int) -> list[TaskEvent]:
    reply = harness.call(TOOL, {"task_id": task_id, "after_seq": after_seq})
    data = reply.data
    if not reply.answered or not isinstance(data, dict) or not isinstance(data.get("events"), list):
        violation(TASK_EVENTS, f"{TOOL} did not answer an object with 'events'", reply.evidence())
    try:
        events = [TaskEvent.model_validate(e) for e in data["events"]]
    except ValidationError as exc:
        violation(TASK_EVENTS, f"{TOOL} answered events that are not TaskEvents: {exc}", data)
    return events


def _check_run(harness: Harness, run: TaskRun) -> None:
    task_id = run.require_task(TASK_EVENTS)
    events = _events(harness, task_id, 0)
    evidence: dict[str, Any] = {"task_id": task_id, "seqs": [e.seq for e in events]}
    if not events:
        violation(
            TASK_EVENTS, f"{TOOL}({task_id!r}) answered no event for a finished task", evidence
        )
    if any(e.task_id != task_id for e in events):
        violation(TASK_EVENTS, f"{TOOL}({task_id!r}) answered another task's events", evidence)
    seqs = [e.seq for e in events]
    if seqs != list(range(seqs[0], seqs[0] + len(seqs))):
        violation(TASK_EVENTS, f"{TOOL}'s seqs are not contiguous and ascending", evidence)
    state = (run.final_info or {}).get("state")
    terminal = _TERMINAL_OF.get(str(state))
    if terminal is not None and events[-1].type != terminal:
        violation(
            TASK_EVENTS,
            f"task {task_id} is {state} but {TOOL}'s last event is {events[-1].type}",
            evidence,
        )
    posted = {e.event_id: e.event for e in run.events}
    for event in events:
        sent = posted.get(event.event_id)
        if sent is not None and (sent.type, sent.payload) != (event.type, event.payload):
            violation(
                TASK_EVENTS,
                f"{TOOL} answers event {event.event_id} with another type or payload than "
                "was posted",
                {"answered": event.model_dump(mode="json"), "posted": sent.model_dump(mode="json")},
            )
    if len(events) > 1:
        cut = events[0].seq
        later = _events(harness, task_id, cut)
        if [e.event_id for e in later] != [e.event_id for e in events if e.seq > cut]:
            violation(
                TASK_EVENTS,
                f"{TOOL}(after_seq={cut}) did not answer exactly the events after seq {cut}",
                {**evidence, "after": [e.seq for e in later]},
            )


@enforces(clauses.TASK_EVENTS)
def test_get_task_events_answers_each_finished_task_s_events(
    task_events_tool: dict[str, Any], harness: Harness, runs: Runs
) -> None:
    """Optional §3.3: get_task_events answers the events posted, in seq order, after a seq."""
    for run in runs.all():
        _check_run(harness, run)


@enforces(clauses.TASK_EVENTS)
def test_get_task_events_of_an_unknown_task_is_not_found(
    task_events_tool: dict[str, Any], harness: Harness
) -> None:
    """Optional §3.3: get_task_events of an unknown id → {"error": "not_found"}."""
    reply = harness.call(TOOL, {"task_id": NO_SUCH_TASK, "after_seq": 0})
    data = reply.data
    if not isinstance(data, dict) or data.get("error") != "not_found":
        violation(
            TASK_EVENTS,
            f'{TOOL}({NO_SUCH_TASK!r}) returned {data!r}, expected {{"error": "not_found"}}',
            reply.evidence(),
        )
