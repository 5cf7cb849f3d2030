"""NativeTasks: the tasks-extension view of the manager's tasks, framework-free.

The mcp 2.x wiring (``NativeTasks.extension()``) runs under the official suite against
``examples/tasks_fixture.py`` and in tests/frameworks/run.sh; this file holds what needs no
framework: ids bound to their caller, the status mapping of each kit state, update and
cancel through the manager, and the settings.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from robot_mcp_kit import ConfigurationError, NativeTasks, TaskContext, TaskError, TaskManager
from robot_mcp_kit.native_tasks import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    KIT_TASK_ID_META_KEY,
    POLL_INTERVAL_ENV,
    SECRET_ENV,
    NativeTaskError,
)
from robot_mcp_kit.testing import RecordingPoster

SECRET = b"0123456789abcdef0123456789abcdef"


@pytest.fixture
def native(manager: TaskManager) -> NativeTasks:
    return NativeTasks(manager, id_secret=SECRET, poll_interval_ms=250)


def _start(manager: TaskManager, body: Any, tool: str = "job") -> str:
    return manager.start(tool, body).task_id


async def _ends(poster: RecordingPoster, task_id: str, *types: str) -> None:
    for _ in range(400):
        if any(t in types for t in poster.types_for(task_id)):
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"{task_id} never emitted {types}")


async def _succeeds(ctx: TaskContext) -> dict[str, Any]:
    await ctx.progress({"percent": 50.0, "message": "half way"})
    return {"answer": 42}


async def test_created_is_a_flat_task_bound_to_its_caller(manager, native, poster):
    info = manager.start("job", _succeeds)
    created = native.created(info, owner="alice")
    assert created["resultType"] == "task"
    assert created["status"] == "working"
    assert created["ttlMs"] is None
    assert created["pollIntervalMs"] == 250
    assert created["_meta"] == {KIT_TASK_ID_META_KEY: info.task_id}
    assert not {"result", "error", "inputRequests", "task"} & set(created)
    native_id = created["taskId"]
    assert native_id.startswith(f"{info.task_id}.")
    assert len(native_id.split(".")[1]) == 22
    # Resolves at once for its creator; for anyone else it is unknown, like a made-up id.
    assert native.get(native_id, "alice")["taskId"] == native_id
    for owner, task in (("mallory", native_id), ("alice", info.task_id), ("alice", 7)):
        with pytest.raises(NativeTaskError) as caught:
            native.get(task, owner)
        assert caught.value.code == INVALID_PARAMS
    await _ends(poster, info.task_id, "task_done")


async def test_each_kit_state_reads_as_its_native_status(manager, native, poster):
    async def tool_error(ctx: TaskContext) -> dict[str, Any]:
        raise TaskError("DOOR_CLOSED", "The door is closed.", suggestions=["ask"])

    async def crash(ctx: TaskContext) -> dict[str, Any]:
        raise RuntimeError("worker crashed")

    async def forever(ctx: TaskContext) -> dict[str, Any]:
        await ctx.progress({"percent": 10.0})
        await asyncio.sleep(60)
        return {}

    ok, failed, crashed, running = (
        _start(manager, body) for body in (_succeeds, tool_error, crash, forever)
    )
    for task_id, end in ((ok, "task_done"), (failed, "task_failed"), (crashed, "task_failed")):
        await _ends(poster, task_id, end)
    await _ends(poster, running, "progress")

    def get(task_id: str) -> dict[str, Any]:
        return native.get(native.native_id(task_id, ""), "")

    done = get(ok)
    assert done["status"] == "completed"
    assert done["result"]["isError"] is False
    assert done["result"]["structuredContent"] == {"answer": 42}
    assert done["result"]["content"] == [{"type": "text", "text": '{"answer":42}'}]

    tool = get(failed)
    assert tool["status"] == "completed"
    assert "error" not in tool
    assert tool["result"]["isError"] is True
    assert tool["result"]["structuredContent"]["error_code"] == "DOOR_CLOSED"
    assert tool["statusMessage"] == "The door is closed."

    protocol = get(crashed)
    assert protocol["status"] == "failed"
    assert "result" not in protocol
    assert protocol["error"]["code"] == INTERNAL_ERROR
    assert protocol["error"]["message"] == "worker crashed"
    assert protocol["error"]["data"]["error_code"] == "INTERNAL"

    working = get(running)
    assert working["status"] == "working"
    assert working["statusMessage"] == '{"percent":10.0}'
    await native.cancel(native.native_id(running, ""), "")
    cancelled = get(running)
    assert cancelled["status"] == "cancelled"
    # A terminal task is never rewritten: cancelling again, or a finished one, changes nothing.
    await native.cancel(native.native_id(ok, ""), "")
    assert get(ok) == done
    assert poster.types_for(running) == ["progress"]


async def test_input_required_and_update(manager, native, poster):
    async def asks(ctx: TaskContext) -> dict[str, Any]:
        answer = await ctx.request_input("Go?", schema={"type": "object", "properties": {}})
        return {"action": answer.action}

    task_id = _start(manager, asks)
    native_id = native.native_id(task_id, "")
    await _ends(poster, task_id, "input_required")
    waiting = native.get(native_id, "")
    assert waiting["status"] == "input_required"
    assert list(waiting["inputRequests"]) == ["input-1"]
    assert waiting["inputRequests"]["input-1"]["method"] == "elicitation/create"
    with pytest.raises(NativeTaskError) as caught:
        await native.update(native_id, "", {"input-1": {"action": "later"}})
    assert caught.value.code == INVALID_PARAMS
    with pytest.raises(NativeTaskError):
        await native.update(native_id, "", ["not", "a", "map"])
    await native.update(native_id, "", {"unknown": {}, "input-1": {"action": "decline"}})
    await _ends(poster, task_id, "task_done")
    assert native.get(native_id, "")["result"]["structuredContent"] == {"action": "decline"}


def test_task_started_recognises_only_this_manager_s_fresh_task_info(manager, native):
    async def body(ctx: TaskContext) -> dict[str, Any]:
        await asyncio.sleep(60)
        return {}

    async def scenario() -> None:
        info = manager.start("job", body)
        answer = info.model_dump(mode="json")
        assert native.task_started("job", answer) == info
        assert native.task_started("other_tool", answer) is None
        assert native.task_started("job", {**answer, "server": "elsewhere"}) is None
        assert native.task_started("job", {"error": "invalid", "detail": "x"}) is None
        assert native.task_started("job", None) is None
        await manager.cancel(info.task_id)

    asyncio.run(scenario())


def test_settings_are_checked_and_read_from_the_environment(manager, monkeypatch):
    with pytest.raises(ConfigurationError, match="at least 16 bytes"):
        NativeTasks(manager, id_secret=b"short")
    with pytest.raises(ConfigurationError, match=POLL_INTERVAL_ENV):
        NativeTasks(manager, poll_interval_ms=0)
    monkeypatch.setenv(POLL_INTERVAL_ENV, "soon")
    with pytest.raises(ConfigurationError, match="'soon'"):
        NativeTasks(manager)
    monkeypatch.setenv(POLL_INTERVAL_ENV, "2500")
    monkeypatch.setenv(SECRET_ENV, "a" * 32)
    first, second = NativeTasks(manager), NativeTasks(manager)
    assert first.poll_interval_ms == 2500
    # One secret from the environment: ids survive a new NativeTasks (a restart).
    assert first.native_id("slee-1a2b3c", "") == second.native_id("slee-1a2b3c", "")
    monkeypatch.delenv(SECRET_ENV)
    assert NativeTasks(manager).id_secret != NativeTasks(manager).id_secret


def test_extension_needs_mcp_2(manager):
    """The dev environment has mcp 1.x: asking for the extension says what is missing."""
    with pytest.raises(ImportError, match=r"needs mcp 2\.3 or later"):
        NativeTasks(manager, id_secret=SECRET).extension()
