"""Polling is the truth: get_task agrees with the events, list_tasks filters, unknown ids."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from robot_mcp_conformance._checks import clauses, enforces, violation
from robot_mcp_conformance._config import Config
from robot_mcp_conformance._harness import Harness
from robot_mcp_conformance._runs import CANCEL_TASK, GET_TASK, LIST_TASKS, CancelRun, Runs
from robot_mcp_kit import TaskInfo, TaskState

STATES = tuple(state.value for state in TaskState)
NO_SUCH_TASK = "zzzz-000000"


@enforces(clauses.GET_TASK_AGREES)
def test_get_task_agrees_with_the_events(runs: Runs) -> None:
    """§3.3, §4.1: get_task's state, progress, result and failure are what the events said."""
    clause = clauses.GET_TASK_AGREES
    for run in runs.all():
        events = run.require_events(clause)
        info = run.final_info
        evidence: dict[str, Any] = {"get_task": run.final_evidence()}
        if info is None:
            violation(clause, f"get_task({run.task_id!r}) returned no TaskInfo", evidence)
        terminals = run.terminal_events()
        if not terminals:
            violation(
                clause,
                f"task {run.task_id} ({run.label}) has no terminal event to compare with",
                {**evidence, "event_types": [e.type for e in events]},
            )
        terminal = terminals[0]
        evidence["terminal_event"] = terminal.to_dict()
        for key in ("task_id",):
            if info.get(key) != run.task_id:
                violation(clause, f"get_task returned another task's {key}", evidence)
        if terminal.type == "task_done":
            if info.get("state") != TaskState.SUCCEEDED:
                violation(
                    clause,
                    f"task {run.task_id} emitted task_done but get_task says state "
                    f"{info.get('state')!r}",
                    evidence,
                )
            if info.get("result") != terminal.payload.get("result"):
                violation(clause, "get_task's result differs from task_done's", evidence)
        else:
            if info.get("state") != TaskState.FAILED:
                violation(
                    clause,
                    f"task {run.task_id} emitted task_failed but get_task says state "
                    f"{info.get('state')!r}",
                    evidence,
                )
            if info.get("failure") != terminal.payload:
                violation(clause, "get_task's failure differs from task_failed's payload", evidence)
        progress = [e for e in events if e.type == "progress" and e.seq < terminal.seq]
        if progress and info.get("progress") != progress[-1].payload:
            violation(
                clause,
                "get_task's progress is not the last progress event's payload",
                {**evidence, "last_progress_event": progress[-1].to_dict()},
            )


@enforces(clauses.FAILURE)
def test_failing_task_ends_failed_with_its_task_failure(runs: Runs) -> None:
    """§4.2: a body raising TaskError → state failed, task_failed carrying the TaskFailure."""
    clause = clauses.FAILURE
    run = runs.failed
    if run is None:
        pytest.skip("no --fail-args: the suite does not know how to make a task fail")
    events = run.require_events(clause)
    info = run.final_info
    evidence = {"get_task": run.final_evidence(), "event_types": [e.type for e in events]}
    if info is None or info.get("state") != TaskState.FAILED:
        violation(clause, f"task {run.task_id} started with --fail-args is not failed", evidence)
    try:
        failure = TaskInfo.model_validate(info).failure
    except ValidationError as exc:
        violation(clause, f"get_task's TaskInfo does not validate: {exc}", evidence)
    if failure is None:
        violation(clause, "a failed task's TaskInfo has no failure", evidence)
    if not [e for e in events if e.type == "task_failed"]:
        violation(clause, f"failed task {run.task_id} emitted no task_failed", evidence)


@enforces(clauses.LIST_TASKS)
def test_list_tasks_returns_task_infos(harness: Harness, runs: Runs) -> None:
    """§3.3: list_tasks() → {"tasks": [TaskInfo, ...]}, including tasks that finished."""
    clause = clauses.LIST_TASKS
    reply = harness.call(LIST_TASKS, {})
    tasks = _tasks(reply, clause)
    for item in tasks:
        try:
            TaskInfo.model_validate(item)
        except (ValidationError, TypeError) as exc:
            violation(clause, f"a listed task is not a TaskInfo: {exc}", item)
    listed = {item.get("task_id") for item in tasks}
    task_id = runs.completed.require_task(clause)
    if task_id not in listed:
        violation(clause, f"list_tasks() does not list finished task {task_id}", reply.evidence())


