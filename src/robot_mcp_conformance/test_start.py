"""Starting a task: the start tool returns a running TaskInfo at once, with a well-formed id."""

from __future__ import annotations

import re

from pydantic import ValidationError

from robot_mcp_conformance._checks import clauses, enforces, violation
from robot_mcp_conformance._config import CALL_BUDGET_S, Config
from robot_mcp_conformance._runs import Runs
from robot_mcp_kit import TaskInfo, TaskState

_TASK_INFO_KEYS = frozenset(TaskInfo.model_fields)


@enforces(clauses.START_RETURNS_AT_ONCE)
def test_start_call_returns_at_once_with_a_running_task(runs: Runs) -> None:
    """§1, §4.2: a long-running tool returns immediately (state running) within ~30 s."""
    clause = clauses.START_RETURNS_AT_ONCE
    for run in runs.all():
        evidence = run.start.evidence()
        if run.start.failure is not None:
            violation(clause, f"the {run.label} start call got no answer", evidence)
        if run.start.elapsed_s > CALL_BUDGET_S:
            violation(
                clause,
                f"the {run.label} start call took {run.start.elapsed_s:.1f} s, over the "
                f"{CALL_BUDGET_S:.0f} s call budget",
                evidence,
            )
        info = run.info
        if run.start.is_error or info is None:
            violation(
                clause, f"the {run.label} start call did not return a TaskInfo JSON", evidence
            )
        # State running is the evidence that the tool did not wait for the work. When
        # the terminal event arrived says nothing: on a busy machine a short task may
        # legitimately finish before the start call's reply reaches the suite.
        if info.get("state") != TaskState.RUNNING:
            violation(
                clause,
                f"the {run.label} start call returned state {info.get('state')!r}, not "
                "'running': it waited for the work instead of returning at once",
                evidence,
            )


@enforces(clauses.TASK_INFO_SHAPE)
def test_start_returns_a_task_info(runs: Runs, conformance_config: Config) -> None:
    """§4.1: the start tool returns the task's TaskInfo, every field present."""
    clause = clauses.TASK_INFO_SHAPE
    cfg = conformance_config
    for run in runs.all():
        info = run.info
        evidence = run.start.evidence()
        if info is None:
            violation(clause, f"the {run.label} start call returned no TaskInfo", evidence)
        missing = sorted(_TASK_INFO_KEYS - set(info))
        if missing:
            violation(clause, f"the {run.label} TaskInfo lacks {missing}", evidence)
        try:
            parsed = TaskInfo.model_validate(info)
        except ValidationError as exc:
            violation(clause, f"the {run.label} TaskInfo does not validate: {exc}", evidence)
        expected = {"server": cfg.server_name, "tool": cfg.start_tool}
        for key, want in expected.items():
            if info.get(key) != want:
                violation(
                    clause,
                    f"the {run.label} TaskInfo has {key}={info.get(key)!r}, expected {want!r}",
                    evidence,
                )
        if parsed.updated_at < parsed.created_at:
            violation(
                clause, f"the {run.label} TaskInfo was updated before it was created", evidence
            )
        asked = run.start.arguments.get("triggers")
        if asked is not None and info.get("triggers") != asked:
            violation(
                clause,
                f"the {run.label} TaskInfo's triggers are not the triggers passed in",
                {"passed": asked, **evidence},
            )


@enforces(clauses.TASK_ID_FORM)
def test_task_id_is_server_short_dash_six_hex(runs: Runs, conformance_config: Config) -> None:
    """§4.2: task_id = f"{server_name[:4]}-{uuid4().hex[:6]}", unique per task."""
    clause = clauses.TASK_ID_FORM
    short = conformance_config.server_name[:4]
    pattern = re.compile(re.escape(short) + r"-[0-9a-f]{6}")
    seen: dict[str, str] = {}
    for run in runs.all():
        task_id = run.require_task(clause)
        if not pattern.fullmatch(task_id):
            violation(
                clause,
                f"task_id {task_id!r} ({run.label}) is not {short!r} + '-' + 6 lowercase hex "
                f"digits",
                run.start.evidence(),
            )
        if task_id in seen:
            violation(
                clause,
                f"tasks {seen[task_id]} and {run.label} got the same task_id {task_id!r}",
                run.start.evidence(),
            )
        seen[task_id] = run.label
