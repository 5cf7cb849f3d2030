"""The server under test: its configuration, its process and a synchronous MCP client.

The tests are plain synchronous functions. :class:`McpClient` runs one MCP session
(SSE or streamable HTTP, mcp 1.x or 2.x client) on an event loop in a background thread
and hands each call to it, so a test calls ``client.call("get_task", {"task_id": ...})``
and gets a :class:`ToolReply`; the session
is opened and closed inside one asyncio task, as anyio's cancel scopes require.

:class:`ServerProcess` starts ``--server-cmd`` in its own process group with
``RVC_CALLBACK_URL``, ``RVC_EVENT_SECRET``, ``MCP_TRANSPORT`` (``sse`` unless
``--transport streamable-http``), ``MCP_HOST`` and ``MCP_PORT`` set, waits until the port
answers and stops the group it started.

:func:`detect_transport` tells an SSE endpoint from a streamable-HTTP one, and
:class:`TargetError` carries the one line that stops the run when the target cannot be
reached or does not speak MCP.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal, cast
from urllib.parse import urlsplit

from robot_mcp_kit.testing import free_port

__all__ = [
    "DEFAULT_CALLBACK_PORT",
    "DEFAULT_SECRET",
    "DEFAULT_SERVER_NAME",
    "SLEEPER_CANCEL_ARGS",
    "SLEEPER_FAIL_ARGS",
    "SLEEPER_PATH",
    "SLEEPER_START_ARGS",
    "SLEEPER_START_TOOL",
    "TRANSPORTS",
    "Config",
    "ConfigError",
    "McpClient",
    "ServerProcess",
    "TargetError",
    "ToolReply",
    "Transport",
    "detect_transport",
    "free_port",
    "parse_json_object",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
SLEEPER_PATH = REPO_ROOT / "examples" / "sleeper.py"
"""The bundled sleeper of a checkout of this repository (absent from an installed wheel)."""

Transport = Literal["sse", "streamable-http"]
TRANSPORTS: tuple[Transport, ...] = ("sse", "streamable-http")

DEFAULT_SECRET = "s3cret"
DEFAULT_SERVER_NAME = "sleeper"
DEFAULT_CALLBACK_PORT = 8765
"""Where fake_rvc listens when ``--server-url`` is given without ``--callback-port``."""

SLEEPER_START_TOOL = "sleep_task"
SLEEPER_START_ARGS: dict[str, Any] = {"duration_s": 1, "tick_s": 0.2}
SLEEPER_FAIL_ARGS: dict[str, Any] = {"duration_s": 0.4, "tick_s": 0.2, "fail": True}
SLEEPER_CANCEL_ARGS: dict[str, Any] = {"duration_s": 30, "tick_s": 0.2}

CALL_BUDGET_S = 30.0
"""The consumer's per-call timeout (kit spec Appendix A: "expect a ~30 s call timeout")."""


class ConfigError(ValueError):
    """The suite's options contradict each other or do not parse."""


class TargetError(RuntimeError):
    """The server under test cannot be reached, or does not speak MCP there.

    The message is one line naming the URL and the cause; the suite stops on it.
    """


def parse_json_object(option: str, text: str | None) -> dict[str, Any] | None:
    """Parse an option's JSON object, or None when the option is unset.

    Raises:
        ConfigError: the text is not JSON, or not a JSON object.
    """
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{option} must be a JSON object, got {text!r}: {exc}.") from None
    if not isinstance(value, dict):
        raise ConfigError(
            f"{option} must be a JSON object like '{{\"duration_s\": 1}}', got {text!r}."
        )
    return value


