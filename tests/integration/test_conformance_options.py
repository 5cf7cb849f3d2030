"""The conformance suite's command line: a usage error, the report header, a dead server.

Each test runs ``python -m pytest conformance ...`` in a subprocess, as an author would;
the option parsing itself is covered in process by tests/unit/test_conformance_config.py.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _suite(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CONFORMANCE_")}
    clean.update(env or {})
    return subprocess.run(
        # --no-cov: a child pytest-cov would erase and combine the parent's coverage files.
        [
            sys.executable,
            "-m",
            "pytest",
            "conformance",
            "-p",
            "no:cacheprovider",
            "--no-cov",
            *args,
        ],
        cwd=REPO,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_contradictory_options_are_a_usage_error():
    """--server-url with --server-cmd stops the run before any test, exit code 4, the reason."""
    proc = _suite("--server-url", "http://127.0.0.1:9/sse", "--server-cmd", "python server.py")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "--server-url and --server-cmd are alternatives" in proc.stderr


def test_report_header_names_the_target_and_env_fallback_works():
    """CONFORMANCE_SERVER_URL stands in for --server-url; the header names target and port."""
    proc = _suite(
        "--collect-only",
        env={"CONFORMANCE_SERVER_URL": "http://127.0.0.1:9/sse", "CONFORMANCE_SERVER_NAME": "nav"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "conformance target: http://127.0.0.1:9/sse" in proc.stdout
    assert "conformance fake_rvc: 127.0.0.1:8765, X-RVC-Server 'nav'" in proc.stdout


def test_server_that_dies_at_startup_is_reported_with_its_output():
    """A --server-cmd that exits before answering fails the run, quoting what it printed."""
    dying = shlex.join([sys.executable, "-c", "import sys; print('no config, bye'); sys.exit(3)"])
    proc = _suite("--server-cmd", dying, "-x", "-k", "test_reconciliation_tool_is_listed")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "exited with status 3" in proc.stdout
    assert "no config, bye" in proc.stdout


def test_server_url_mode_passes_against_a_separately_started_sleeper():
    """Issue 4's "done when": the suite passes against a sleeper it did not start itself."""
    from robot_mcp_kit.testing import ServiceProcess, free_port

    port, callback_port = free_port(), free_port()
    sleeper = ServiceProcess(
        "sleeper",
        [sys.executable, str(REPO / "examples" / "sleeper.py")],
        port,
        env={
            "MCP_TRANSPORT": "sse",
            "MCP_HOST": "127.0.0.1",
            "MCP_PORT": str(port),
            "RVC_CALLBACK_URL": f"http://127.0.0.1:{callback_port}/api/agent/events",
            "RVC_EVENT_SECRET": "sep-secret",
        },
    )
    try:
        sleeper.start(ready_timeout_s=30)
        proc = _suite(
            "--server-url",
            f"http://127.0.0.1:{port}/sse",
            "--callback-port",
            str(callback_port),
            "--secret",
            "sep-secret",
            "-q",
        )
    finally:
        sleeper.close()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout
    assert "failed" not in proc.stdout


def _closed_port_url() -> str:
    """An endpoint on a loopback port nothing listens on (bound to port 0, then closed)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/mcp"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``robot-mcp-conformance ARGS`` (``python -m robot_mcp_conformance``), outside the repo."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CONFORMANCE_")}
    return subprocess.run(
        [sys.executable, "-m", "robot_mcp_conformance", *args],
        cwd=REPO.parent,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("how", ["console-script", "pytest-conformance"])
def test_an_unreachable_url_is_one_line_before_any_test_output(how):
    """Issue 19: a dead --server-url is the only line printed: no header, no test name."""
    url = _closed_port_url()
    proc = _cli(url) if how == "console-script" else _suite("--server-url", url, "-v")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    assert lines == [lines[0]], proc.stdout + proc.stderr
    assert lines[0].startswith(f"ERROR: conformance: cannot reach {url}: ConnectError")
    assert "test session starts" not in proc.stdout


def test_a_url_that_is_not_mcp_is_one_line_before_any_test_output():
    """A web page where the endpoint should be: one line naming what it answered, exit 4."""
    from fake_rvc import FakeRvcServer

    with FakeRvcServer({"sleeper": "s3cret"}) as rvc:  # its "/" is an HTML page
        proc = _cli(rvc.url + "/", "-v")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    assert len(lines) == 1, proc.stdout + proc.stderr
    assert "is not an MCP endpoint: GET / answered 200 text/html" in lines[0]
