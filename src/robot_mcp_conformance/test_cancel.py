"""Cancellation: cancel_task answers cancelled, is idempotent, is silent, stops the work,
leaves finished tasks."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from robot_mcp_conformance._checks import clauses, enforces, violation
from robot_mcp_conformance._harness import Harness
from robot_mcp_conformance._runs import CANCEL_STOP_S, CANCEL_TASK, CancelRun, Runs
from robot_mcp_kit import TaskState
from robot_mcp_kit.models import TERMINAL_EVENT_TYPES, format_ts


def _cancelled_reply(reply: Any, task_id: str) -> bool:
    data = None if reply is None else reply.data
    return (
        reply is not None
        and reply.answered
        and isinstance(data, dict)
        and data.get("task_id") == task_id
        and data.get("state") == TaskState.CANCELLED
    )


def _require_running_before(cancelled: CancelRun, clause: Any) -> str:
    task_id = cancelled.run.require_task(clause)
    before = cancelled.before
    state = (
        None if before is None or not isinstance(before.data, dict) else before.data.get("state")
    )
    if state in (TaskState.SUCCEEDED, TaskState.FAILED):
        pytest.skip(
            f"the --cancel-args task {task_id} had already {state} before the cancel; "
            "give --cancel-args for a task that runs longer"
        )
    return task_id


@enforces(clauses.CANCEL_RETURNS)
def test_cancel_task_returns_cancelled(cancelled: CancelRun) -> None:
    """§3.3: cancel_task(task_id) → {"task_id": ..., "state": "cancelled"}."""
    clause = clauses.CANCEL_RETURNS
    task_id = _require_running_before(cancelled, clause)
    if not _cancelled_reply(cancelled.first, task_id):
        violation(
            clause,
            f"cancel_task({task_id!r}) on a running task did not answer state cancelled",
            None if cancelled.first is None else cancelled.first.evidence(),
        )


@enforces(clauses.CANCEL_IDEMPOTENT)
def test_cancel_task_is_idempotent(cancelled: CancelRun) -> None:
    """§3.3: cancelling a cancelled task again answers the same, without an error."""
    clause = clauses.CANCEL_IDEMPOTENT
    task_id = _require_running_before(cancelled, clause)
    if not _cancelled_reply(cancelled.second, task_id):
        violation(
            clause,
            f"the second cancel_task({task_id!r}) did not answer state cancelled again",
            {
                "first": None if cancelled.first is None else cancelled.first.evidence(),
                "second": None if cancelled.second is None else cancelled.second.evidence(),
            },
        )


@enforces(clauses.CANCEL_NO_EVENT)
def test_cancelled_task_stays_cancelled_and_emits_no_task_failed(cancelled: CancelRun) -> None:
    """§4.2: a cancelled task ends in state cancelled and posts no task_failed (or task_done)."""
    clause = clauses.CANCEL_NO_EVENT
    run = cancelled.run
    task_id = _require_running_before(cancelled, clause)
    posted = [a for a in run.attempts if a.type in TERMINAL_EVENT_TYPES]
    if posted:
        violation(
            clause,
            f"cancelled task {task_id} posted {posted[0].type} (seq {posted[0].seq})",
            {
                "offending_post": posted[0].to_dict(),
                "cancel": cancelled.first and cancelled.first.evidence(),
            },
        )
    after = cancelled.after
    state = None if after is None or not isinstance(after.data, dict) else after.data.get("state")
    if state != TaskState.CANCELLED:
        violation(
            clause,
            f"after cancel_task, get_task({task_id!r}) reports state {state!r}",
            None if after is None else after.evidence(),
        )


@enforces(clauses.CANCEL_STOPS_WORK)
def test_cancel_stops_the_work(cancelled: CancelRun) -> None:
    """§4.2: cancel stops the task's work: no event stamped over 1 s after the cancel reply."""
    clause = clauses.CANCEL_STOPS_WORK
    run = cancelled.run
    task_id = _require_running_before(cancelled, clause)
    if not run.events and run.rejections:
        # Without a verified event there is no trustworthy ts to judge by.
        run.require_events(clause)
    late = cancelled.late_events()
    if late and cancelled.cancelled_wall is not None:
        replied = datetime.fromtimestamp(cancelled.cancelled_wall, UTC)
        violation(
            clause,
            f"cancelled task {task_id} still reports work: {len(late)} event(s) stamped more "
            f"than {CANCEL_STOP_S:g} s after cancel_task answered (at "
            f"{format_ts(replied)}), the first {late[0].type} seq {late[0].seq} at "
            f"{format_ts(late[0].event.ts)}",
            {
                "offending_event": late[0].to_dict(),
                "cancel": cancelled.first and cancelled.first.evidence(),
            },
        )


@enforces(clauses.CANCEL_FINISHED)
def test_cancelling_a_finished_task_leaves_its_state(harness: Harness, runs: Runs) -> None:
    """§3.3: cancel_task on a finished task returns its terminal state unchanged."""
    clause = clauses.CANCEL_FINISHED
    finished = [run for run in (runs.completed, runs.failed) if run is not None]
    for run in finished:
        task_id = run.require_task(clause)
        state = harness.state_of(task_id)
        if state not in (TaskState.SUCCEEDED, TaskState.FAILED):
            violation(
                clause,
                f"task {task_id} ({run.label}) has not finished (get_task says {state!r}), so "
                "cancelling a finished task cannot be checked",
                run.final_evidence(),
            )
        reply = harness.call(CANCEL_TASK, {"task_id": task_id})
        data = reply.data
        if not reply.answered or not isinstance(data, dict) or data.get("state") != state:
            violation(
                clause,
                f"cancel_task on {state} task {task_id} did not answer state {state!r}",
                reply.evidence(),
            )
        again = harness.state_of(task_id)
        if again != state:
            violation(
                clause,
                f"after cancel_task, {state} task {task_id} is now {again!r}",
                reply.evidence(),
            )
