"""The §5 sleeper example, driven in memory through a real MCP client (fast ticks)."""

from __future__ import annotations

import importlib.util
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from mcp import ClientSession
from mcp.shared.memory import create_connected_server_and_client_session

from robot_mcp_kit import TaskManager
from robot_mcp_kit.testing import RecordingPoster

SLEEPER_PATH = Path(__file__).resolve().parents[2] / "examples" / "sleeper.py"


@pytest.fixture(scope="module")
def sleeper() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sleeper_example", SLEEPER_PATH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def poster() -> RecordingPoster:
    return RecordingPoster()


@asynccontextmanager
async def connect(sleeper: ModuleType, poster: RecordingPoster) -> AsyncIterator[ClientSession]:
    """A client session to a fresh sleeper; its manager is closed on exit."""
    manager = TaskManager("sleeper", poster, known_trigger_types=sleeper.KNOWN_TRIGGER_TYPES)
    server = sleeper.build_server(manager)
    try:
        async with create_connected_server_and_client_session(server) as session:
            yield session
    finally:
        await manager.aclose()


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert not result.isError, result.content
    return json.loads(result.content[0].text)  # type: ignore[union-attr]


async def test_sleeper_lists_sleep_task_and_the_task_tools(sleeper, poster):
    """The sleeper exposes sleep_task plus get_task, cancel_task, list_tasks."""
    async with connect(sleeper, poster) as session:
        names = {t.name for t in (await session.list_tools()).tools}
    assert names == {
        "sleep_task",
        "get_task",
        "cancel_task",
        "list_tasks",
        "get_task_events",
        "answer_task_input",
    }


async def test_sleep_task_reports_progress_fires_eta_below_once_and_finishes(sleeper, poster):
    """Ticks report eta/percent; eta_below fires once; task_done carries slept_s."""
    trigger = {"type": "eta_below", "seconds": 0.1}
    async with connect(sleeper, poster) as session:
        info = await call(session, "sleep_task", duration_s=0.2, tick_s=0.05, triggers=[trigger])
        assert info["state"] == "running"
        assert info["est_duration_s"] == 0.2
        done = await poster.wait_for(info["task_id"], "task_done")
        final = await call(session, "get_task", task_id=info["task_id"])
    events = poster.events_for(info["task_id"])
    assert [e.type for e in events] == [
        "progress",
        "progress",
        "progress",
        "trigger_fired",
        "progress",
        "task_done",
    ]
    assert [e.seq for e in events] == [1, 2, 3, 4, 5, 6]
    assert [e.payload["percent"] for e in events if e.type == "progress"] == [25, 50, 75, 100]
    assert events[3].payload == {"trigger": trigger, "eta_s": 0.05}
    assert done.payload == {"result": {"slept_s": 0.2}}
    assert final["state"] == "succeeded"


async def test_repeating_eta_below_fires_on_every_tick_below(sleeper, poster):
    """With "repeat": true the trigger fires on each qualifying tick."""
    trigger = {"type": "eta_below", "seconds": 0.15, "repeat": True}
    async with connect(sleeper, poster) as session:
        info = await call(session, "sleep_task", duration_s=0.2, tick_s=0.05, triggers=[trigger])
        await poster.wait_for(info["task_id"], "task_done")
    fired = [
        e.payload["eta_s"] for e in poster.events_for(info["task_id"]) if e.type == "trigger_fired"
    ]
    assert fired == [0.1, 0.05, 0.0]


async def test_progress_above_fires_through_the_kit(sleeper, poster):
    """progress_above is evaluated by the kit from the sleeper's percent."""
    trigger = {"type": "progress_above", "percent": 60}
    async with connect(sleeper, poster) as session:
        info = await call(session, "sleep_task", duration_s=0.2, tick_s=0.05, triggers=[trigger])
        await poster.wait_for(info["task_id"], "task_done")
    fired = [e.payload for e in poster.events_for(info["task_id"]) if e.type == "trigger_fired"]
    assert fired == [{"trigger": trigger, "percent": 75}]


