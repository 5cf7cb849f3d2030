"""A kit server on mcp 2.x with bearer authentication and both task faces.

Run by ``test_task_ownership_http.py`` in an environment holding only the kit's wheel and
mcp 2.x, as an author would write it: ``TaskRuntime`` (the client ``brain`` a task admin),
``NativeTasks`` and ``register_task_tools(..., inputs=True)`` over the one manager, a
static token verifier (``alice-token``, ``bob-token``, ``brain-token``, each its own
client), one start tool, ``serve()`` on ``MCP_TRANSPORT`` / ``MCP_PORT``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer

from robot_mcp_kit import (
    NativeTasks,
    TaskContext,
    TaskError,
    TaskInfo,
    TaskRuntime,
    register_task_tools,
    serve,
)

CLIENTS = {"alice-token": "alice", "bob-token": "bob", "brain-token": "brain"}
CONFIRM = {"type": "object", "properties": {"confirm": {"type": "boolean"}}}


class StaticTokens:
    """Each known token is its own client (a TokenVerifier)."""

    async def verify_token(self, token: str) -> AccessToken | None:
        client = CLIENTS.get(token)
        return None if client is None else AccessToken(token=token, client_id=client, scopes=[])


runtime = TaskRuntime("owned", task_admins=["brain"])
native = NativeTasks(runtime.manager)
mcp = MCPServer(
    "owned",
    extensions=[native.extension()],
    token_verifier=StaticTokens(),
    auth=AuthSettings(issuer_url="http://127.0.0.1", resource_server_url=None),
)
register_task_tools(mcp, runtime.manager, inputs=True)


@mcp.tool()
async def sleep_task(duration_s: float, confirm: bool = False) -> TaskInfo:
    """Sleep for duration_s as a task; with confirm, first ask the caller."""

    async def body(ctx: TaskContext) -> dict[str, Any]:
        if confirm:
            answer = await ctx.request_input("Sleep?", schema=CONFIRM)
            if answer.action != "accept":
                raise TaskError("NOT_CONFIRMED", "The sleep was not confirmed.")
        await asyncio.sleep(duration_s)
        return {"slept_s": duration_s}

    return runtime.manager.start("sleep_task", body, est_duration_s=duration_s)


if __name__ == "__main__":
    serve(mcp, runtime)
