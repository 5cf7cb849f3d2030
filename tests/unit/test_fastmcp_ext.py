"""register_task_tools through a real MCP client over in-memory streams (kit spec §3.3)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from mcp import ClientSession
from mcp.server.fastmcp import FastMCP
from mcp.shared.memory import create_connected_server_and_client_session

from robot_mcp_kit import (
    InvalidArgument,
    InvalidPayload,
    TaskContext,
    TaskError,
    TaskInfo,
    TaskManager,
    TaskManagerError,
    add_start_tool,
    register_task_tools,
)
from robot_mcp_kit.testing import RecordingPoster, free_port


@asynccontextmanager
async def connect(manager: TaskManager) -> AsyncIterator[ClientSession]:
    """A real MCP client session to a fresh FastMCP server with the task tools.

    A context manager rather than a fixture: the in-memory pair runs an anyio task group,
    which must be entered and exited in the same asyncio task (the test's own).
    """
    server = FastMCP("sleeper")
    register_task_tools(server, manager)
    async with create_connected_server_and_client_session(server) as session:
        yield session


async def call(session, tool: str, **arguments: Any) -> dict[str, Any]:
    """The tool's answer; its structured content and its one text content must agree."""
    result = await session.call_tool(tool, arguments)
    assert not result.isError, result.content
    assert len(result.content) == 1
    data = json.loads(result.content[0].text)
    assert result.structuredContent == data
    return data


async def blocked(ctx: TaskContext) -> dict[str, Any]:
    await asyncio.Event().wait()
    return {}


async def succeeds(ctx: TaskContext) -> dict[str, Any]:
    return {"slept_s": 1}


async def fails(ctx: TaskContext) -> dict[str, Any]:
    raise TaskError("FAKE_FAILURE", "The sleeper was asked to fail.")


class TestListing:
    async def test_the_three_tools_are_listed(self, manager):
        """get_task, cancel_task and list_tasks appear in list_tools()."""
        async with connect(manager) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == {"get_task", "cancel_task", "list_tasks", "get_task_events"}

    async def test_descriptions_say_status_and_cancel_not_start(self, manager):
        """Each description says it concerns long-running tasks and does not start work."""
        async with connect(manager) as client:
            for tool in (await client.list_tools()).tools:
                assert tool.description is not None
                text = " ".join(tool.description.split())
                assert "long-running task" in text
                assert "does NOT start any work" in text
                assert "already started" in text

    async def test_input_schemas(self, manager):
        """get/cancel take a required task_id string; list_tasks an optional list of states."""
        async with connect(manager) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            for name in ("get_task", "cancel_task"):
                schema = tools[name].inputSchema
                assert schema["required"] == ["task_id"]
                assert schema["properties"]["task_id"]["type"] == "string"
            schema = tools["list_tasks"].inputSchema
            assert "required" not in schema or schema["required"] == []
            states = schema["properties"]["states"]
            assert {"type": "array", "items": {"type": "string"}} in states["anyOf"]

    async def test_read_only_hints(self, manager):
        """get_task and list_tasks are marked read-only; cancel_task is not."""
        async with connect(manager) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert tools["get_task"].annotations.readOnlyHint is True
            assert tools["list_tasks"].annotations.readOnlyHint is True
            assert tools["cancel_task"].annotations.readOnlyHint is False
            assert tools["cancel_task"].annotations.idempotentHint is True


class TestGetTask:
    async def test_get_task_returns_task_info_json(self, manager):
        """get_task answers the serialized TaskInfo of a running task."""
        async with connect(manager) as client:
            info = manager.start("sleep_task", blocked, [{"type": "eta_below", "seconds": 3}])
            data = await call(client, "get_task", task_id=info.task_id)
            parsed = TaskInfo.model_validate(data)
            assert parsed.task_id == info.task_id
            assert parsed.state == "running"
            assert parsed.triggers == [{"type": "eta_below", "seconds": 3}]
            assert data["created_at"].endswith("Z")

    async def test_get_task_after_success_has_the_result(self, manager, poster):
        """A finished task stays queryable with its result."""
        async with connect(manager) as client:
            info = manager.start("sleep_task", succeeds)
            await poster.wait_for(info.task_id, "task_done")
            data = await call(client, "get_task", task_id=info.task_id)
            assert data["state"] == "succeeded"
            assert data["result"] == {"slept_s": 1}

    async def test_get_task_after_failure_has_the_failure(self, manager, poster):
        """A failed task reports its structured failure."""
        async with connect(manager) as client:
            info = manager.start("sleep_task", fails)
            await poster.wait_for(info.task_id, "task_failed")
            data = await call(client, "get_task", task_id=info.task_id)
            assert data["state"] == "failed"
            assert data["failure"]["error_code"] == "FAKE_FAILURE"

    async def test_get_task_unknown_is_not_found(self, manager):
        """An unknown id answers {"error": "not_found", "detail": ...}."""
        async with connect(manager) as client:
            data = await call(client, "get_task", task_id="slee-000000")
            assert data["error"] == "not_found"
            assert "slee-000000" in data["detail"]


class TestCancelTask:
    async def test_cancel_task_cancels_and_is_idempotent(self, manager, poster):
        """cancel_task answers the TaskInfo with state cancelled, twice; no task_failed."""
        async with connect(manager) as client:
            info = manager.start("sleep_task", blocked)
            first = await call(client, "cancel_task", task_id=info.task_id)
            second = await call(client, "cancel_task", task_id=info.task_id)
            assert first == second
            assert (first["task_id"], first["state"]) == (info.task_id, "cancelled")
            assert first == manager.get(info.task_id).model_dump(mode="json")  # type: ignore[union-attr]
            data = await call(client, "get_task", task_id=info.task_id)
            assert data["state"] == "cancelled"
            assert poster.types_for(info.task_id) == []

    @pytest.mark.parametrize(
        ("body", "event", "state"),
        [(succeeds, "task_done", "succeeded"), (fails, "task_failed", "failed")],
    )
    async def test_cancel_task_of_a_finished_task_returns_its_terminal_state(
        self, manager, poster, body, event, state
    ):
        """Cancelling a finished task changes nothing and answers its terminal state."""
        async with connect(manager) as client:
            info = manager.start("sleep_task", body)
            await poster.wait_for(info.task_id, event)
            data = await call(client, "cancel_task", task_id=info.task_id)
            assert (data["task_id"], data["state"]) == (info.task_id, state)
            assert manager.get(info.task_id).state == state  # type: ignore[union-attr]

    async def test_cancel_task_unknown_is_not_found(self, manager):
        """An unknown id answers not_found."""
        async with connect(manager) as client:
            data = await call(client, "cancel_task", task_id="nope")
            assert data["error"] == "not_found"


class TestListTasks:
    async def test_list_tasks_all_and_filtered(self, manager, poster):
        """list_tasks returns {"tasks": [...]}; states=["running"] keeps only running ones."""
        async with connect(manager) as client:
            done = manager.start("sleep_task", succeeds)
            await poster.wait_for(done.task_id, "task_done")
            running = manager.start("sleep_task", blocked)

            everything = await call(client, "list_tasks")
            assert [t["task_id"] for t in everything["tasks"]] == [done.task_id, running.task_id]
            for item in everything["tasks"]:
                TaskInfo.model_validate(item)

            only_running = await call(client, "list_tasks", states=["running"])
            assert [t["task_id"] for t in only_running["tasks"]] == [running.task_id]

            finished = await call(client, "list_tasks", states=["succeeded", "cancelled"])
            assert [t["task_id"] for t in finished["tasks"]] == [done.task_id]

    async def test_list_tasks_empty(self, manager):
        """With no tasks, list_tasks answers an empty list."""
        async with connect(manager) as client:
            assert await call(client, "list_tasks") == {"tasks": []}

    async def test_list_tasks_invalid_state_is_invalid(self, manager):
        """An unknown state answers {"error": "invalid"} naming it."""
        async with connect(manager) as client:
            data = await call(client, "list_tasks", states=["running", "done"])
            assert data["error"] == "invalid"
            assert "'done'" in data["detail"]


class TestStructuredOutput:
    """Issue 12: objects with an object output schema, never a JSON string in a string."""

    @pytest.mark.parametrize("name", ["get_task", "cancel_task", "list_tasks"])
    async def test_output_schema_is_an_object_describing_the_answer(self, manager, name):
        """Each tool declares {"type": "object", "anyOf": [answer, error]}, no "result" wrapper."""
        async with connect(manager) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            schema = tools[name].outputSchema
            assert schema is not None
            assert schema["type"] == "object"
            answer, error = schema["anyOf"]
            assert set(error["required"]) == {"error", "detail"}
            if name == "list_tasks":
                answer = answer["properties"]["tasks"]["items"]
            assert set(answer["properties"]) == set(TaskInfo.model_fields)
            assert "$ref" not in json.dumps(schema)

    async def test_structured_content_is_the_task_info(self, manager, poster):
        """get_task's structuredContent is the TaskInfo itself, valid against its schema."""
        import jsonschema

        async with connect(manager) as client:
            info = manager.start("sleep_task", succeeds)
            await poster.wait_for(info.task_id, "task_done")
            tools = {t.name: t for t in (await client.list_tools()).tools}
            result = await client.call_tool("get_task", {"task_id": info.task_id})
            expected = manager.get(info.task_id).model_dump(mode="json")  # type: ignore[union-attr]
            assert result.structuredContent == expected
            jsonschema.validate(result.structuredContent, tools["get_task"].outputSchema)
            listed = await client.call_tool("list_tasks", {})
            assert listed.structuredContent == {"tasks": [expected]}

    def test_an_unknown_framework_is_refused_by_name(self, manager):
        """A server of no supported framework raises TypeError naming its class."""
        with pytest.raises(TypeError, match=r"got builtins\.object"):
            register_task_tools(object(), manager)


async def test_register_task_tools_works_with_any_fastmcp_instance(poster):
    """Two servers can each get the tools from the same kind of manager."""
    for name in ("a", "b"):
        server = FastMCP(name)
        register_task_tools(server, TaskManager(name, poster))
        assert {t.name for t in await server.list_tools()} == {
            "get_task",
            "cancel_task",
            "list_tasks",
            "get_task_events",
        }


class TestStartErrorsReachTheClient:
    """TaskManager.start's errors are the loaded frameworks' ToolError too (issue 19).

    mcp 2.x shows the client a failure's text only for its own ToolError; the check per
    framework (tests/frameworks/check_framework.py) proves it there, this on mcp 1.x.
    """

    async def test_start_from_a_worker_thread_raises_a_tool_error_naming_the_fix(self, manager):
        """From a thread with no loop (where mcp 2.x runs a plain def tool), start() raises
        a TaskManagerError that is also mcp's ToolError, saying what to do."""
        from mcp.server.fastmcp.exceptions import ToolError

        with pytest.raises(TaskManagerError) as info:
            await asyncio.to_thread(manager.start, "sync_start", succeeds)
        assert isinstance(info.value, ToolError)
        assert isinstance(info.value, RuntimeError)
        assert "must run on the server's asyncio event loop" in str(info.value)
        assert "async def" in str(info.value)
        assert "add_start_tool()" in str(info.value)
        assert manager.list() == []

    async def test_a_refused_trigger_keeps_its_attributes_as_a_tool_error(self, manager):
        """An InvalidPayload from start() is a ToolError with its path and reason intact."""
        from mcp.server.fastmcp.exceptions import ToolError

        with pytest.raises(InvalidPayload) as info:
            manager.start("t", succeeds, triggers=[{"type": "x", "at": b"\x00"}])
        assert isinstance(info.value, ToolError)
        assert (info.value.what, info.value.path) == ("trigger 0", "payload['at']")
        assert str(info.value).startswith("The trigger 0 cannot be sent as JSON: payload['at']")
        assert info.value.__traceback__ is not None

    async def test_a_closed_manager_is_reported_to_the_client_by_the_start_tool(self, poster):
        """A start tool that lets ManagerClosed escape answers isError with its message."""
        manager = TaskManager("sleeper", poster)
        await manager.aclose()
        server = FastMCP("sleeper")

        @server.tool()
        def sync_start() -> TaskInfo:
            return manager.start("sync_start", succeeds)

        async with create_connected_server_and_client_session(server) as client:
            result = await client.call_tool("sync_start", {})
        assert result.isError
        text = result.content[0].text  # type: ignore[union-attr]
        assert "TaskManager for 'sleeper' is closed; no task can be started." in text


class TestAddStartTool:
    """add_start_tool answers an InvalidArgument as {"error": "invalid"} (issue 32, finding 5)."""

    @staticmethod
    def server_with(manager: TaskManager) -> FastMCP:
        server = FastMCP("navigation")

        async def go(speed: float, triggers: list[dict[str, Any]] | None = None) -> TaskInfo:
            """Start going."""
            if not speed > 0:
                raise InvalidArgument(f"speed must be > 0, got {speed!r}.")
            return manager.start("go", succeeds, triggers=triggers)

        def go_sync(kind: str) -> TaskInfo:
            if kind == "bad":
                raise InvalidArgument("kind must not be 'bad'.")
            raise RuntimeError("a bug, not a refusal")

        add_start_tool(server, go)
        add_start_tool(server, go_sync)
        return server

    @pytest.mark.parametrize(
        ("arguments", "detail"),
        [
            ({"speed": -1}, "speed must be > 0, got -1.0."),
            (
                {"speed": 1, "triggers": [{"type": "progress_above"}]},
                'trigger 0 (progress_above): "percent" is missing; it must be a finite number '
                ">= 0 and <= 100.",
            ),
            (
                {"speed": 1, "triggers": [{"type": "progress_above", "percent": 5, "repeat": 1}]},
                'trigger 0 (progress_above): "repeat" must be true or false, got 1 (an integer).',
            ),
        ],
    )
    async def test_an_invalid_argument_answers_invalid_and_starts_nothing(
        self, manager, arguments, detail
    ):
        """The tool's own InvalidArgument, and start()'s InvalidTrigger."""
        async with create_connected_server_and_client_session(self.server_with(manager)) as c:
            answer = await call(c, "go", **arguments)
        assert answer == {"error": "invalid", "detail": detail}
        assert manager.list() == []

    async def test_a_sync_tool_refuses_the_same_way_and_a_bug_stays_an_error(self, manager):
        """A plain def tool's InvalidArgument is invalid too; any other exception is not."""
        async with create_connected_server_and_client_session(self.server_with(manager)) as c:
            refused = await call(c, "go_sync", kind="bad")
            bug = await c.call_tool("go_sync", {"kind": "good"})
        assert refused == {"error": "invalid", "detail": "kind must not be 'bad'."}
        assert bug.isError

    async def test_the_tool_keeps_its_name_description_and_parameters(self, manager):
        async with create_connected_server_and_client_session(self.server_with(manager)) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
        assert tools["go"].description == "Start going."
        assert set(tools["go"].inputSchema["properties"]) == {"speed", "triggers"}
        assert tools["go"].inputSchema["required"] == ["speed"]


class StartRecorder(RecordingPoster):
    """A recording poster that counts its starts."""

    def __init__(self) -> None:
        super().__init__()
        self.starts = 0
        self.started = asyncio.Event()

    async def start(self) -> None:
        self.starts += 1
        self.started.set()


class TestPosterStartsWithTheServer:
    """Issue 32, finding 6: the poster starts when the server starts serving, and at the
    latest at the first task tool call, with no TaskRuntime around it."""

    async def test_serving_starts_the_poster_before_any_call(self):
        """run_sse_async (what FastMCP.run("sse") serves through) starts the manager's
        poster before anyone connects."""
        poster = StartRecorder()
        manager = TaskManager("sleeper", poster)
        server = FastMCP("sleeper", host="127.0.0.1", port=free_port())
        register_task_tools(server, manager)
        for name in ("run_stdio_async", "run_sse_async", "run_streamable_http_async"):
            assert name in vars(server), f"{name} is not wrapped on the instance"
        serving = asyncio.create_task(server.run_sse_async())
        try:
            await asyncio.wait_for(poster.started.wait(), timeout=10)
        finally:
            serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await serving
            await manager.aclose()
        assert poster.starts == 1

    async def test_a_task_tool_call_starts_the_poster(self):
        """Served some other way (the in-memory pair here), the first tool call starts it."""
        poster = StartRecorder()
        manager = TaskManager("sleeper", poster)
        try:
            async with connect(manager) as session:
                assert poster.starts == 0
                await call(session, "list_tasks")
                assert poster.starts == 1
        finally:
            await manager.aclose()

    async def test_a_hook_that_raises_is_logged_and_serving_goes_on(self, capture_logs):
        """before_serving: hooks run in order before the method; a failure is logged."""
        from robot_mcp_kit._frameworks import before_serving

        seen: list[str] = []

        class Server:
            async def run_sse_async(self, port: int) -> str:
                seen.append(f"serving on {port}")
                return "done"

        async def first() -> None:
            seen.append("first")
            raise RuntimeError("hook broke")

        async def second() -> None:
            seen.append("second")

        server = Server()
        before_serving(server, first)
        before_serving(server, second)
        with capture_logs() as logs:
            assert await server.run_sse_async(9100) == "done"
        assert seen == ["first", "second", "serving on 9100"]
        assert [e["event"] for e in logs] == ["before_serving_failed"]
