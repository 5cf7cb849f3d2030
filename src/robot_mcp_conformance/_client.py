"""A synchronous MCP client for the tests, and the check that a URL is an MCP endpoint.

The tests are plain synchronous functions. :class:`McpClient` runs one MCP session
(SSE or streamable HTTP, mcp 1.x or 2.x client) on an event loop in a background thread
and hands each call to it, so a test calls ``client.call("get_task", {"task_id": ...})``
and gets a :class:`ToolReply`; the session is opened and closed inside one asyncio task,
as anyio's cancel scopes require. :func:`detect_transport` tells an SSE endpoint from a
streamable-HTTP one.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from robot_mcp_conformance._config import CALL_BUDGET_S, Transport
from robot_mcp_conformance._exceptions import TargetError

__all__ = ["McpClient", "ToolReply", "describe_error", "detect_transport", "root_cause"]


def _one_line(text: str) -> str:
    return " ".join(text.split())


def root_cause(exc: BaseException) -> BaseException:
    """The innermost meaningful exception under anyio's exception groups and ``__cause__``."""
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


def describe_error(exc: BaseException) -> str:
    """``Type: message`` of the root cause, on one line."""
    cause = root_cause(exc)
    text = _one_line(str(cause))
    return f"{type(cause).__name__}: {text}" if text else type(cause).__name__


def detect_transport(
    url: str, *, timeout_s: float = 5.0, headers: dict[str, str] | None = None
) -> Transport:
    """Tell an SSE endpoint from a streamable-HTTP one by one GET, and check it answers.

    An SSE endpoint answers a GET with ``200`` and a ``text/event-stream``; a
    streamable-HTTP endpoint refuses a GET without a session (400, 405 or 406) or opens its
    stream. The GET is closed as soon as its headers arrive. ``headers`` are added to it
    (``Authorization`` for a server with authentication).

    Raises:
        TargetError: the URL cannot be reached, or answers in a way no MCP endpoint does
            (404, a web page, ...); the message is one line naming the URL and the cause.
    """
    import httpx

    try:
        with (
            httpx.Client(timeout=timeout_s, follow_redirects=False) as http,
            http.stream(
                "GET", url, headers={**(headers or {}), "Accept": "text/event-stream"}
            ) as response,
        ):
            status = response.status_code
            ctype = response.headers.get("content-type", "").split(";")[0].strip().lower()
    except httpx.HTTPError as exc:
        raise TargetError(f"cannot reach {url}: {describe_error(exc)}") from None
    if status == 200 and ctype == "text/event-stream":
        # Both transports may open an event stream on GET; a streamable-HTTP server does
        # so only for an established session, which this request did not have.
        return "sse"
    if status in (400, 405, 406) or (status == 200 and ctype == "application/json"):
        return "streamable-http"
    path = urlsplit(url).path or "/"
    raise TargetError(
        f"{url} is not an MCP endpoint: GET {path} answered {status} "
        f"{ctype or 'without a content type'} (an SSE endpoint answers 200 "
        "text/event-stream, a streamable-HTTP endpoint refuses a GET without a session); "
        "check the path (usually /sse or /mcp)"
    )


def _mcp_major() -> int:
    from importlib.metadata import version

    return int(version("mcp").split(".")[0])


def _wire(model: Any) -> dict[str, Any]:
    """An mcp type as its JSON wire form (camelCase under mcp 1.x and 2.x alike)."""
    dumped: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


@dataclass(frozen=True)
class ToolReply:
    """One ``tools/call`` as the suite saw it.

    ``text`` is the first text content. ``structured`` is the MCP ``structuredContent``
    (None when the server sent none). ``data`` is what the tool answered as a value: the
    text parsed as JSON, else the structured content (None if neither). ``is_error`` is
    the MCP ``isError`` flag; ``failure`` says why the call got no answer at all (timeout,
    broken session).
    """

    tool: str
    arguments: dict[str, Any]
    elapsed_s: float
    is_error: bool = False
    text: str | None = None
    data: Any = None
    failure: str | None = None
    structured: Any = None

    @property
    def answered(self) -> bool:
        """True when the call returned a result that is not an MCP error."""
        return self.failure is None and not self.is_error

    def evidence(self) -> dict[str, Any]:
        """A JSON-ready account of the call for failure messages."""
        out: dict[str, Any] = {
            "call": {"tool": self.tool, "arguments": self.arguments},
            "elapsed_s": round(self.elapsed_s, 3),
        }
        if self.failure is not None:
            out["failure"] = self.failure
        else:
            out["isError"] = self.is_error
            out["reply"] = self.data if self.data is not None else self.text
            if self.structured is not None and self.structured != self.data:
                out["structuredContent"] = self.structured
        return out


