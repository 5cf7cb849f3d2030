"""Optional: task ownership (contract §13), judged with a second principal's token.

With ``--bearer-token`` (the suite's principal) and ``--other-bearer-token`` (another
one), the suite starts a long task, and one that waits for input when §11 is judged, as
its principal. As the other principal it lists the tasks, reads them, reads their events,
answers the question and cancels them: the tasks must be missing from its lists, every
other call must answer ``not_found`` exactly as it does for an id that never existed, and
nothing it sent may reach the tasks (they still run, the question is still open). Without
``--other-bearer-token`` the test is skipped.
"""

from __future__ import annotations

from typing import Any

import pytest

from robot_mcp_conformance._checks import clauses, enforces, violation
from robot_mcp_conformance._runs import OwnershipRun
from robot_mcp_kit import TaskState


def _error_of(data: Any) -> Any:
    return data.get("error") if isinstance(data, dict) else None


@enforces(clauses.TASK_OWNERSHIP)
def test_another_principal_s_task_is_an_unknown_id_to_it(ownership: OwnershipRun) -> None:
    """§13: to another principal, a task is an unknown id on every task tool."""
    clause = clauses.TASK_OWNERSHIP
    if ownership.note is not None:
        pytest.fail(f"§13 cannot be judged: {ownership.note}", pytrace=False)
    mine = set(ownership.tasks)
    for reply in ownership.listed:
        tasks = reply.data.get("tasks") if isinstance(reply.data, dict) else None
        if not reply.answered or not isinstance(tasks, list):
            violation(
                clause,
                'list_tasks as the other principal did not answer {"tasks": [...]}',
                reply.evidence(),
            )
        leaked = [t for t in tasks if isinstance(t, dict) and t.get("task_id") in mine]
        if leaked:
            violation(
                clause,
                f"list_tasks({reply.arguments}) as the other principal lists the suite's "
                f"tasks {sorted(str(t['task_id']) for t in leaked)}",
                leaked,
            )
    for tool, task_id, theirs, never in ownership.calls:
        # What an unknown id gets is §6's and §11's to judge; here the answer must be the
        # same, and must not be the task.
        data = theirs.data
        answers_the_task = isinstance(data, dict) and (
            "state" in data or data.get("task_id") == task_id
        )
        same = (
            theirs.answered == never.answered
            and theirs.is_error == never.is_error
            and _error_of(data) == _error_of(never.data)
        )
        problems = []
        if answers_the_task:
            problems.append("answered the task itself")
        if not same:
            problems.append(
                "did not answer as it does for an id that never existed "
                f"(error {_error_of(never.data)!r})"
            )
        if problems:
            violation(
                clause,
                f"{tool}({task_id!r}) as the other principal " + " and ".join(problems),
                {"their_task": theirs.evidence(), "never_existed": never.evidence()},
            )
    if ownership.answered:
        violation(
            clause,
            f"answer_task_input as the other principal answered the question of task "
            f"{ownership.tasks[-1]} (an input_answered event followed)",
        )
    for task_id, reply in ownership.after.items():
        state = reply.data.get("state") if isinstance(reply.data, dict) else None
        if state != TaskState.RUNNING:
            violation(
                clause,
                f"task {task_id} is {state!r} to its owner after the other principal's calls, "
                "not running: a call of the other principal reached it",
                reply.evidence(),
            )
