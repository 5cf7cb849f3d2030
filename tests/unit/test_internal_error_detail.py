"""What an INTERNAL failure tells the planner of an unexpected exception (issue 19).

By default its ``str(exc)`` (the kit spec asks for it); with
``TaskManager(internal_error_detail="type")`` only its type, the message and traceback
staying in the server's log. Checked on the recorded ``task_failed`` event and on
``get_task`` / ``list_tasks`` through a real MCP client.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from mcp.server.fastmcp import FastMCP
from mcp.shared.memory import create_connected_server_and_client_session

from robot_mcp_kit import (
    ConfigurationError,
    TaskContext,
    TaskManager,
    TaskRuntime,
    register_task_tools,
)
from robot_mcp_kit.testing import RecordingPoster

SECRET = "password=hunter2 at db.internal:5432"


async def leaks(ctx: TaskContext) -> dict[str, Any]:
    raise ConnectionError(SECRET)


async def answers(manager: TaskManager, task_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``get_task`` and ``list_tasks`` for ``task_id``, as the client reads them."""
    server = FastMCP("sleeper")
    register_task_tools(server, manager)
    async with create_connected_server_and_client_session(server) as client:
        got = await client.call_tool("get_task", {"task_id": task_id})
        listed = await client.call_tool("list_tasks", {})
    assert not got.isError
    assert not listed.isError
    assert got.structuredContent is not None
    assert listed.structuredContent is not None
    return got.structuredContent, listed.structuredContent


async def test_by_default_the_failure_carries_the_exception_text(poster, manager):
    """Default "message": the task_failed event and get_task carry str(exc)."""
    assert manager.internal_error_detail == "message"
    info = manager.start("navigate_to", leaks)
    failed = await poster.wait_for(info.task_id, "task_failed")
    assert failed.payload == {
        "error_code": "INTERNAL",
        "message": SECRET,
        "recoverable": False,
        "suggestions": [],
    }
    got, _ = await answers(manager, info.task_id)
    assert got["failure"]["message"] == SECRET


async def test_type_only_sends_the_type_and_logs_the_detail(poster, capture_logs):
    """With "type", the event, get_task and list_tasks name only the type; the log has the
    message and the traceback."""
    manager = TaskManager("sleeper", poster, internal_error_detail="type")
    try:
        with capture_logs() as logs:
            info = manager.start("navigate_to", leaks)
            failed = await poster.wait_for(info.task_id, "task_failed")
        expected = (
            "The task stopped on an unexpected ConnectionError; the details are in the "
            "server's log."
        )
        assert failed.payload == {
            "error_code": "INTERNAL",
            "message": expected,
            "recoverable": False,
            "suggestions": [],
        }
        got, listed = await answers(manager, info.task_id)
        assert got["failure"]["message"] == expected
        for answer in (failed.payload, got, listed):
            assert "hunter2" not in json.dumps(answer)
        (raised,) = [e for e in logs if e["event"] == "task_body_raised"]
        assert raised["task_id"] == info.task_id
        assert raised["error"] == "ConnectionError"
        assert raised["detail"] == SECRET
        assert raised["log_level"] == "error"
    finally:
        await manager.aclose()


async def test_type_only_keeps_the_traceback_in_the_log(poster, caplog):
    """The log record of the failure holds the exception itself (its traceback)."""
    manager = TaskManager("sleeper", poster, internal_error_detail="type")
    try:
        with caplog.at_level(logging.ERROR, logger="robot_mcp_kit.tasks"):
            info = manager.start("navigate_to", leaks)
            await poster.wait_for(info.task_id, "task_failed")
        (record,) = [r for r in caplog.records if getattr(r, "event", None) == "task_body_raised"]
        assert record.exc_info is not None
        assert record.exc_info[0] is ConnectionError
        assert SECRET in caplog.text
    finally:
        await manager.aclose()


async def test_task_runtime_takes_it_through_manager_options():
    """TaskRuntime(manager_options={"internal_error_detail": "type"}) sets it."""
    poster = RecordingPoster()
    runtime = TaskRuntime(
        "sleeper", poster=poster, manager_options={"internal_error_detail": "type"}
    )
    async with runtime:
        info = runtime.manager.start("navigate_to", leaks)
        failed = await poster.wait_for(info.task_id, "task_failed")
    assert "hunter2" not in failed.payload["message"]
    assert "ConnectionError" in failed.payload["message"]


async def test_a_task_error_is_unchanged_by_type_only(poster):
    """A TaskError's own message is the author's choice and goes out as written."""
    from robot_mcp_kit import TaskError

    async def refuses(ctx: TaskContext) -> dict[str, Any]:
        raise TaskError("DOOR_CLOSED", "The door to the lab is closed.")

    manager = TaskManager("sleeper", poster, internal_error_detail="type")
    try:
        info = manager.start("navigate_to", refuses)
        failed = await poster.wait_for(info.task_id, "task_failed")
        assert failed.payload["message"] == "The door to the lab is closed."
    finally:
        await manager.aclose()


@pytest.mark.parametrize("value", ["traceback", "", None, "TYPE"])
def test_an_unknown_setting_is_refused_at_construction(poster, value):
    """Anything but "message" or "type" raises ConfigurationError naming the valid ones."""
    with pytest.raises(ConfigurationError, match=r"internal_error_detail must be one of"):
        TaskManager("sleeper", poster, internal_error_detail=value)
