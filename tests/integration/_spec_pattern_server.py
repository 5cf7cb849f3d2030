"""The kit spec's §5 usage example, as an author builds it from the spec: no ``TaskRuntime``.

A module-level ``EventPoster`` (configured by ``RVC_CALLBACK_URL``, ``RVC_EVENT_SECRET``
and ``RVC_OUTBOX``) and ``TaskManager``, ``register_task_tools``, one start tool, and
``mcp.run("sse")``: nothing in this file starts the poster. Run by
``test_spec_pattern_restart.py`` as a real process on ``MCP_PORT`` (mcp 1.x ``FastMCP``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from typing import Any

from mcp.server.fastmcp import FastMCP

from robot_mcp_kit import EventPoster, TaskContext, TaskManager, register_task_tools

logging.basicConfig(level=logging.INFO, stream=sys.stderr)

mcp = FastMCP("sleeper", host="127.0.0.1", port=int(os.environ["MCP_PORT"]))
poster = EventPoster(server_name="sleeper")  # env-configured
manager = TaskManager("sleeper", poster)
register_task_tools(mcp, manager)


@mcp.tool()
async def sleep_task(duration_s: float, tick_s: float = 1.0) -> str:
    """Start a fake long-running task that sleeps for duration_s; returns the task."""

    async def body(ctx: TaskContext) -> dict[str, Any]:
        ticks = max(1, round(duration_s / tick_s))
        for tick in range(1, ticks + 1):
            await asyncio.sleep(tick_s)
            await ctx.progress({"percent": round(100 * tick / ticks, 2)})
        return {"slept_s": duration_s}

    info = manager.start("sleep_task", body, est_duration_s=duration_s)
    return info.model_dump_json()


if __name__ == "__main__":
    mcp.run("sse")
