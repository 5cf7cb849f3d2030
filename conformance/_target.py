"""The server under test: its configuration, its process and a synchronous MCP client.

The tests are plain synchronous functions. :class:`McpClient` runs one MCP session over
SSE on an event loop in a background thread and hands each call to it, so a test calls
``client.call("get_task", {"task_id": ...})`` and gets a :class:`ToolReply`; the session
is opened and closed inside one asyncio task, as anyio's cancel scopes require.

:class:`ServerProcess` starts ``--server-cmd`` in its own process group with
``RVC_CALLBACK_URL``, ``RVC_EVENT_SECRET``, ``MCP_TRANSPORT=sse``, ``MCP_HOST`` and
``MCP_PORT`` set, waits until the port answers and stops the group it started.
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
from typing import Any

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
    "Config",
    "ConfigError",
    "McpClient",
    "ServerProcess",
    "ToolReply",
    "free_port",
    "parse_json_object",
]

REPO_ROOT = Path(__file__).resolve().parents[1]
SLEEPER_PATH = REPO_ROOT / "examples" / "sleeper.py"

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
                f"--server-url must be the server's SSE endpoint, e.g. "
                f"http://127.0.0.1:9100/sse; got {server_url!r}."
            )
        defaulted = not server_url and not cmd_text
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

    def __init__(self, argv: tuple[str, ...], env: dict[str, str], port: int) -> None:
        self.argv = argv
        self.env = env
        self.port = port
        self.url = f"http://127.0.0.1:{port}/sse"
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


@dataclass(frozen=True)
class ToolReply:
    """One ``tools/call`` as the suite saw it.

    ``text`` is the first text content; ``data`` is that text parsed as JSON (None if it
    is not JSON). ``is_error`` is the MCP ``isError`` flag; ``failure`` says why the call
    got no answer at all (timeout, broken session).
    """

    tool: str
    arguments: dict[str, Any]
    elapsed_s: float
    is_error: bool = False
    text: str | None = None
    data: Any = None
    failure: str | None = None

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
        return out


class McpClient:
    """A synchronous facade over one MCP ``ClientSession`` on SSE.

    The session lives on an event loop in a daemon thread; :meth:`call` and
    :meth:`list_tools` block the calling thread until the answer arrives. Use from one
    test thread at a time. ``close()`` is idempotent.
    """

    def __init__(self, url: str, *, connect_timeout_s: float = 10.0) -> None:
        self.url = url
        self.connect_timeout_s = connect_timeout_s
        self.server_info: Any = None
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
            RuntimeError: the server could not be reached or did not initialize.
        """
        self._thread.start()
        ready: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._keeper = asyncio.run_coroutine_threadsafe(self._keep(ready), self._loop)
        try:
            self.server_info = ready.result(self.connect_timeout_s + 5)
        except Exception as exc:
            self.close()
            raise RuntimeError(
                f"could not open an MCP session on {self.url}: {type(exc).__name__}: {exc}"
            ) from exc
        return self

    async def _keep(self, ready: concurrent.futures.Future[Any]) -> None:
        from mcp import ClientSession
        from mcp.client.sse import sse_client

        self._closing = asyncio.Event()
        try:
            async with (
                sse_client(self.url, timeout=self.connect_timeout_s, sse_read_timeout=3600) as (
                    read,
                    write,
                ),
                ClientSession(read, write) as session,
            ):
                init = await session.initialize()
                self._session = session
                ready.set_result(init.serverInfo)
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

    def list_tools(self, timeout_s: float = CALL_BUDGET_S) -> list[Any]:
        """Return the server's tools (``mcp.types.Tool`` objects), following pages."""
        if self._session is None:
            raise RuntimeError("the MCP session is not open")
        session = self._session

        async def all_tools() -> list[Any]:
            tools: list[Any] = []
            cursor: str | None = None
            while True:
                page = await session.list_tools(cursor)
                tools.extend(page.tools)
                cursor = page.nextCursor
                if not cursor:
                    return tools

        result: list[Any] = self._submit(all_tools(), timeout_s)
        return result

    def call(
        self, tool: str, arguments: dict[str, Any] | None = None, timeout_s: float = CALL_BUDGET_S
    ) -> ToolReply:
        """Call ``tool`` and return what happened; never raises for the server's faults."""
        args = dict(arguments or {})
        started = time.monotonic()
        if self._session is None:
            return ToolReply(tool, args, 0.0, failure="the MCP session is not open")
        coro = self._session.call_tool(
            tool, args, read_timeout_seconds=timedelta(seconds=timeout_s)
        )
        try:
            result = self._submit(coro, timeout_s + 2)
        except Exception as exc:
            return ToolReply(
                tool,
                args,
                time.monotonic() - started,
                failure=f"{type(exc).__name__}: {exc}",
            )
        elapsed = time.monotonic() - started
        text = next((c.text for c in result.content if getattr(c, "type", None) == "text"), None)
        data: Any = None
        if text is not None:
            with contextlib.suppress(ValueError):
                data = json.loads(text)
        return ToolReply(tool, args, elapsed, is_error=bool(result.isError), text=text, data=data)

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