class McpClient:
    """A synchronous facade over one MCP ``ClientSession`` (SSE or streamable HTTP).

    The session lives on an event loop in a daemon thread; :meth:`call` and
    :meth:`list_tools` block the calling thread until the answer arrives. It works with
    the mcp 1.x and 2.x clients (whose types differ in attribute names): tools and results
    are handed over in their JSON wire form. Use from one test thread at a time.
    ``close()`` is idempotent. ``headers`` go on every HTTP request of the session
    (``Authorization`` for a server with authentication).
    """

    def __init__(
        self,
        url: str,
        transport: Transport = "sse",
        *,
        connect_timeout_s: float = 10.0,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.url = url
        self.transport: Transport = transport
        self.connect_timeout_s = connect_timeout_s
        self.headers = dict(headers or {})
        self.server_info: dict[str, Any] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._run_loop, name="conformance-mcp-client", daemon=True
        )
        self._session: Any = None
        self._closing: asyncio.Event | None = None
        self._keeper: concurrent.futures.Future[None] | None = None

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def open(self) -> McpClient:
        """Connect, initialize the session and return self.

        Raises:
            TargetError: the server could not be reached or did not initialize; one line
                naming the URL, the transport and the root cause.
        """
        self._thread.start()
        ready: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._keeper = asyncio.run_coroutine_threadsafe(self._keep(ready), self._loop)
        try:
            self.server_info = ready.result(self.connect_timeout_s + 5)
        except concurrent.futures.TimeoutError:
            self.close()
            raise TargetError(
                f"cannot open an MCP session on {self.url} ({self.transport}): no "
                f"initialize answer within {self.connect_timeout_s + 5:.0f} s"
            ) from None
        except Exception as exc:
            self.close()
            raise TargetError(
                f"cannot open an MCP session on {self.url} ({self.transport}): "
                f"{describe_error(exc)}"
            ) from None
        return self

    async def _transport_cm(self, stack: contextlib.AsyncExitStack) -> Any:
        if self.transport == "sse":
            from mcp.client.sse import sse_client

            return sse_client(
                self.url,
                headers=self.headers or None,
                timeout=self.connect_timeout_s,
                sse_read_timeout=3600,
            )
        import mcp.client.streamable_http as streamable

        if hasattr(streamable, "streamable_http_client"):
            if not self.headers:
                return streamable.streamable_http_client(self.url)
            # The SDK's own client factory (mcp 2.x builds on its own httpx fork), with
            # the headers; a client handed in is the caller's to close.
            from mcp.shared._httpx_utils import create_mcp_http_client

            http = await stack.enter_async_context(create_mcp_http_client(headers=self.headers))
            return streamable.streamable_http_client(self.url, http_client=http)
        # mcp < 1.2x: only the older name exists.
        return streamable.streamablehttp_client(  # pragma: no cover - old mcp 1.x only
            self.url,
            headers=self.headers or None,
            timeout=self.connect_timeout_s,
            sse_read_timeout=3600,
        )

    async def _keep(self, ready: concurrent.futures.Future[Any]) -> None:
        from mcp import ClientSession

        self._closing = asyncio.Event()
        try:
            async with contextlib.AsyncExitStack() as stack:
                streams = await stack.enter_async_context(await self._transport_cm(stack))
                session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
                init = await session.initialize()
                self._session = session
                ready.set_result(_wire(init).get("serverInfo", {}))
                await self._closing.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(exc))
            if not isinstance(exc, Exception):
                raise
        finally:
            self._session = None

    def _submit(self, coro: Any, timeout_s: float) -> Any:
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"no answer within {timeout_s:.0f} s") from None

    def list_tools(self, timeout_s: float = CALL_BUDGET_S) -> list[dict[str, Any]]:
        """Return the server's tools in their wire form (``name``, ``inputSchema``, ...)."""
        if self._session is None:
            raise RuntimeError("the MCP session is not open")
        session = self._session

        async def all_tools() -> list[dict[str, Any]]:
            from mcp.types import PaginatedRequestParams

            tools: list[dict[str, Any]] = []
            page = _wire(await session.list_tools())
            while True:
                tools.extend(page.get("tools", []))
                cursor = page.get("nextCursor")
                if not cursor:
                    return tools
                params = PaginatedRequestParams(cursor=cursor)
                page = _wire(await session.list_tools(params=params))

        result: list[dict[str, Any]] = self._submit(all_tools(), timeout_s)
        return result

    def call(
        self, tool: str, arguments: dict[str, Any] | None = None, timeout_s: float = CALL_BUDGET_S
    ) -> ToolReply:
        """Call ``tool`` and return what happened; never raises for the server's faults."""
        args = dict(arguments or {})
        started = time.monotonic()
        if self._session is None:
            return ToolReply(tool, args, 0.0, failure="the MCP session is not open")
        budget: Any = timeout_s if _mcp_major() >= 2 else timedelta(seconds=timeout_s)
        coro = self._session.call_tool(tool, args, read_timeout_seconds=budget)
        try:
            result = _wire(self._submit(coro, timeout_s + 2))
        except Exception as exc:
            return ToolReply(
                tool,
                args,
                time.monotonic() - started,
                failure=f"{type(exc).__name__}: {exc}",
            )
        elapsed = time.monotonic() - started
        text = next(
            (c.get("text") for c in result.get("content", []) if c.get("type") == "text"), None
        )
        structured = result.get("structuredContent")
        # The text is what every MCP client reads; structured content is judged on its own
        # (§6.4). A server whose answer is only structured is read from there.
        data: Any = None
        if text is not None:
            with contextlib.suppress(ValueError):
                data = json.loads(text)
        if data is None:
            data = structured
        return ToolReply(
            tool,
            args,
            elapsed,
            is_error=bool(result.get("isError")),
            text=text,
            data=data,
            structured=structured,
        )

    def close(self) -> None:
        """Close the session and stop the loop thread."""
        loop = self._loop
        if loop.is_closed():
            return
        if self._keeper is not None and self._closing is not None:
            loop.call_soon_threadsafe(self._closing.set)
            with contextlib.suppress(Exception):
                self._keeper.result(10)
        if self._thread.is_alive():
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(loop.shutdown_asyncgens(), loop).result(5)
            loop.call_soon_threadsafe(loop.stop)
            self._thread.join(10)
        if not self._thread.is_alive():
            loop.close()