@dataclass(frozen=True)
class Config:
    """What the suite drives and how (built from the command line by ``conftest.py``).

    Exactly one of ``server_url`` and ``server_cmd`` is set: a running server the suite
    connects to, or the argv of one the suite starts (the sleeper by default).
    ``callback_port`` 0 means a free port (only with ``server_cmd``).
    """

    server_url: str | None
    server_cmd: tuple[str, ...] | None
    secret: str
    callback_port: int
    server_name: str
    start_tool: str
    start_args: dict[str, Any]
    fail_args: dict[str, Any] | None
    cancel_args: dict[str, Any] | None
    startup_timeout_s: float = 30.0
    task_timeout_s: float = 20.0
    defaulted: bool = field(default=False)
    """True when no target was given and the suite runs the bundled sleeper."""
    transport: Transport | None = None
    """``--transport``: None means detect it from the URL (``--server-cmd``: SSE)."""
    """True when no target was given and the suite runs the bundled sleeper."""

    @classmethod
    def build(
        cls,
        *,
        server_url: str | None,
        server_cmd: str | None,
        secret: str | None,
        callback_port: str | int | None,
        server_name: str | None,
        start_tool: str | None,
        start_args: str | None,
        fail_args: str | None,
        cancel_args: str | None,
        task_timeout_s: str | float | None = None,
        transport: str | None = None,
    ) -> Config:
        """Validate the raw option values and fill in the documented defaults.

        Without ``start_tool`` the sleeper's tool and argument sets are the defaults;
        with it, ``start_args`` defaults to ``{}`` and the failure/cancel sets to none.

        Raises:
            ConfigError: contradictory or malformed options, with what is valid.
        """
        server_url = (server_url or "").strip() or None
        cmd_text = (server_cmd or "").strip() or None
        if server_url and cmd_text:
            raise ConfigError(
                "--server-url and --server-cmd are alternatives: give the URL of a running "
                "server, or the command the suite should start, not both."
            )
        if server_url and not server_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"--server-url must be the server's SSE or streamable-HTTP endpoint, e.g. "
                f"http://127.0.0.1:9100/sse or http://127.0.0.1:9100/mcp; got {server_url!r}."
            )
        chosen = (transport or "").strip().lower() or "auto"
        if chosen not in ("auto", *TRANSPORTS):
            raise ConfigError(
                f"--transport must be auto, sse or streamable-http, got {transport!r}."
            )
        defaulted = not server_url and not cmd_text
        if defaulted and not SLEEPER_PATH.is_file():
            raise ConfigError(
                "no server to test: give --server-url URL (a running server, SSE or "
                "streamable HTTP) or --server-cmd CMD (the suite starts it)."
            )
        argv: tuple[str, ...] | None = None
        if cmd_text:
            argv = tuple(shlex.split(cmd_text))
            if not argv:
                raise ConfigError("--server-cmd is empty.")
        elif defaulted:
            argv = (sys.executable, str(SLEEPER_PATH))

        if callback_port is None or callback_port == "":
            port = DEFAULT_CALLBACK_PORT if server_url else 0
        else:
            try:
                port = int(callback_port)
            except ValueError:
                raise ConfigError(
                    f"--callback-port must be a port number, got {callback_port!r}."
                ) from None
            if not 0 <= port < 65536:
                raise ConfigError(f"--callback-port must be 0-65535, got {port}.")
        if server_url and port == 0:
            raise ConfigError(
                "--callback-port 0 (a free port) only works with --server-cmd: a server "
                "started by someone else must already know where fake_rvc listens."
            )

        tool = (start_tool or "").strip() or None
        if tool is None:
            start = parse_json_object("--start-args", start_args) or dict(SLEEPER_START_ARGS)
            fail = parse_json_object("--fail-args", fail_args)
            cancel = parse_json_object("--cancel-args", cancel_args)
            fail = dict(SLEEPER_FAIL_ARGS) if fail is None else fail
            cancel = dict(SLEEPER_CANCEL_ARGS) if cancel is None else cancel
            tool = SLEEPER_START_TOOL
        else:
            start = parse_json_object("--start-args", start_args) or {}
            fail = parse_json_object("--fail-args", fail_args)
            cancel = parse_json_object("--cancel-args", cancel_args)

        timeout = 20.0
        if task_timeout_s not in (None, ""):
            try:
                timeout = float(task_timeout_s)
            except ValueError:
                raise ConfigError(
                    f"--task-timeout must be seconds, got {task_timeout_s!r}."
                ) from None
            if not timeout > 0:
                raise ConfigError(f"--task-timeout must be > 0, got {timeout}.")

        return cls(
            server_url=server_url,
            server_cmd=argv,
            secret=secret or DEFAULT_SECRET,
            callback_port=port,
            server_name=(server_name or "").strip() or DEFAULT_SERVER_NAME,
            start_tool=tool,
            start_args=start,
            fail_args=fail,
            cancel_args=cancel,
            task_timeout_s=timeout,
            defaulted=defaulted,
            transport=None if chosen == "auto" else cast("Transport", chosen),
        )

    @property
    def long_args(self) -> dict[str, Any]:
        """Arguments for a task that runs long enough to be cancelled."""
        return dict(self.cancel_args if self.cancel_args is not None else self.start_args)

    def describe_target(self) -> str:
        """One line naming the server under test."""
        if self.server_url:
            return self.server_url
        assert self.server_cmd is not None
        what = "the bundled sleeper" if self.defaulted else "--server-cmd"
        return f"{shlex.join(self.server_cmd)} ({what}, started by the suite)"


