"""Calls to a server's task tools over MCP: the receiver's only use of the ``mcp`` extra.

``get_task_events`` (repair), ``list_tasks`` and ``get_task`` (reconciliation) and
``answer_task_input`` (the handler's answer to a question). Each batch of calls opens one
short MCP session (SSE or streamable HTTP, as :class:`~robot_mcp_kit.receiver.ServerConfig`
says, with its bearer token) and closes it: repairs and polls are rare, and a session
that outlives a server restart is one more thing to break. ``mcp`` is imported on the
first call, so a receiver without MCP URLs never needs it.

Every failure becomes :class:`~robot_mcp_kit.receiver.ServerCallFailed` with a code; a
token never appears in its message.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from robot_mcp_kit.models import (
    TASK_EVENTS_TOOL_NAME,
    TASK_INPUT_TOOL_NAME,
    TaskEvent,
    TaskInfo,
)
from robot_mcp_kit.receiver._config import ServerConfig
from robot_mcp_kit.receiver._exceptions import ServerCallFailed
from robot_mcp_kit.receiver._verdict import read_event

__all__ = ["EventsPage", "Fetched", "ServerTools", "SessionFactory", "ToolSession"]

_MAX_PAGES = 100


@dataclass(frozen=True, slots=True)
class Fetched:
    """One event read from a ``get_task_events`` page, with its JSON as the receiver keeps it."""

    event: TaskEvent
    body: bytes


@dataclass(frozen=True, slots=True)
class EventsPage:
    """A task's events after a seq, every page of ``get_task_events`` read.

    ``events`` oldest first (one of a type this kit does not know included);
    ``last_seq`` the task's latest seq; ``first_retained_seq`` the oldest the server still
    keeps (None: it keeps none).
    """

    events: tuple[Fetched, ...]
    last_seq: int
    first_retained_seq: int | None


def _root_cause(exc: BaseException) -> BaseException:
    seen: set[int] = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        elif exc.__cause__ is not None:
            exc = exc.__cause__
        else:
            break
    return exc


class ToolSession:
    """One open MCP session to one server. Made by :meth:`ServerTools.session`."""

    def __init__(self, server: ServerConfig, session: Any, call_timeout_s: float) -> None:
        self.server = server
        self._session = session
        self._call_timeout_s = call_timeout_s

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Call ``tool`` and return its answer object (an error object included).

        Raises:
            ServerCallFailed: ``timeout``, ``unreachable``, ``error`` (an MCP error or
                ``isError``, e.g. a tool the server does not have) or ``bad_answer``.
        """
        name = self.server.name
        try:
            async with asyncio.timeout(self._call_timeout_s):
                result = await self._session.call_tool(tool, arguments)
        except TimeoutError:
            raise ServerCallFailed(
                name, tool, "timeout", f"no answer within {self._call_timeout_s:g} s"
            ) from None
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            cause = _root_cause(exc)
            raise ServerCallFailed(name, tool, "unreachable", type(cause).__name__) from None
        wire: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        texts = [c.get("text") for c in wire.get("content", []) if c.get("type") == "text"]
        if wire.get("isError"):
            first = str(texts[0])[:200] if texts else "no text"
            raise ServerCallFailed(name, tool, "error", f"the server answered an error: {first}")
        data: Any = None
        if texts and isinstance(texts[0], str):
            with contextlib.suppress(ValueError):
                data = json.loads(texts[0])
        if not isinstance(data, dict):
            data = wire.get("structuredContent")
        if not isinstance(data, dict):
            raise ServerCallFailed(name, tool, "bad_answer", "the answer is not a JSON object")
        return data

    def _refused(self, tool: str, answer: dict[str, Any]) -> ServerCallFailed:
        code = answer.get("error")
        detail = answer.get("detail")
        return ServerCallFailed(
            self.server.name,
            tool,
            code if code in ("not_found", "invalid") else "error",
            str(detail)[:200] if isinstance(detail, str) else f"the server answered {code!r}",
        )

    async def list_tasks(self) -> list[TaskInfo]:
        """Every task the server lists (a malformed entry is skipped)."""
        answer = await self.call("list_tasks", {})
        if "error" in answer:
            raise self._refused("list_tasks", answer)
        tasks = answer.get("tasks")
        if not isinstance(tasks, list):
            raise ServerCallFailed(
                self.server.name, "list_tasks", "bad_answer", "the answer has no 'tasks' list"
            )
        found: list[TaskInfo] = []
        for raw in tasks:
            with contextlib.suppress(ValidationError):
                found.append(TaskInfo.model_validate(raw))
        return found

    async def get_task(self, task_id: str) -> TaskInfo | None:
        """The task, or None when the server answers ``not_found``."""
        answer = await self.call("get_task", {"task_id": task_id})
        if answer.get("error") == "not_found":
            return None
        if "error" in answer:
            raise self._refused("get_task", answer)
        try:
            return TaskInfo.model_validate(answer)
        except ValidationError:
            raise ServerCallFailed(
                self.server.name, "get_task", "bad_answer", "the answer is not a TaskInfo"
            ) from None

    async def task_events(self, task_id: str, after_seq: int) -> EventsPage | None:
        """Every retained event of the task after ``after_seq`` (all pages); None when the
        server answers ``not_found``. An entry naming another task or server is dropped."""
        events: list[Fetched] = []
        cursor = after_seq
        last_seq = after_seq
        first_retained: int | None = None
        for page_number in range(_MAX_PAGES):
            answer = await self.call(
                TASK_EVENTS_TOOL_NAME, {"task_id": task_id, "after_seq": cursor}
            )
            if answer.get("error") == "not_found":
                return None
            if "error" in answer:
                raise self._refused(TASK_EVENTS_TOOL_NAME, answer)
            raw_events = answer.get("events")
            last = answer.get("last_seq")
            if not isinstance(raw_events, list) or type(last) is not int:
                raise ServerCallFailed(
                    self.server.name,
                    TASK_EVENTS_TOOL_NAME,
                    "bad_answer",
                    "the answer is not a TaskEventPage",
                )
            last_seq = max(last_seq, last)
            retained = answer.get("first_retained_seq")
            if page_number == 0 and type(retained) is int:
                first_retained = retained
            advanced = False
            for raw in raw_events:
                found = read_event(raw)
                if (
                    found is None
                    or found.task_id != task_id
                    or found.server != self.server.name
                    or found.seq <= cursor
                ):
                    continue
                body = json.dumps(raw, separators=(",", ":"), ensure_ascii=False).encode()
                events.append(Fetched(found, body))
                cursor = found.seq
                advanced = True
            if not answer.get("more") or not advanced:
                break
        return EventsPage(tuple(events), last_seq, first_retained)

    async def answer_input(
        self, task_id: str, request_id: str, action: str, content: dict[str, Any] | None
    ) -> TaskInfo:
        """Answer a task's input request; the task as the server answers it.

        Raises:
            ServerCallFailed: ``not_found`` (the task no longer waits on that request:
                answered already, finished), ``invalid`` (a malformed answer), or a
                transport failure.
        """
        answer = await self.call(
            TASK_INPUT_TOOL_NAME,
            {
                "task_id": task_id,
                "request_id": request_id,
                "action": action,
                "content": content or {},
            },
        )
        if "error" in answer:
            raise self._refused(TASK_INPUT_TOOL_NAME, answer)
        try:
            return TaskInfo.model_validate(answer)
        except ValidationError:
            raise ServerCallFailed(
                self.server.name, TASK_INPUT_TOOL_NAME, "bad_answer", "not a TaskInfo"
            ) from None


