"""Input during a task: ctx.request_input, TaskManager.answer_input / pending_inputs, and the
answer_task_input tool (contract §11), through a real mcp 1.x client in memory."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from mcp.server.fastmcp import FastMCP
from mcp.shared.memory import create_connected_server_and_client_session

from robot_mcp_kit import (
    InputAnswer,
    InvalidArgument,
    TaskContext,
    TaskManager,
    TaskState,
    register_task_tools,
)
from robot_mcp_kit.testing import RecordingPoster

CONFIRM = {"type": "object", "properties": {"confirm": {"type": "boolean"}}}


async def _asking(manager: TaskManager, questions: int = 1) -> str:
    async def body(ctx: TaskContext) -> dict[str, Any]:
        answers = await asyncio.gather(
            *(ctx.request_input(f"question {i}?", schema=CONFIRM) for i in range(questions))
        )
        return {"answers": [a.model_dump() for a in answers]}

    return manager.start("ask", body).task_id


async def _until_pending(manager: TaskManager, task_id: str, count: int) -> dict[str, Any]:
    for _ in range(200):
        pending = manager.pending_inputs(task_id) or {}
        if len(pending) >= count:
            return pending
        await asyncio.sleep(0.005)
    raise AssertionError(f"{task_id} never waited on {count} input request(s)")


async def test_request_input_announces_waits_and_resumes(manager, poster):
    """The request is an input_required event and a pending input; the answer emits
    input_answered, wakes the body, and the task succeeds with what was answered."""
    task_id = await _asking(manager)
    pending = await _until_pending(manager, task_id, 1)
    assert pending == {
        "input-1": {
            "method": "elicitation/create",
            "params": {"mode": "form", "message": "question 0?", "requestedSchema": CONFIRM},
        }
    }
    assert manager.get(task_id).state == TaskState.RUNNING
    announced = poster.events_for(task_id)[0]
    assert announced.type == "input_required"
    assert announced.payload == {"request_id": "input-1", **pending["input-1"]}

    answered = await manager.answer_input(
        task_id, {"input-1": {"action": "accept", "content": {"confirm": True}}}
    )
    assert answered == ["input-1"]
    done = await poster.wait_for(task_id, "task_done")
    assert done.payload == {
        "result": {"answers": [{"action": "accept", "content": {"confirm": True}}]}
    }
    assert poster.types_for(task_id) == ["input_required", "input_answered", "task_done"]
    assert poster.events_for(task_id)[1].payload == {"request_id": "input-1", "action": "accept"}
    assert manager.pending_inputs(task_id) == {}


async def test_partial_answers_leave_the_rest_pending_and_unknown_ids_are_ignored(manager, poster):
    """Two requests at once: answering one (with an unknown id beside it) leaves the other."""
    task_id = await _asking(manager, questions=2)
    await _until_pending(manager, task_id, 2)
    answered = await manager.answer_input(
        task_id, {"input-2": InputAnswer(action="decline"), "input-9": {"nonsense": True}}
    )
    assert answered == ["input-2"]
    assert list(manager.pending_inputs(task_id) or {}) == ["input-1"]
    again = await manager.answer_input(task_id, {"input-2": {"action": "accept"}})
    assert again == []  # already answered: ignored
    await manager.answer_input(task_id, {"input-1": {"action": "cancel"}})
    done = await poster.wait_for(task_id, "task_done")
    assert [a["action"] for a in done.payload["result"]["answers"]] == ["cancel", "decline"]


async def test_a_malformed_answer_is_refused_and_nothing_is_answered(manager, poster):
    task_id = await _asking(manager)
    await _until_pending(manager, task_id, 1)
    with pytest.raises(InvalidArgument, match=r"input request 'input-1'.*action"):
        await manager.answer_input(task_id, {"input-1": {"action": "maybe"}})
    assert list(manager.pending_inputs(task_id) or {}) == ["input-1"]
    assert poster.types_for(task_id) == ["input_required"]
    assert await manager.answer_input("slee-000000", {}) is None
    await manager.cancel(task_id)


async def test_cancelling_a_waiting_task_cancels_the_wait(manager, poster):
    task_id = await _asking(manager)
    await _until_pending(manager, task_id, 1)
    info = await manager.cancel(task_id)
    assert info is not None
    assert info.state == TaskState.CANCELLED
    assert manager.pending_inputs(task_id) == {}
    assert poster.types_for(task_id) == ["input_required"]


async def test_a_message_that_is_not_text_is_refused(manager, poster):
    async def body(ctx: TaskContext) -> dict[str, Any]:
        await ctx.request_input(42)  # type: ignore[arg-type]
        return {}

    task_id = manager.start("ask", body).task_id
    failed = await poster.wait_for(task_id, "task_failed")
    assert "message must be a str" in failed.payload["message"]


async def test_answer_task_input_tool_answers_through_mcp():
    """register_task_tools(inputs=True): answer_task_input answers the TaskInfo; an id the
    task does not wait on and a bad action answer error objects; the task then finishes."""
    poster = RecordingPoster()
    manager = TaskManager("sleeper", poster)
    server = FastMCP("sleeper")
    register_task_tools(server, manager, inputs=True)
    async with create_connected_server_and_client_session(server._mcp_server) as client:
        await client.initialize()
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "answer_task_input" in names
        task_id = await _asking(manager)
        await _until_pending(manager, task_id, 1)

        async def call(**arguments: Any) -> dict[str, Any]:
            result = await client.call_tool("answer_task_input", arguments)
            assert not result.isError, result
            return dict(json.loads(result.content[0].text))

        wrong = await call(task_id=task_id, request_id="input-7", action="accept")
        assert wrong["error"] == "not_found"
        assert "input-7" in wrong["detail"]
        unknown = await call(task_id="slee-000000", request_id="input-1", action="accept")
        assert unknown["error"] == "not_found"
        ok = await call(
            task_id=task_id, request_id="input-1", action="accept", content={"confirm": True}
        )
        assert ok["task_id"] == task_id
        assert ok["state"] == "running"
        await poster.wait_for(task_id, "task_done")
    await manager.aclose()


async def test_without_inputs_the_tool_list_is_today_s():
    server = FastMCP("sleeper")
    register_task_tools(server, TaskManager("sleeper", RecordingPoster()))
    names = {tool.name for tool in await server.list_tools()}
    assert names == {"get_task", "cancel_task", "list_tasks", "get_task_events"}
