"""The tools the official MCP conformance suite's tasks scenarios call, on robot-mcp-kit.

One file, written as an author would, with the kit's public API and mcp 2.x (>= 2.3)::

    pip install robot-mcp-kit 'mcp>=2.3,<3'
    MCP_TRANSPORT=streamable-http MCP_PORT=9300 python tasks_fixture.py

Every long tool is an ordinary kit start tool (``manager.start`` → ``TaskInfo``), so a host
that speaks the MCP tasks extension gets a native task (``NativeTasks``) while the brain
gets the same task's signed events (``RVC_CALLBACK_URL`` / ``RVC_EVENT_SECRET``) and
``get_task`` / ``cancel_task`` / ``list_tasks`` / ``answer_task_input``.

- ``greet(name)``: a plain tool, ``Hello, {name}!``.
- ``slow_compute(seconds, label)``: a task that sleeps ``seconds`` (0: at once), reporting
  progress; cancelled while it runs, it ends ``cancelled``.
- ``failing_job()``: a task that fails with a tool error after about a second; it needs
  the tasks extension (a caller without it gets -32021).
- ``protocol_error_job()``: a task whose body raises unexpectedly (a protocol-level
  ``failed``).
- ``confirm_delete(filename)``: a task that asks the caller to confirm, then answers.
- ``multi_input()``: a task that asks two questions at once.
- ``test_tool_with_task()``: asks for ``user_name`` first (an ``InputRequiredResult``, the
  2026-07-28 multi-round trip), then greets that name in a task; needs the extension.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import InputRequiredResult

from robot_mcp_kit import (
    NativeTasks,
    TaskContext,
    TaskError,
    TaskInfo,
    TaskRuntime,
    register_task_tools,
    serve,
)

runtime = TaskRuntime("tasks-fixture")
manager = runtime.manager
native = NativeTasks(manager, required_tools=["failing_job", "test_tool_with_task"])
mcp = MCPServer("tasks-fixture", extensions=[native.extension()])
register_task_tools(mcp, manager, inputs=True)

_CONFIRM = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "description": "Go ahead?"}},
    "required": ["confirm"],
}
_NAME = {
    "type": "object",
    "properties": {"name": {"type": "string", "description": "Your name"}},
    "required": ["name"],
}


@mcp.tool()
def greet(name: str) -> str:
    """Say hello to `name` (answers at once, no task)."""
    return f"Hello, {name}!"


@mcp.tool()
async def slow_compute(seconds: float = 1.0, label: str = "") -> TaskInfo:
    """Compute for `seconds` seconds (0: at once) as a task; returns the task at once."""
    if not 0 <= seconds <= 3600:
        raise ValueError(f"seconds must be from 0 to 3600, got {seconds!r}")

    async def body(ctx: TaskContext) -> dict[str, Any]:
        ticks = max(1, round(seconds * 5))
        for tick in range(1, ticks + 1):
            await asyncio.sleep(seconds / ticks)
            await ctx.progress({"percent": round(100 * tick / ticks, 1), "label": label})
        return {"label": label, "seconds": seconds, "answer": 42}

    return manager.start("slow_compute", body, est_duration_s=seconds)


@mcp.tool()
async def failing_job() -> TaskInfo:
    """A task that fails with a tool error after about a second."""

    async def body(ctx: TaskContext) -> dict[str, Any]:
        await asyncio.sleep(1.0)
        raise TaskError("JOB_FAILED", "The job failed, as it always does.", recoverable=False)

    return manager.start("failing_job", body)


@mcp.tool()
async def protocol_error_job() -> TaskInfo:
    """A task whose body crashes (an unexpected exception: a protocol-level failure)."""

    async def body(ctx: TaskContext) -> dict[str, Any]:
        await asyncio.sleep(0.2)
        raise RuntimeError("the job's worker crashed")

    return manager.start("protocol_error_job", body)


@mcp.tool()
async def confirm_delete(filename: str) -> TaskInfo:
    """Delete `filename` once the caller confirms (a task that asks for input)."""

    async def body(ctx: TaskContext) -> dict[str, Any]:
        answer = await ctx.request_input(f"Delete {filename}?", schema=_CONFIRM)
        confirmed = answer.action == "accept" and answer.content.get("confirm") is True
        return {"filename": filename, "deleted": confirmed}

    return manager.start("confirm_delete", body)


@mcp.tool()
async def multi_input() -> TaskInfo:
    """Ask two questions at once, then answer with both replies (a task)."""

    async def body(ctx: TaskContext) -> dict[str, Any]:
        name, confirm = await asyncio.gather(
            ctx.request_input("What is your name?", schema=_NAME),
            ctx.request_input("Shall I go on?", schema=_CONFIRM),
        )
        return {"name": name.content.get("name"), "confirm": confirm.content.get("confirm")}

    return manager.start("multi_input", body)


@mcp.tool()
async def test_tool_with_task(ctx: Context) -> Any:
    """Ask for your name (a multi-round trip), then greet you in a task."""
    answer = (ctx.input_responses or {}).get("user_name")
    content = getattr(answer, "content", None)
    if not isinstance(content, dict) or not content.get("name"):
        return InputRequiredResult(
            input_requests={
                "user_name": {
                    "method": "elicitation/create",
                    "params": {"mode": "form", "message": "Your name?", "requestedSchema": _NAME},
                }
            }
        )
    name = str(content["name"])

    async def body(task: TaskContext) -> dict[str, Any]:
        await asyncio.sleep(0.2)
        return {"greeting": f"Hello, {name}!"}

    return manager.start("test_tool_with_task", body)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    serve(mcp, runtime, default_transport="streamable-http", default_port=9300)
