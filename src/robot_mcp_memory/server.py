"""The ``memory`` MCP server: its twenty tools (DESIGN §5, decision 0027) over one store.

:func:`build_server` makes a fresh ``FastMCP("memory")`` per call (nothing happens at
import): the server's instructions, a lifespan holding the services
(:class:`~robot_mcp_memory.services.StoreHolder`), the Host/Origin check of the HTTP
transports (:func:`transport_security`) and the tools of :mod:`robot_mcp_memory.tools`,
all run by one :class:`~robot_mcp_memory.tools.ToolRunner`.

Who a call acts as is the tenant of the HTTP request that carried it
(:class:`~robot_mcp_memory.tenant.TenantOfCall`), never what a session remembers;
stdio and in-process calls are unscoped. A scoped connection's ``tools/list`` leaves out
the admin tools (:data:`~robot_mcp_memory.tools.ADMIN_TOOLS`), which it could only call to
be told ``forbidden``. Each robot token's calls run within its share
(per lane of its :class:`~robot_mcp_memory.shares.CallShares`: ``MEMORY_ROBOT_MAX_CALLS``
at once, ``MEMORY_ROBOT_MAX_QUEUED`` waiting, ``MEMORY_ROBOT_TIME_SHARE`` of the time), and
the answers that grow with the store are bounded by ``MEMORY_MAX_ANSWER_BYTES``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio.to_thread
from mcp.server.fastmcp import FastMCP
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import ListToolsRequest, ListToolsResult

from robot_mcp_kit.fastmcp_ext import set_server_version, trace_tool_calls
from robot_mcp_memory._limits import ROBOT_BURST_S
from robot_mcp_memory.services import StoreHolder
from robot_mcp_memory.settings import Settings
from robot_mcp_memory.shares import CallShares
from robot_mcp_memory.tenant import TenantOfCall
from robot_mcp_memory.tools import (
    ADMIN_TOOLS,
    ToolRunner,
    fleet,
    lessons,
    processes,
)

__all__ = ["INSTRUCTIONS", "build_server", "transport_security"]

INSTRUCTIONS = """\
Process memory of the robot fleet. A process is a markdown document distilled from a past \
mission: steps that worked, pitfalls and their fixes, operator notes. Treat a process as \
ADVICE from past executions, not as a script: when reality disagrees with it (a door is \
closed, an object is elsewhere), deviate and do what the situation needs. The system calls \
find_processes automatically at the start of every mission and puts the matches in your \
context; call it yourself only for a sub-task mid-mission. The same server holds the fleet \
registry (robots, groups, self-improve toggles) and the robots' learned parameters \
(recall_params before a skill, record_params after it). Each robot has a fair share of \
the server: a call beyond it answers {"error": "busy", "retry_after_s": n}; wait that \
long, then retry."""

_LOOPBACK_HOSTS = ("127.0.0.1:*", "localhost:*", "[::1]:*")


def transport_security(settings: Settings) -> TransportSecuritySettings | None:
    """The Host/Origin (DNS-rebinding) check for the HTTP transports.

    With ``MEMORY_ALLOWED_HOSTS`` unset this is None: FastMCP's own default, which checks
    for a loopback bind and checks nothing for ``0.0.0.0`` (where the token is the guard).
    With it set, only those Host values (plus loopback, for local health checks and tools)
    and the matching http/https origins are accepted, whatever the bind address.
    """
    hosts = settings.allowed_host_list
    if not hosts:
        return None
    allowed = [*hosts, *_LOOPBACK_HOSTS]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=allowed,
        allowed_origins=[f"{scheme}://{host}" for host in allowed for scheme in ("http", "https")],
    )


def build_server(settings: Settings, *, holder: StoreHolder | None = None) -> FastMCP:
    """A fresh ``FastMCP("memory")`` with the 20 tools.

    Args:
        settings: validated settings; ``host``/``port`` feed FastMCP's transport settings,
            which also switches on its DNS-rebinding (Host/Origin) protection for loopback.
        holder: the services the tools use; by default a holder for ``settings``. Pass the
            holder the entry point already opened so the server and /healthz share it.
    """
    holder = holder if holder is not None else StoreHolder.for_settings(settings)

    @asynccontextmanager
    async def lifespan(_: FastMCP) -> AsyncIterator[None]:
        holder.acquire()
        try:
            yield None
        finally:
            await anyio.to_thread.run_sync(holder.release)

    mcp = FastMCP(
        "memory",
        instructions=INSTRUCTIONS,
        host=settings.host,
        port=settings.port,
        lifespan=lifespan,
        transport_security=transport_security(settings),
    )

    tenant_of_call = TenantOfCall(mcp)

    runner = ToolRunner(
        holder,
        tenant_of_call,
        scheduler=CallShares(
            settings.robot_max_calls,
            settings.robot_max_queued,
            time_share=settings.robot_time_share if settings.robot_time_share < 1 else None,
            burst_s=ROBOT_BURST_S,
        ),
        max_answer_bytes=settings.max_answer_bytes,
        trace_query_chars=settings.trace_query_chars,
    )
    processes.register(mcp, runner)
    fleet.register(mcp, runner)
    lessons.register(mcp, runner)

    async def list_tools_for_caller(request: ListToolsRequest) -> ListToolsResult:
        # The result-object form: the SDK adds these to its tool cache instead of replacing
        # the cache, so a scoped listing never hides a tool from the admin's validation.
        tools = await mcp.list_tools()
        tenant = tenant_of_call()
        if tenant is not None and tenant.scoped:
            tools = [tool for tool in tools if tool.name not in ADMIN_TOOLS]
        return ListToolsResult(tools=tools)

    mcp._mcp_server.list_tools()(list_tools_for_caller)  # type: ignore[no-untyped-call]
    set_server_version(mcp)  # serverInfo.version: this package's, not the mcp SDK's
    trace_tool_calls(mcp)  # a SERVER span per tool call while telemetry is on
    return mcp
