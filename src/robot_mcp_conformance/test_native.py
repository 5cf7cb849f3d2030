"""Optional: the MCP tasks extension and the events tell of the same task (contract §12).

A server that advertises ``io.modelcontextprotocol/tasks`` (``server/discover``, protocol
2026-07-28, streamable HTTP) gets a succeeding, a failing and a cancelled task started
through ``tools/call`` by a caller declaring the extension, each polled with ``tasks/get``
to its end: each must be a ``CreateTaskResult`` naming the contract's ``task_id``, and
``tasks/get``, the events and ``get_task`` must agree on how it ended, its result and its
failure. Other servers are not judged: the test is reported as skipped.
"""

from __future__ import annotations

from typing import Any

from robot_mcp_conformance._checks import clauses, enforces, violation
from robot_mcp_conformance._native import KIT_TASK_ID_META_KEY, NativeRun
from robot_mcp_kit import TaskState

_PROTOCOL_CODES = ("INTERNAL", "INTERRUPTED")


def _problems(run: NativeRun) -> list[str]:
    if run.error is not None:
        return [run.error]
    created = run.created or {}
    if created.get("resultType") != "task" or not isinstance(created.get("taskId"), str):
        return [f"tools/call did not answer a CreateTaskResult: {created!r}"]
    if run.kit_task_id is None or run.webhook is None:
        return [
            f"the CreateTaskResult does not name its task_id in _meta[{KIT_TASK_ID_META_KEY!r}]"
        ]
    final = run.final or {}
    status = final.get("status")
    raw_result = final.get("result")
    result: dict[str, Any] = raw_result if isinstance(raw_result, dict) else {}
    events = run.webhook.events
    terminal = [e for e in events if e.type in ("task_done", "task_failed")]
    info = run.webhook.final_info or {}
    problems: list[str] = []
    if run.label == "succeeding":
        done = [e.event.payload.get("result") for e in terminal if e.type == "task_done"]
        if status != "completed" or result.get("isError"):
            problems.append(f"tasks/get ended {status!r} (isError {result.get('isError')!r})")
        if done != [result.get("structuredContent")]:
            problems.append(
                f"task_done's result {done!r} is not tasks/get's structuredContent "
                f"{result.get('structuredContent')!r}"
            )
        if info.get("state") != TaskState.SUCCEEDED or info.get("result") not in done:
            problems.append(f"get_task says {info.get('state')!r}, result {info.get('result')!r}")
    elif run.label == "failing":
        failed = [e.event.payload for e in terminal if e.type == "task_failed"]
        failure: Any = None
        if status == "completed" and result.get("isError") is True:
            failure = result.get("structuredContent")
        elif status == "failed":
            raw_error = final.get("error")
            failure = raw_error.get("data") if isinstance(raw_error, dict) else None
            if not isinstance(failure, dict) or failure.get("error_code") not in _PROTOCOL_CODES:
                problems.append(
                    "tasks/get said failed for a domain error (only INTERNAL and "
                    "INTERRUPTED are protocol-level)"
                )
        else:
            problems.append(f"tasks/get ended {status!r} for a failing task")
        if failed != [failure]:
            problems.append(f"task_failed's failure {failed!r} is not tasks/get's {failure!r}")
        if info.get("state") != TaskState.FAILED or info.get("failure") not in failed:
            problems.append(f"get_task says {info.get('state')!r}, failure {info.get('failure')!r}")
    else:
        if run.cancel_ack is None or {
            k for k in run.cancel_ack if k not in ("_meta", "resultType")
        }:
            problems.append(f"tasks/cancel did not answer an empty ack: {run.cancel_ack!r}")
        if status != "cancelled":
            problems.append(f"tasks/get ended {status!r} after tasks/cancel, not 'cancelled'")
        if terminal:
            problems.append(f"the cancelled task emitted {[e.type for e in terminal]}")
        if info.get("state") != TaskState.CANCELLED:
            problems.append(f"get_task says {info.get('state')!r} after tasks/cancel")
    return problems


@enforces(clauses.NATIVE_AGREES)
def test_native_task_agrees_with_the_events(native_runs: list[NativeRun]) -> None:
    """§12: one task, two faces: tasks/get, the events and get_task agree on its end."""
    clause = clauses.NATIVE_AGREES
    for run in native_runs:
        problems = _problems(run)
        if problems:
            violation(
                clause,
                f"the {run.label} task ({run.kit_task_id}): " + "; ".join(problems),
                {
                    "created": run.created,
                    "tasks/get": run.final,
                    "events": [e.event.model_dump(mode="json") for e in run.webhook.events]
                    if run.webhook is not None
                    else None,
                },
            )
