"""A sleeper-like capability server with seams for one deliberate defect each.

The conformance meta-test (``tests/integration/test_conformance_catches_broken_servers.py``)
starts each script of this folder as a real SSE server through ``--server-cmd`` and checks
that the conformance suite fails exactly the tests that the script's defect breaks.
``control.py`` is this server unmodified; it must pass everything.

The server reads ``MCP_PORT``, ``MCP_TRANSPORT`` (``sse`` or ``streamable-http``),
``RVC_CALLBACK_URL`` and ``RVC_EVENT_SECRET`` like the sleeper, and with
``BROKEN_SERVER_TOKENS`` (``token:client,token:client``) requires a bearer token, each
token its own client (principal), so the task-ownership clause (§13) can be judged with
the suite's ``--bearer-token`` / ``--other-bearer-token``. It is built on mcp 2.x
``MCPServer`` where mcp 2.x is installed, else on mcp 1.x ``FastMCP`` (the wheel test runs
one in a fresh environment, whatever mcp it resolved). It is deliberately independent of
``examples/sleeper.py``, so a change to the example cannot change what the meta-test
proves.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Callable
from typing import Any

try:  # mcp 2.x
    from mcp.server.mcpserver import MCPServer as FastMCP

    MCP2 = True
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP  # type: ignore[no-redef]

    MCP2 = False

from robot_mcp_kit import (
    EventPoster,
    NativeTasks,
    TaskContext,
    TaskError,
    TaskManager,
    register_task_tools,
)
from robot_mcp_kit.models import TaskEvent

NAME = "sleeper"
TOKENS_ENV = "BROKEN_SERVER_TOKENS"
CONFIRM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean"}},
    "required": ["confirm"],
}


class Relay:
    """The event sink between the manager and the poster; remembers each task's last seq.

    Defects subclass it to alter what is sent (``send``), or use ``last_seq`` to post
    events of their own.
    """

    def __init__(self, poster: EventPoster) -> None:
        self.poster = poster
        self.last_seq: dict[str, int] = {}

    async def post(self, event: TaskEvent) -> None:
        await self.send(event)

    async def send(self, event: TaskEvent) -> None:
        self.last_seq[event.task_id] = max(event.seq, self.last_seq.get(event.task_id, 0))
        await self.poster.post(event)


class StaticTokens:
    """A token verifier: each known token is its own client (``BROKEN_SERVER_TOKENS``)."""

    def __init__(self, clients: dict[str, str]) -> None:
        self.clients = clients

    async def verify_token(self, token: str) -> Any:
        from mcp.server.auth.provider import AccessToken

        client = self.clients.get(token)
        return None if client is None else AccessToken(token=token, client_id=client, scopes=[])


def auth_options() -> dict[str, Any]:
    """The server's bearer authentication from ``BROKEN_SERVER_TOKENS``; none when unset."""
    spec = os.environ.get(TOKENS_ENV, "").strip()
    if not spec:
        return {}
    from mcp.server.auth.settings import AuthSettings

    clients = dict(pair.split(":", 1) for pair in spec.split(","))
    return {
        "token_verifier": StaticTokens(clients),
        "auth": AuthSettings(issuer_url="http://127.0.0.1", resource_server_url=None),
    }


def build(
    *,
    poster: EventPoster | None = None,
    relay: Callable[[EventPoster], Relay] = Relay,
    manager_cls: type[TaskManager] = TaskManager,
    inputs: bool = True,
    native: Callable[[TaskManager], Any] | None = None,
) -> tuple[FastMCP[Any], TaskManager, EventPoster]:
    """Build the server: ``sleep_task`` plus the kit's reconciliation tools (and
    ``answer_task_input`` unless ``inputs=False``); on mcp 2.x the MCP tasks extension too,
    built by ``native`` (default ``NativeTasks``) over the manager."""
    poster = poster if poster is not None else EventPoster(NAME)
    manager = manager_cls(NAME, relay(poster), known_trigger_types=("progress_above",))
    if MCP2:
        face = (native or NativeTasks)(manager)
        mcp: Any = FastMCP(NAME, extensions=[face.extension()], **auth_options())
    else:
        mcp = FastMCP(NAME, host="127.0.0.1", port=int(os.environ["MCP_PORT"]), **auth_options())
    register_task_tools(mcp, manager, inputs=inputs)

    @mcp.tool()
    async def sleep_task(
        duration_s: float,
        fail: bool = False,
        triggers: list[dict[str, Any]] | None = None,
        tick_s: float = 1.0,
        confirm: bool = False,
    ) -> str:
        """Start a fake long-running task that sleeps for duration_s; returns its task_id.

        With confirm, the task first asks the caller to confirm (contract §11)."""

        async def body(ctx: TaskContext) -> dict[str, Any]:
            if confirm:
                answer = await ctx.request_input("Sleep?", schema=CONFIRM_SCHEMA)
                if answer.action != "accept":
                    raise TaskError("NOT_CONFIRMED", "The sleep was not confirmed.")
            ticks = max(1, math.ceil(duration_s / tick_s - 1e-9))
            for tick in range(1, ticks + 1):
                await asyncio.sleep(tick_s)
                await ctx.progress({"percent": round(100 * tick / ticks, 2)})
            if fail:
                raise TaskError("FAKE_FAILURE", "The sleeper was asked to fail.")
            return {"slept_s": duration_s}

        info = manager.start("sleep_task", body, triggers=triggers, est_duration_s=duration_s)
        return info.model_dump_json()

    return mcp, manager, poster


def serve(mcp: FastMCP[Any], manager: TaskManager, poster: EventPoster) -> None:
    """Run ``mcp`` over ``MCP_TRANSPORT`` until interrupted, then close manager and poster."""
    streamable = os.environ.get("MCP_TRANSPORT", "sse") == "streamable-http"
    where: dict[str, Any] = (
        {"host": "127.0.0.1", "port": int(os.environ["MCP_PORT"])} if MCP2 else {}
    )

    async def main() -> None:
        try:
            if streamable:
                await mcp.run_streamable_http_async(**where)
            else:
                await mcp.run_sse_async(**where)
        finally:
            await manager.aclose()
            await poster.aclose()

    asyncio.run(main())