async def test_fail_true_fails_with_fake_failure(sleeper, poster):
    """fail=True ends in task_failed with FAKE_FAILURE and a retry suggestion."""
    async with connect(sleeper, poster) as session:
        info = await call(session, "sleep_task", duration_s=0.1, tick_s=0.05, fail=True)
        failed = await poster.wait_for(info["task_id"], "task_failed")
        final = await call(session, "get_task", task_id=info["task_id"])
    assert failed.payload == {
        "error_code": "FAKE_FAILURE",
        "message": "The sleeper was asked to fail.",
        "recoverable": True,
        "suggestions": ["retry_without_fail"],
    }
    assert poster.types_for(info["task_id"]) == ["progress", "progress", "task_failed"]
    assert final["state"] == "failed"


async def test_cancel_task_stops_a_sleeper_without_task_failed(sleeper, poster):
    """cancel_task over MCP cancels; get_task says cancelled; no terminal event."""
    async with connect(sleeper, poster) as session:
        info = await call(session, "sleep_task", duration_s=60, tick_s=0.05)
        await poster.wait_for(info["task_id"], "progress")
        cancelled = await call(session, "cancel_task", task_id=info["task_id"])
        final = await call(session, "get_task", task_id=info["task_id"])
        running = await call(session, "list_tasks", states=["running"])
    assert (cancelled["task_id"], cancelled["state"]) == (info["task_id"], "cancelled")
    assert final["state"] == "cancelled"
    assert running == {"tasks": []}
    assert set(poster.types_for(info["task_id"])) == {"progress"}


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ({"duration_s": 0}, "duration_s must be > 0"),
        ({"duration_s": -1}, "duration_s must be > 0"),
        ({"duration_s": 3600.5}, "<= 3600"),
        ({"duration_s": 1, "tick_s": 0}, "tick_s must be"),
        ({"duration_s": 1, "tick_s": -0.5}, "tick_s must be"),
        ({"duration_s": 3600, "tick_s": 0.01}, "progress ticks"),
    ],
)
async def test_invalid_arguments_answer_invalid_without_starting(
    sleeper, poster, arguments, fragment
):
    """Out-of-range arguments answer {"error": "invalid"} and start no task."""
    async with connect(sleeper, poster) as session:
        data = await call(session, "sleep_task", **arguments)
        listed = await call(session, "list_tasks")
    assert data["error"] == "invalid"
    assert fragment in data["detail"]
    assert listed == {"tasks": []}


@pytest.mark.parametrize(
    ("trigger", "detail"),
    [
        (
            {"type": "eta_below", "seconds": "soon"},
            'trigger 1 (eta_below): "seconds" must be a finite number > 0, got "soon" (a string).',
        ),
        (
            {"type": "eta_below"},
            'trigger 1 (eta_below): "seconds" is missing; it must be a finite number > 0.',
        ),
        (
            {"seconds": 3},
            'trigger 1 needs a "type", a non-empty string naming the condition; got none.',
        ),
    ],
)
async def test_a_malformed_trigger_answers_invalid_and_starts_nothing(
    sleeper, poster, trigger, detail
):
    """A trigger of a known type without its field, or with no type, refuses the start."""
    async with connect(sleeper, poster) as session:
        refused = await call(
            session,
            "sleep_task",
            duration_s=0.1,
            triggers=[{"type": "warp_drive", "factor": 9}, trigger],
        )
        listed = await call(session, "list_tasks")
    assert refused == {"error": "invalid", "detail": detail}
    assert listed == {"tasks": []}
    assert poster.events == []


async def test_unknown_triggers_are_ignored_with_a_warning(sleeper, poster, caplog):
    """An unknown trigger type is kept, warned about once and never fired; the task runs."""
    triggers = [{"type": "warp_drive", "factor": 9}, {"type": "eta_below", "seconds": 0.01}]
    with caplog.at_level(logging.WARNING, logger="robot_mcp_kit.tasks"):
        async with connect(sleeper, poster) as session:
            info = await call(session, "sleep_task", duration_s=0.1, tick_s=0.05, triggers=triggers)
            await poster.wait_for(info["task_id"], "task_done")
    events = poster.events_for(info["task_id"])
    fired = [e.payload["trigger"] for e in events if e.type == "trigger_fired"]
    assert fired == [triggers[1]]
    assert info["triggers"] == triggers
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "warp_drive" in warnings[0]