SessionFactory = Callable[[ServerConfig], AbstractAsyncContextManager[Any]]
"""Opens an MCP client session to a server: an async context manager yielding an
initialized ``mcp.ClientSession`` (or anything with its ``call_tool``)."""


class ServerTools:
    """Opens MCP sessions to one server's :attr:`~ServerConfig.mcp_url`.

    Args:
        server: the server (its URL, token and transport).
        connect_timeout_s: how long connecting and ``initialize`` may take.
        call_timeout_s: how long each tool call may take.
        session_factory: opens the session instead (your own auth, an in-memory pair in
            tests); None: the MCP client over :attr:`ServerConfig.mcp_url`.
    """

    def __init__(
        self,
        server: ServerConfig,
        *,
        connect_timeout_s: float = 10.0,
        call_timeout_s: float = 30.0,
        session_factory: SessionFactory | None = None,
    ) -> None:
        self.server = server
        self.connect_timeout_s = connect_timeout_s
        self.call_timeout_s = call_timeout_s
        self.session_factory = session_factory

    def __repr__(self) -> str:
        return f"<ServerTools {self.server.name} {self.server.mcp_url}>"

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[ToolSession]:
        """An initialized session for a batch of calls; closed when the block ends.

        Use it within one asyncio task (the MCP client's cancel scopes require it).

        Raises:
            ServerCallFailed: ``no_mcp_url``, or ``unreachable`` / ``timeout`` when the
                session cannot be opened; what the calls inside raise passes through.
        """
        name = self.server.name
        if self.server.mcp_url is None and self.session_factory is None:
            raise ServerCallFailed(name, "initialize", "no_mcp_url", "no MCP URL is configured")
        inner: BaseException | None = None
        try:
            async with contextlib.AsyncExitStack() as stack:
                try:
                    async with asyncio.timeout(self.connect_timeout_s):
                        session = await self._open(stack)
                except TimeoutError:
                    raise ServerCallFailed(
                        name,
                        "initialize",
                        "timeout",
                        f"no session within {self.connect_timeout_s:g} s",
                    ) from None
                try:
                    yield ToolSession(self.server, session, self.call_timeout_s)
                except BaseException as exc:
                    inner = exc
                    raise
        except Exception as exc:
            # The MCP client's task groups may wrap what the block raised in a group.
            cause = _root_cause(exc)
            if isinstance(cause, ServerCallFailed):
                raise cause from None
            if inner is not None:
                raise
            raise ServerCallFailed(
                name, "initialize", "unreachable", type(cause).__name__
            ) from None

    async def _open(self, stack: contextlib.AsyncExitStack) -> Any:
        if self.session_factory is not None:
            return await stack.enter_async_context(self.session_factory(self.server))
        try:
            from mcp import ClientSession
        except ImportError:
            raise ServerCallFailed(
                self.server.name,
                "initialize",
                "missing_extra",
                "repair and reconciliation call the server over MCP, which needs the mcp "
                "package: pip install 'robot-mcp-kit[receiver]'",
            ) from None

        streams = await stack.enter_async_context(self._transport(stack))
        session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
        await session.initialize()
        return session

    def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        url = self.server.mcp_url
        assert url is not None
        headers = {"Authorization": f"Bearer {self.server.token}"} if self.server.token else {}
        if self.server.resolved_transport == "sse":
            from mcp.client.sse import sse_client

            return sse_client(
                url,
                headers=headers or None,
                timeout=self.connect_timeout_s,
                sse_read_timeout=self.call_timeout_s + self.connect_timeout_s,
            )
        import mcp.client.streamable_http as streamable

        if hasattr(streamable, "streamable_http_client"):
            import httpx

            client = httpx.AsyncClient(
                headers=headers,
                timeout=httpx.Timeout(self.connect_timeout_s, read=self.call_timeout_s),
                follow_redirects=True,
            )
            stack.push_async_callback(client.aclose)
            return streamable.streamable_http_client(url, http_client=client)
        return streamable.streamablehttp_client(  # pragma: no cover - old mcp 1.x only
            url, headers=headers or None, timeout=self.connect_timeout_s
        )
