"""Optional: input during a task (contract §11), the webhook face.

A server that lists ``answer_task_input`` and is given ``--input-args`` (the sleeper's
default: ``confirm: true``) must announce the question as an ``input_required`` event while
the task stays ``running``, accept the answer through ``answer_task_input`` (announced as
``input_answered``), let the task go on to its end, and refuse a second answer to the same
request with ``not_found``. Without the tool or the arguments these tests are skipped.
"""

from __future__ import annotations

from robot_mcp_conformance._checks import clauses, enforces, violation
from robot_mcp_conformance._runs import InputRun
from robot_mcp_kit import TaskState
from robot_mcp_kit.models import TERMINAL_EVENT_TYPES


@enforces(clauses.INPUT_ANNOUNCED)
def test_input_request_is_announced(input_run: InputRun) -> None:
    """§11.1: input_required {request_id, method, params {message, requestedSchema}}."""
    clause = clauses.INPUT_ANNOUNCED
    task_id = input_run.run.require_task(clause)
    event = input_run.announced
    if event is None:
        violation(
            clause,
            f"task {task_id} (--input-args) emitted no input_required event",
            [e.event.model_dump(mode="json") for e in input_run.run.events],
        )
    payload = event.event.payload
    params = payload.get("params")
    problems = []
    if not isinstance(payload.get("request_id"), str) or not payload["request_id"]:
        problems.append("request_id is not a non-empty string")
    if payload.get("method") != "elicitation/create":
        problems.append(f"method is {payload.get('method')!r}, not 'elicitation/create'")
    if not isinstance(params, dict) or not isinstance(params.get("message"), str):
        problems.append("params.message is not a string")
    elif not isinstance(params.get("requestedSchema"), dict):
        problems.append("params.requestedSchema is not an object")
    if input_run.waiting != TaskState.RUNNING:
        problems.append(f"get_task said {input_run.waiting!r} while it waited, not 'running'")
    if problems:
        violation(clause, f"task {task_id}: " + "; ".join(problems), payload)


@enforces(clauses.INPUT_ANSWERED)
def test_answered_input_lets_the_task_finish(input_run: InputRun) -> None:
    """§11.2: the answer is accepted, announced (input_answered) and the task ends; a
    second answer to the same request answers not_found."""
    clause = clauses.INPUT_ANSWERED
    task_id = input_run.run.require_task(clause)
    if input_run.announced is None or input_run.answer is None:
        violation(
            clause,
            f"task {task_id} announced no input request, so no answer could be given "
            "(see test_input_request_is_announced)",
            [e.event.model_dump(mode="json") for e in input_run.run.events],
        )
    request_id = input_run.announced.event.payload.get("request_id")
    answer = input_run.answer
    data = answer.data
    if not answer.answered or not isinstance(data, dict) or data.get("task_id") != task_id:
        violation(
            clause,
            f"answer_task_input({task_id!r}, {request_id!r}, accept) did not answer the task",
            answer.evidence(),
        )
    events = input_run.run.events
    types = [e.type for e in events]
    answered = [
        e
        for e in events
        if e.type == "input_answered"
        and e.event.payload == {"request_id": request_id, "action": "accept"}
    ]
    if not answered:
        violation(
            clause,
            f"task {task_id}: no input_answered {{request_id: {request_id!r}, action: "
            f"'accept'}} event after the answer; events: {types}",
            [e.event.model_dump(mode="json") for e in events],
        )
    if not any(t in TERMINAL_EVENT_TYPES for t in types):
        violation(
            clause,
            f"task {task_id} did not go on to its end after the answer; events: {types}",
            input_run.run.note,
        )
    again = input_run.again
    again_data = None if again is None else again.data
    if not isinstance(again_data, dict) or again_data.get("error") != "not_found":
        violation(
            clause,
            f"answering {request_id!r} of task {task_id} a second time did not answer not_found",
            None if again is None else again.evidence(),
        )
