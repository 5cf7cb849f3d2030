"""Fixtures of the integration tests: the memory server as a real child process.

``spawn(**kwargs)`` starts ``python -m robot_mcp_memory`` on a free loopback port with its
data in the test's temp dir (through ``robot_mcp_kit.testing.ServiceProcess``) and stops it
(SIGTERM, then SIGKILL) when the test ends.
``ServerProcess.session(token)`` opens a real MCP client session over the server's own
transport (SSE or streamable HTTP) with that bearer token. ``run_memory_server(env)`` runs
the entry point to completion (for the refusals at startup); ``mcp_initialize`` and
``mcp_accept`` are a raw JSON-RPC ``initialize`` request and the Accept header streamable
HTTP wants, for the tests that talk below the official client. ``kit_wheel`` is the
distribution's wheel, built once per session, for the tests that install it elsewhere.

Test modules reach these through fixtures: under ``--import-mode=importlib`` a test module
cannot import this conftest reliably.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, closing
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from robot_mcp_kit.testing import ServiceProcess, ServiceStartError, free_port

REPO = Path(__file__).resolve().parents[2]
UV = shutil.which("uv") or str(Path.home() / ".local" / "bin" / "uv")
TOKEN = "integration-token-7f3a"
# A hang guard, not a speed check: the server answers /healthz in a few seconds, later on a
# loaded machine; waiting polls, so a long limit costs nothing when the server is well.
READY_TIMEOUT_S = 60.0

INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream"}


def _clean_env() -> dict[str, str]:
    """This process's environment without any MCP_* or MEMORY_* setting."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("MCP_", "MEMORY_"))}