def _port_answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


class ServerProcess:
    """The server under test started by the suite, in its own process group.

    Its stdout and stderr go to a temporary log file, quoted when it fails to start.
    """

    def __init__(
        self,
        argv: tuple[str, ...],
        env: dict[str, str],
        port: int,
        transport: Transport = "sse",
    ) -> None:
        self.argv = argv
        self.env = env
        self.port = port
        self.transport: Transport = transport
        path = "/sse" if transport == "sse" else "/mcp"
        self.url = f"http://127.0.0.1:{port}{path}"
        self._log = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed in stop()
            prefix="conformance-server-", suffix=".log", delete=False
        )
        self.log_path = Path(self._log.name)
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float) -> ServerProcess:
        """Start the process and return once its port accepts connections.

        Raises:
            RuntimeError: the process exited, or the port stayed closed for ``timeout_s``;
                the message quotes the end of the server's output.
        """
        self._proc = subprocess.Popen(
            self.argv,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout_s
        while not _port_answers("127.0.0.1", self.port):
            code = self._proc.poll()
            if code is not None:
                raise RuntimeError(
                    f"the server under test exited with status {code} before answering on "
                    f"port {self.port}; command: {shlex.join(self.argv)}\n{self.output_tail()}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the server under test did not answer on 127.0.0.1:{self.port} within "
                    f"{timeout_s:.0f} s; command: {shlex.join(self.argv)}\n{self.output_tail()}"
                )
            time.sleep(0.05)
        return self

    def output_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines the server printed."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no server output)"
        tail = text.splitlines()[-lines:]
        return "server output (last lines):\n" + "\n".join("  | " + line for line in tail)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the process group this object started (TERM, then KILL). Idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout_s)
        elif proc is not None:
            proc.wait()
        if not self._log.closed:
            self._log.close()

    def remove_log(self) -> None:
        """Delete the log file (after a clean run)."""
        with contextlib.suppress(OSError):
            self.log_path.unlink()


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


def detect_transport(url: str, *, timeout_s: float = 5.0) -> Transport:
    """Tell an SSE endpoint from a streamable-HTTP one by one GET, and check it answers.

    An SSE endpoint answers a GET with ``200`` and a ``text/event-stream``; a
    streamable-HTTP endpoint refuses a GET without a session (400, 405 or 406) or opens its
    stream. The GET is closed as soon as its headers arrive.

    Raises:
        TargetError: the URL cannot be reached, or answers in a way no MCP endpoint does
            (404, a web page, ...); the message is one line naming the URL and the cause.
    """
    import httpx

    try:
        with (
            httpx.Client(timeout=timeout_s, follow_redirects=False) as http,
            http.stream("GET", url, headers={"Accept": "text/event-stream"}) as response,
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
    ``close()`` is idempotent.
    """

    def __init__(
        self, url: str, transport: Transport = "sse", *, connect_timeout_s: float = 10.0
    ) -> None:
        self.url = url
        self.transport: Transport = transport
        self.connect_timeout_s = connect_timeout_s
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

    def _transport_cm(self) -> Any:
        if self.transport == "sse":
            from mcp.client.sse import sse_client

            return sse_client(self.url, timeout=self.connect_timeout_s, sse_read_timeout=3600)
        import mcp.client.streamable_http as streamable

        if hasattr(streamable, "streamable_http_client"):
            return streamable.streamable_http_client(self.url)
        # mcp < 1.2x: only the older name exists.
        return streamable.streamablehttp_client(  # pragma: no cover - old mcp 1.x only
            self.url, timeout=self.connect_timeout_s, sse_read_timeout=3600
        )

    async def _keep(self, ready: concurrent.futures.Future[Any]) -> None:
        from mcp import ClientSession

        self._closing = asyncio.Event()
        try:
            async with contextlib.AsyncExitStack() as stack:
                streams = await stack.enter_async_context(self._transport_cm())
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
