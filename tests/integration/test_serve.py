"""robot_mcp_kit.serve, through the README's example run as a real process (issue 19, finding 4).

``examples/navigation.py`` is the README's block word for word (a unit test holds that). Here
it runs as its author would run it: the commands of ``conformance/README.md`` exactly as
written (only the two ports swapped for free ones) pass the suite; each transport of the
convention serves; a bad ``MCP_*`` value, or a callback URL without ``RVC_EVENT_SECRET``, is
one line; a non-loopback ``MCP_HOST`` on mcp 1.x
is reachable; a signal stops it cleanly. The other two frameworks run it in
``tests/frameworks/run.sh``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from robot_mcp_kit.testing import ServiceProcess, free_port

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
NAVIGATION = REPO / "examples" / "navigation.py"
CONFORMANCE_README = REPO / "conformance" / "README.md"


def _clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MCP_", "RVC_", "CONFORMANCE_", "COV_", "COVERAGE_"))
    }
    # mcp 1.x logs through rich, which wraps at 80 columns unless told the width.
    return {**env, "PYTHONUNBUFFERED": "1", "COLUMNS": "400", **extra}


def _navigation(port: int, **env: str) -> ServiceProcess:
    return ServiceProcess(
        "navigation",
        [sys.executable, str(NAVIGATION)],
        port,
        env=_clean_env(MCP_PORT=str(port), **env),
        inherit_env=False,
    )


@asynccontextmanager
async def _session(url: str, transport: str) -> AsyncIterator[ClientSession]:
    if transport == "sse":
        async with sse_client(url) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session
    else:
        async with (
            streamable_http_client(url) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


def _readme_commands() -> tuple[list[str], list[str]]:
    """The server command and the suite command of "A server you start yourself"."""
    text = CONFORMANCE_README.read_text(encoding="utf-8")
    (block,) = [
        b for b in re.findall(r"```bash\n(.*?)```", text, re.S) if "python navigation.py &" in b
    ]
    server, suite = [c for c in block.replace("\\\n", " ").split("\n\n") if c.strip()]
    return shlex.split(server.strip().removesuffix("&")), shlex.split(suite)


def test_the_conformance_readme_commands_pass_against_the_example():
    """Started and judged as conformance/README.md says, the README's server conforms."""
    server_words, suite_words = _readme_commands()
    callback_port, mcp_port = free_port(), free_port()
    swap = {"8765": str(callback_port), "9200": str(mcp_port)}

    def swapped(word: str) -> str:
        return re.sub(r"\b(8765|9200)\b", lambda m: swap[m.group(1)], word)

    env = dict(w.split("=", 1) for w in server_words if re.match(r"^[A-Z_]+=", w))
    command = [w for w in server_words if not re.match(r"^[A-Z_]+=", w)]
    assert command == ["python", "navigation.py"], command
    assert {"MCP_TRANSPORT", "MCP_PORT", "RVC_CALLBACK_URL", "RVC_EVENT_SECRET"} <= set(env)
    server = ServiceProcess(
        "navigation",
        [sys.executable, str(NAVIGATION)],
        mcp_port,
        env=_clean_env(**{k: swapped(v) for k, v in env.items()}),
        inherit_env=False,
    )
    assert suite_words[0] == "robot-mcp-conformance"
    suite_args = [swapped(w) for w in suite_words[1:]]
    callback = ["--callback-port", str(callback_port)]
    argv = [sys.executable, "-m", "robot_mcp_conformance", *suite_args, *callback]
    try:
        server.start(ready_timeout_s=30)
        proc = subprocess.run(
            argv,
            cwd=REPO.parent,
            env=_clean_env(),
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
        log = server.log_text()
    finally:
        server.close()
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:] + log[-2000:]
    summary = proc.stdout.strip().splitlines()[-1]
    # The example asks no input, serves no tasks extension and has no authentication: the
    # optional clauses of contract §11, §12 and §13 (two input tests, the native one, task
    # ownership) are skipped.
    assert re.fullmatch(r"=+ \d+ passed, 4 skipped in [\d.]+s =+", summary), proc.stdout[-3000:]


@pytest.mark.parametrize(("transport", "path"), [("sse", "/sse"), ("streamable-http", "/mcp")])
async def test_each_http_transport_serves_and_the_log_names_the_endpoint(transport, path):
    """MCP_TRANSPORT picks the transport; one INFO line says the URL to give the brain."""
    port = free_port()
    server = _navigation(port, MCP_TRANSPORT=transport)
    try:
        server.start(ready_timeout_s=30)
        async with _session(f"http://127.0.0.1:{port}{path}", transport) as session:
            tools = {t.name for t in (await session.list_tools()).tools}
            started = await session.call_tool("navigate_to", {"place": "dock", "speed": 50})
        log = server.log_text()
    finally:
        server.close()
    assert {"navigate_to", "get_task", "cancel_task", "list_tasks"} <= tools
    assert started.structuredContent is not None
    assert started.structuredContent["state"] == "running"
    assert (
        f"navigation serving on mcp 1.x FastMCP over {transport} at "
        f"http://127.0.0.1:{port}{path}; events to nowhere (RVC_CALLBACK_URL unset)"
    ) in log