def run_server(env_overrides: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``python -m robot_mcp_memory`` (SSE on a free port) until it exits; its output."""
    env = _clean_env()
    env.update({"MCP_TRANSPORT": "sse", "MCP_PORT": str(free_port()), **env_overrides})
    return subprocess.run(
        [sys.executable, "-m", "robot_mcp_memory"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


class ServerProcess:
    """``python -m robot_mcp_memory`` as a child process with its output in a file.

    Started through :class:`robot_mcp_kit.testing.ServiceProcess` (ready once ``/healthz``
    answers 2xx). ``proc`` keeps the last child's ``Popen`` after :meth:`stop` or
    :meth:`kill9`, so a test can read its exit code.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        transport: str = "sse",
        token: str | None = TOKEN,
        env: dict[str, str] | None = None,
    ):
        self.extra_env = env or {}
        self.data_dir = data_dir
        self.transport = transport
        self.token = token
        self.port = free_port()
        self.log_path = data_dir.parent / f"server-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.service: ServiceProcess | None = None
        self._log: IO[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _service(self) -> ServiceProcess:
        env = _clean_env()
        env.update(
            MCP_TRANSPORT=self.transport,
            MCP_PORT=str(self.port),
            MEMORY_DATA_DIR=str(self.data_dir),
            ROBOT_ID="it-robot",
        )
        if self.token:
            env["MEMORY_TOKEN"] = self.token
        env.update(self.extra_env)
        self._log = self.log_path.open("ab")  # closed in stop() / kill9()
        return ServiceProcess(
            "robot-mcp-memory",
            [sys.executable, "-m", "robot_mcp_memory"],
            self.port,
            env=env,
            inherit_env=False,
            ready=f"{self.base}/healthz",
            output=self._log,
        )

    def launch(self) -> ServerProcess:
        """Start the child and return at once, without waiting for ``/healthz``."""
        self.service = self._service().launch()
        self.proc = self.service.proc
        return self

    def start(self) -> ServerProcess:
        """Start the child and return once ``/healthz`` answers; fail the test otherwise."""
        service = self.launch().service
        assert service is not None
        try:
            service.wait_ready(READY_TIMEOUT_S)
        except ServiceStartError as exc:
            self._close_log()
            pytest.fail(str(exc))
        return self

    def stop(self) -> None:
        """SIGTERM, SIGKILL after 10 s, reap. Idempotent."""
        if self.service is not None:
            self.service.stop(grace_s=10)
        self._close_log()

    def kill9(self) -> None:
        """kill -9: no shutdown code runs in the child; reap it."""
        assert self.service is not None
        assert self.proc is not None
        self.service.kill()
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_events(self) -> list[dict]:
        events = []
        for line in self.log_text().splitlines():
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return events

    def documents(self) -> int:
        """Rows in the server's index.db, read through a read-only connection (/healthz
        says nothing countable)."""
        uri = f"file:{self.data_dir / 'index.db'}?mode=ro"
        with closing(sqlite3.connect(uri, uri=True, timeout=5)) as db:
            return int(db.execute("SELECT count(*) FROM processes").fetchone()[0])

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    @asynccontextmanager
    async def session(self, token: str | None = None) -> AsyncIterator[ClientSession]:
        """A real MCP client session over this server's transport, as ``token`` (default:
        the server's admin token)."""
        token = self.token if token is None else token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        timeout = timedelta(seconds=15)
        if self.transport == "sse":
            async with (
                sse_client(f"{self.base}/sse", headers=headers) as (read, write),
                ClientSession(read, write, read_timeout_seconds=timeout) as session,
            ):
                await session.initialize()
                yield session
        else:
            async with (
                httpx.AsyncClient(headers=headers, timeout=15) as http,
                streamable_http_client(f"{self.base}/mcp", http_client=http) as (read, write, _),
                ClientSession(read, write, read_timeout_seconds=timeout) as session,
            ):
                await session.initialize()
                yield session


async def call(session: ClientSession, tool: str, **args: Any) -> dict[str, Any]:
    """Call a tool and decode its JSON answer (the transport itself must not fail)."""
    result = await session.call_tool(tool, args)
    assert not result.isError, result.content
    return json.loads(result.content[0].text)  # type: ignore[union-attr, no-any-return]


@pytest.fixture
def spawn(tmp_path):
    started: list[ServerProcess] = []

    def _spawn(data_dir: Path | None = None, **kwargs) -> ServerProcess:
        server = ServerProcess(data_dir or tmp_path / "data", **kwargs)
        started.append(server)
        return server.start()

    yield _spawn
    for server in started:
        server.stop()


@pytest.fixture
def mcp_call():
    """The ``call(session, tool, **args) -> dict`` helper, for test modules."""
    return call


@pytest.fixture
def run_memory_server():
    """``run_server(env_overrides) -> CompletedProcess``: the entry point run to its exit."""
    return run_server


@pytest.fixture
def mcp_initialize() -> dict[str, Any]:
    """A raw JSON-RPC ``initialize`` request (a fresh copy per test)."""
    return copy.deepcopy(INITIALIZE)


@pytest.fixture
def mcp_accept() -> dict[str, str]:
    """The Accept header streamable HTTP requires (a fresh copy per test)."""
    return dict(ACCEPT)


def outside_env() -> dict[str, str]:
    """This process's environment without what ties a child to this checkout or this run."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CONFORMANCE_", "VIRTUAL_ENV", "PYTHONPATH", "COV_", "UV_"))
    }


@pytest.fixture(scope="session")
def kit_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``robot-mcp-kit`` wheel built from this checkout (``uv build --wheel``, ~1 s)."""
    dist = tmp_path_factory.mktemp("dist")
    build = subprocess.run(
        [UV, "build", "--wheel", "--out-dir", str(dist), "--quiet"],
        cwd=REPO,
        env=outside_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = dist.glob("robot_mcp_kit-*.whl")
    return wheel


@pytest.fixture
def uv_isolated(tmp_path: Path):
    """``run(spec, *argv)``: argv where only the wheel spec is installed, outside the repo.

    ``uv run --isolated --no-project --with SPEC`` (as ``tests/frameworks/run.sh`` does),
    from the test's temp dir, with this interpreter's version.
    """

    def run(spec: str, *argv: str, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                *(UV, "run", "--quiet", "--isolated", "--no-project"),
                *("--python", sys.executable, "--with", spec),
                *argv,
            ],
            cwd=tmp_path,
            env=outside_env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )

    return run


@pytest.fixture
def uv_isolated_service(tmp_path: Path):
    """``make(name, specs, argv, port, env)``: a service (not started) where only ``specs``
    are installed, as ``uv_isolated`` runs a command, in its own process group."""

    def make(
        name: str, specs: list[str], argv: list[str], port: int, env: dict[str, str]
    ) -> ServiceProcess:
        with_specs = [arg for spec in specs for arg in ("--with", spec)]
        return ServiceProcess(
            name,
            [
                *(UV, "run", "--quiet", "--isolated", "--no-project"),
                *("--python", sys.executable, *with_specs),
                *argv,
            ],
            port,
            env={**outside_env(), **env},
            inherit_env=False,
            cwd=tmp_path,
            new_process_group=True,
        )

    return make
