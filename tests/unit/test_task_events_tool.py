"""get_task_events (issue 14, gap repair) through a real MCP client over in-memory streams."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp import ClientSession
from mcp.server.fastmcp import FastMCP
from mcp.shared.memory import create_connected_server_and_client_session

from robot_mcp_kit import TaskContext, TaskManager, register_task_tools
from robot_mcp_kit.models import TaskEvent, TaskEventPage


@asynccontextmanager
async def connect(manager: TaskManager, **options: Any) -> AsyncIterator[ClientSession]:
    server = FastMCP("sleeper")
    register_task_tools(server, manager, **options)
    async with create_connected_server_and_client_session(server) as session:
        yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert not result.isError, result.content
    data: dict[str, Any] = json.loads(result.content[0].text)  # type: ignore[union-attr]
    assert result.structuredContent == data
    return data


async def ticks(ctx: TaskContext) -> dict[str, Any]:
    for i in range(1, 8):
        await ctx.progress({"percent": i * 10})
    return {"done": True}


async def test_a_receiver_that_saw_4_then_7_fetches_5_and_6(manager, poster):
    """after_seq=4 answers the posted events 5, 6, 7, ... byte for byte, oldest first."""
    info = manager.start("sleep_task", ticks)
    await poster.wait_for(info.task_id, "task_done")
    async with connect(manager) as session:
        page = TaskEventPage.model_validate(
            await call(session, "get_task_events", task_id=info.task_id, after_seq=4)
        )
    posted = poster.events_for(info.task_id)
    assert [e.seq for e in page.events] == [5, 6, 7, 8]
    # As posted on the wire (the wire's ts has millisecond precision).
    assert [e.model_dump_json() for e in page.events] == [
        e.model_dump_json() for e in posted if e.seq > 4
    ]
    assert (page.last_seq, page.first_retained_seq, page.more) == (8, 1, False)


async def test_after_seq_defaults_to_all_and_unknown_is_not_found(manager, poster):
    """No after_seq: every retained event; an unknown id: not_found."""
    info = manager.start("sleep_task", ticks)
    await poster.wait_for(info.task_id, "task_done")
    async with connect(manager) as session:
        everything = await call(session, "get_task_events", task_id=info.task_id)
        missing = await call(session, "get_task_events", task_id="slee-000000")
        tools = {t.name: t for t in (await session.list_tools()).tools}
    assert [TaskEvent.model_validate(e).seq for e in everything["events"]] == list(range(1, 9))
    assert missing["error"] == "not_found"
    schema = tools["get_task_events"].inputSchema
    assert schema["required"] == ["task_id"]
    assert schema["properties"]["after_seq"]["minimum"] == 0


async def test_events_false_leaves_the_tool_out(manager):
    """register_task_tools(..., events=False) registers only the contract's three tools."""
    async with connect(manager, events=False) as session:
        names = {t.name for t in (await session.list_tools()).tools}
    assert names == {"get_task", "cancel_task", "list_tasks"}


async def test_a_long_task_is_answered_in_pages(poster):
    """More than 200 retained events: two calls, the second after the first's last seq."""
    manager = TaskManager("sleeper", poster, max_events_per_task=300)

    async def many(ctx: TaskContext) -> dict[str, Any]:
        for i in range(250):
            await ctx.progress({"i": i})
        return {}

    info = manager.start("sleep_task", many)
    await poster.wait_for(info.task_id, "task_done")
    async with connect(manager) as session:
        first = await call(session, "get_task_events", task_id=info.task_id)
        last_seq = first["events"][-1]["seq"]
        second = await call(session, "get_task_events", task_id=info.task_id, after_seq=last_seq)
    assert (len(first["events"]), first["more"]) == (200, True)
    assert [e["seq"] for e in second["events"]] == list(range(201, 252))
    assert second["more"] is False
    await manager.aclose()
    await asyncio.sleep(0)