async def test_without_mcp_transport_the_example_speaks_stdio():
    """stdio is the convention's default: an MCP client that spawns the file gets its tools."""
    params = StdioServerParameters(
        command=sys.executable, args=[str(NAVIGATION)], env=_clean_env(), cwd=str(REPO)
    )
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        started = await session.call_tool("navigate_to", {"place": "dock", "speed": 50})
        info = json.loads(started.content[0].text)  # type: ignore[union-attr]
        got = await session.call_tool("get_task", {"task_id": info["task_id"]})
    assert info["state"] == "running"
    assert got.structuredContent is not None
    assert got.structuredContent["task_id"] == info["task_id"]


@pytest.mark.parametrize(
    ("env", "line"),
    [
        (
            {"MCP_TRANSPORT": "carrier-pigeon"},
            "navigation: MCP_TRANSPORT must be one of stdio, sse, streamable-http, got "
            "'carrier-pigeon'.",
        ),
        (
            {"MCP_TRANSPORT": "sse", "MCP_PORT": "ninety"},
            "navigation: MCP_PORT must be an integer port from 1 to 65535, got 'ninety'.",
        ),
        (
            {"MCP_TRANSPORT": "sse", "MCP_PORT": "70000"},
            "navigation: MCP_PORT must be from 1 to 65535, got 70000.",
        ),
        (
            {"MCP_TRANSPORT": "sse", "MCP_PORT": "0"},
            "navigation: MCP_PORT must be from 1 to 65535, got 0.",
        ),
        (  # issue 32, finding 8: the poster's settings are refused the same way
            {"RVC_CALLBACK_URL": "http://127.0.0.1:9/api/agent/events"},
            "navigation: EventPoster for server 'navigation' has a callback URL "
            "(http://127.0.0.1:9/api/agent/events) but no secret: set RVC_EVENT_SECRET (or "
            "pass secret=) to the HMAC secret shared with the brain, or unset "
            "RVC_CALLBACK_URL to run without posting events.",
        ),
    ],
)
def test_a_bad_variable_is_one_line_and_exit_1(env, line):
    """A misconfigured server says which variable and what it accepts, without a traceback."""
    proc = subprocess.run(
        [sys.executable, str(NAVIGATION)],
        env=_clean_env(**env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    assert [x for x in proc.stderr.splitlines() if x.strip()] == [line], proc.stderr
    assert proc.stdout == ""


async def test_a_non_loopback_host_on_mcp1_is_reachable_by_its_own_name():
    """mcp 1.x FastMCP built with its loopback default checks Host headers against loopback
    names; MCP_HOST=127.0.0.2 (on loopback, but not one of those names) still serves."""
    port = free_port()
    server = _navigation(port, MCP_TRANSPORT="sse", MCP_HOST="127.0.0.2")
    server.host = "127.0.0.2"
    try:
        server.start(ready_timeout_s=30)
        async with _session(f"http://127.0.0.2:{port}/sse", "sse") as session:
            tools = {t.name for t in (await session.list_tools()).tools}
        log = server.log_text()
    finally:
        server.close()
    assert "navigate_to" in tools
    assert "MCP_HOST=127.0.0.2 is not loopback" in log
    assert f"over sse at http://127.0.0.2:{port}/sse" in log


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
async def test_a_signal_stops_the_http_server_cleanly_while_a_task_runs(signum):
    """Ctrl-C or a supervisor's SIGTERM: uvicorn shuts down, then running tasks are
    cancelled and the poster closes (uvicorn's re-raised signal no longer kills the process
    first, nor cancels the close), and the process exits 0."""
    port = free_port()
    server = _navigation(port, MCP_TRANSPORT="streamable-http")
    try:
        server.start(ready_timeout_s=30)
        async with _session(f"http://127.0.0.1:{port}/mcp", "streamable-http") as session:
            started = await session.call_tool("navigate_to", {"place": "far", "speed": 0.01})
            assert started.structuredContent is not None
        assert server.proc is not None
        server.proc.send_signal(signum)
        code = server.proc.wait(timeout=30)
        log = server.log_text()
    finally:
        server.close()
    assert code == 0, log[-3000:]
    assert "navigation stopped: running tasks cancelled, the poster closed" in log, log[-3000:]
    assert "CancelledError" not in log, log[-3000:]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_the_stdio_server_cleanly(signum):
    """Over stdio nothing else handles the signal: serve stops the transport itself."""
    proc = subprocess.Popen(
        [sys.executable, str(NAVIGATION)],
        env=_clean_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()  # the serving line: the loop runs
        assert "navigation serving on mcp 1.x FastMCP over stdio" in first, first
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert f"navigation: {signal.Signals(signum).name} received, stopping" in err, err
    assert "navigation stopped" in err, err
    assert "Traceback" not in err, err
