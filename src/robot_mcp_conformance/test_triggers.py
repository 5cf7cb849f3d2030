"""Triggers: unknown types are ignored, progress_above fires once.

These pass ``triggers`` to the start tool, so they need it to take a ``triggers``
argument (kit spec §1: the caller attaches conditions when starting a task); without one
they are skipped, saying so.
"""

from __future__ import annotations

import pytest

from robot_mcp_conformance._checks import clauses, enforces, violation
from robot_mcp_conformance._config import Config
from robot_mcp_conformance._runs import PROGRESS_TRIGGER, UNKNOWN_TRIGGER, Runs


def _need_triggers(runs: Runs, conformance_config: Config) -> None:
    if not runs.triggers_supported:
        pytest.skip(
            f"the start tool {conformance_config.start_tool!r} has no 'triggers' argument "
            "in its input schema"
        )


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@enforces(clauses.UNKNOWN_TRIGGER)
def test_unknown_trigger_type_is_ignored(runs: Runs, conformance_config: Config) -> None:
    """§3.2: servers must ignore unknown trigger types; the task runs as if it had none."""
    _need_triggers(runs, conformance_config)
    clause = clauses.UNKNOWN_TRIGGER
    run = runs.unknown_trigger
    assert run is not None
    if run.info is None or run.info.get("state") != "running":
        violation(
            clause,
            f"starting a task with trigger {UNKNOWN_TRIGGER} did not return a running TaskInfo",
            run.start.evidence(),
        )
    events = run.require_events(clause)
    fired = [e for e in events if e.type == "trigger_fired"]
    if fired:
        violation(clause, "an unknown trigger fired", fired[0].to_dict())
    info = run.final_info
    if info is None or info.get("state") != "succeeded" or not run.terminal_events():
        violation(
            clause,
            f"task {run.task_id} with an unknown trigger did not succeed like one without",
            {"get_task": run.final_evidence(), "event_types": [e.type for e in events]},
        )


@enforces(clauses.PROGRESS_ABOVE)
def test_progress_above_fires_once_when_percent_is_reported(
    runs: Runs, conformance_config: Config
) -> None:
    """§3.2, §4.2: progress_above fires once, after progress reports percent ≥ its percent."""
    _need_triggers(runs, conformance_config)
    clause = clauses.PROGRESS_ABOVE
    run = runs.progress_above
    assert run is not None
    events = run.require_events(clause)
    threshold = PROGRESS_TRIGGER["percent"]
    reaching = [
        e
        for e in events
        if e.type == "progress"
        and _is_number(e.payload.get("percent"))
        and e.payload["percent"] >= threshold
    ]
    fired = [
        e
        for e in events
        if e.type == "trigger_fired" and e.payload.get("trigger") == PROGRESS_TRIGGER
    ]
    summary = {
        "progress_percents": [e.payload.get("percent") for e in events if e.type == "progress"],
        "trigger_fired": [e.to_dict() for e in fired],
    }
    if not reaching:
        if fired:
            violation(
                clause,
                f"progress_above {threshold} fired but no progress reached {threshold}%",
                summary,
            )
        pytest.skip(
            f"the --start-args task never reported progress with percent ≥ {threshold}; "
            "progress_above cannot be checked"
        )
    if not fired:
        violation(
            clause,
            f"progress reached {reaching[0].payload['percent']}% (seq {reaching[0].seq}) but "
            f"progress_above {threshold} never fired",
            summary,
        )
    if len(fired) > 1:
        violation(clause, f"progress_above fired {len(fired)} times without repeat", summary)
    if fired[0].seq < reaching[0].seq:
        violation(
            clause,
            f"progress_above fired at seq {fired[0].seq}, before progress reached "
            f"{threshold}% at seq {reaching[0].seq}",
            summary,
        )
