"""A navigation capability server on robot-mcp-kit, complete: save it as navigation.py.

RVC_CALLBACK_URL=http://127.0.0.1:8765/api/agent/events RVC_EVENT_SECRET=s3cret \
MCP_TRANSPORT=streamable-http MCP_PORT=9200 python navigation.py
"""

import asyncio
import logging
from typing import Any

try:  # the kit serves all three frameworks the same way: keep the one you use
    from fastmcp import FastMCP as MCPServer  # standalone FastMCP
except ImportError:
    try:
        from mcp.server.mcpserver import MCPServer  # mcp 2.x
    except ImportError:
        from mcp.server.fastmcp import FastMCP as MCPServer  # mcp 1.x

from robot_mcp_kit import (
    InvalidArgument,
    RobotMcpKitError,
    TaskContext,
    TaskError,
    TaskInfo,
    TaskRuntime,
    add_start_tool,
    register_task_tools,
    serve,
)

mcp = MCPServer("navigation")
try:  # an EventPoster (RVC_CALLBACK_URL, RVC_EVENT_SECRET, RVC_OUTBOX), then a TaskManager
    runtime = TaskRuntime("navigation", known_trigger_types=["eta_below"])
except RobotMcpKitError as exc:  # e.g. a callback URL without RVC_EVENT_SECRET
    raise SystemExit(f"navigation: {exc}") from None  # one line, no traceback
manager = runtime.manager  # nothing runs until serve() enters the runtime
register_task_tools(mcp, manager)  # get_task / cancel_task / list_tasks / get_task_events


async def navigate_to(  # list[Any]: the kit, not the framework, judges each trigger
    place: str, speed: float = 1.0, triggers: list[Any] | None = None
) -> TaskInfo:
    """Start driving to `place` (speed 1.0 is real time); returns the task at once.

    Progress reports {"eta_s", "percent"}. Trigger: {"type": "eta_below", "seconds": N}.
    """
    if not speed > 0:  # the planner reads {"error": "invalid", "detail": "speed must ..."}
        raise InvalidArgument(f"speed must be a number > 0, got {speed!r}.")

    async def body(ctx: TaskContext) -> dict[str, Any]:
        if place == "nowhere":
            raise TaskError(
                "NO_ROUTE", "There is no route to nowhere.", suggestions=["ask_operator"]
            )
        for step, eta in enumerate((15, 10, 5, 0), start=1):
            ctx.raise_if_cancelled()
            await asyncio.sleep(1 / speed)  # your robot work here
            await ctx.progress({"eta_s": eta, "percent": 25 * step})  # fires progress_above
            for t in ctx.triggers:  # the kit checked each eta_below's "seconds" at the start
                if t["type"] == "eta_below" and eta < t["seconds"]:
                    await ctx.fire_trigger(t, {"eta_s": eta})  # at most once unless "repeat"
        return {"arrived": place}  # -> task_done {"result": {"arrived": ...}}

    # A malformed trigger ({"type": "eta_below"} without "seconds") starts nothing: invalid.
    return manager.start("navigate_to", body, triggers=triggers)


add_start_tool(mcp, navigate_to)  # answers the TaskInfo, or {"error": "invalid", "detail": ...}

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)  # to stderr: stdout is the stdio transport's
    # MCP_TRANSPORT (stdio | sse | streamable-http), MCP_HOST, MCP_PORT from the environment;
    # starts the poster, serves; on exit cancels running tasks, then closes the poster.
    serve(mcp, runtime)
