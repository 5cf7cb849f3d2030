"""One configured server as the receiver talks to it: its config, MCP tools and health.

:meth:`ServerLink.call` runs a batch of tool calls in one MCP session and books the
outcome in the server's :class:`~robot_mcp_kit.receiver._health.ServerHealth`: a session
that could not be opened, or a call that got no answer, counts as a failure (backoff); an
answer, even an error answer, means the server is reachable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from robot_mcp_kit.receiver._config import ServerConfig
from robot_mcp_kit.receiver._exceptions import ServerCallFailed
from robot_mcp_kit.receiver._health import ServerHealth
from robot_mcp_kit.receiver._stats import Counters
from robot_mcp_kit.receiver._tools import ServerTools, SessionFactory, ToolSession
from robot_mcp_kit.telemetry import span

__all__ = ["ServerLink"]

T = TypeVar("T")

_NOT_ANSWERED = frozenset({"unreachable", "timeout", "missing_extra"})
"""Failure codes that mean the server did not answer (the others are its answers)."""


class ServerLink:
    """One server: config, tools (None without an MCP URL), health. Event loop only.

    Args:
        config: the server.
        counters: where failed calls are counted.
        connect_timeout_s, call_timeout_s: the MCP client's bounds.
        max_sessions: MCP sessions open to the server at once.
        first_backoff_s, max_backoff_s: the health's pause after failures.
        session_factory: opens the MCP sessions instead of the MCP client (see
            :data:`~robot_mcp_kit.receiver._tools.SessionFactory`).
    """

    def __init__(
        self,
        config: ServerConfig,
        counters: Counters,
        *,
        connect_timeout_s: float = 10.0,
        call_timeout_s: float = 30.0,
        max_sessions: int = 4,
        first_backoff_s: float = 1.0,
        max_backoff_s: float = 60.0,
        session_factory: SessionFactory | None = None,
    ) -> None:
        self.config = config
        self.tools = (
            None
            if config.mcp_url is None and session_factory is None
            else ServerTools(
                config,
                connect_timeout_s=connect_timeout_s,
                call_timeout_s=call_timeout_s,
                session_factory=session_factory,
            )
        )
        self.health = ServerHealth(
            config.name, first_backoff_s=first_backoff_s, max_backoff_s=max_backoff_s
        )
        self.events_tool = True
        """False once the server answered that it has no ``get_task_events``."""
        self._counters = counters
        self._sessions = asyncio.Semaphore(max_sessions)

    def __repr__(self) -> str:
        return f"<ServerLink {self.config.name} {self.health!r}>"

    @property
    def name(self) -> str:
        """The server's name."""
        return self.config.name

    async def call(self, what: str, work: Callable[[ToolSession], Awaitable[T]]) -> T:
        """Run ``work`` in one session; book the outcome; re-raise a failure.

        Raises:
            ServerCallFailed: ``no_mcp_url``, or whatever opening the session or ``work``
                raised.
        """
        if self.tools is None:
            raise ServerCallFailed(self.name, what, "no_mcp_url", "no MCP URL is configured")
        loop = asyncio.get_running_loop()
        async with self._sessions:
            try:
                with span(f"receiver.{what}", {"robot_mcp.server": self.name}):
                    async with self.tools.session() as session:
                        result = await work(session)
            except ServerCallFailed as exc:
                self._counters.add("call_failures")
                if exc.code in _NOT_ANSWERED:
                    self.health.failed(loop.time(), f"{exc.tool}: {exc.code} ({exc.detail})")
                else:
                    self.health.succeeded(loop.time())
                raise
        self.health.succeeded(loop.time())
        return result