def _tasks(reply: Any, clause: Any) -> list[dict[str, Any]]:
    data = reply.data
    if not reply.answered or not isinstance(data, dict) or not isinstance(data.get("tasks"), list):
        violation(clause, 'list_tasks did not return {"tasks": [...]}', reply.evidence())
    items: list[dict[str, Any]] = data["tasks"]
    if not all(isinstance(item, dict) for item in items):
        violation(clause, "list_tasks returned tasks that are not objects", reply.evidence())
    return items


@enforces(clauses.LIST_FILTER)
@pytest.mark.parametrize("state", STATES)
def test_list_tasks_filters_by_state(
    state: str, harness: Harness, runs: Runs, cancelled: CancelRun, conformance_config: Config
) -> None:
    """§3.3: list_tasks(states=[s]) lists the tasks in state s and no others."""
    clause = clauses.LIST_FILTER
    started = None
    if state == TaskState.RUNNING:
        started = harness.start(conformance_config.long_args, "long")
        member = started.require_task(clause)
    elif state == TaskState.SUCCEEDED:
        member = runs.completed.require_task(clause)
    elif state == TaskState.FAILED:
        if runs.failed is None:
            pytest.skip("no --fail-args: the suite has no failed task to look for")
        member = runs.failed.require_task(clause)
    else:
        member = cancelled.run.require_task(clause)
    try:
        actual = harness.state_of(member)
        if actual is not None and actual != state:
            # get_task is judged elsewhere; here there is no task in this state to look for.
            pytest.skip(f"task {member} is {actual!r}, not {state!r}; nothing to filter for")
        reply = harness.call(LIST_TASKS, {"states": [state]})
        tasks = _tasks(reply, clause)
        others = [t for t in tasks if t.get("state") != state]
        if others:
            violation(
                clause,
                f"list_tasks(states=[{state!r}]) lists a task in state {others[0].get('state')!r}",
                {"offending_task": others[0], **reply.evidence()},
            )
        if member not in {t.get("task_id") for t in tasks}:
            violation(
                clause,
                f"list_tasks(states=[{state!r}]) omits task {member}, which get_task reports "
                f"as {state!r}",
                reply.evidence(),
            )
    finally:
        if started is not None and started.task_id is not None:
            harness.call(CANCEL_TASK, {"task_id": started.task_id})


@enforces(clauses.NOT_FOUND)
@pytest.mark.parametrize("tool", [GET_TASK, CANCEL_TASK])
def test_unknown_task_id_is_not_found(harness: Harness, tool: str) -> None:
    """§3.3: get_task / cancel_task of an unknown id → {"error": "not_found"}."""
    clause = clauses.NOT_FOUND
    reply = harness.call(tool, {"task_id": NO_SUCH_TASK})
    data = reply.data
    if reply.failure is not None or not isinstance(data, dict):
        violation(
            clause, f"{tool}({NO_SUCH_TASK!r}) did not return a JSON object", reply.evidence()
        )
    if data.get("error") != "not_found":
        violation(
            clause,
            f'{tool}({NO_SUCH_TASK!r}) returned {data!r}, expected {{"error": "not_found"}}',
            reply.evidence(),
        )


@enforces(clauses.TOOLS_RETURN_JSON)
@pytest.mark.parametrize("tool", [GET_TASK, LIST_TASKS])
def test_reconciliation_answers_are_objects_not_json_strings(
    harness: Harness, runs: Runs, tool: str
) -> None:
    """§6.4: structuredContent, when sent, is the answer itself; the text is that object."""
    clause = clauses.TOOLS_RETURN_JSON
    task_id = runs.completed.require_task(clause)
    reply = harness.call(tool, {"task_id": task_id} if tool == GET_TASK else {})
    if not reply.answered:
        violation(clause, f"{tool} did not answer", reply.evidence())
    try:
        text_value = None if reply.text is None else json.loads(reply.text)
    except ValueError:
        text_value = None
    if reply.structured is None:
        if not isinstance(text_value, dict):
            violation(clause, f"{tool}'s text content is not a JSON object", reply.evidence())
        return
    structured = reply.structured
    wrapped = structured.get("result") if isinstance(structured, dict) else None
    if isinstance(wrapped, str):
        violation(
            clause,
            f'{tool}\'s structuredContent is {{"result": <a JSON string>}}: the answer is '
            "double-encoded instead of being the object",
            reply.evidence(),
        )
    if text_value is not None and text_value != structured:
        violation(
            clause,
            f"{tool}'s structuredContent and its text content are different objects",
            reply.evidence(),
        )
