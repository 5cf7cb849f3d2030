"""The official-conformance runner passes good servers and fails bad ones.

These run the real pinned suite under the wheel's Node against small FastMCP servers written
into tmp_path, so they prove the gate can fail. They are skipped when the suite is not
installed yet (``npm ci --prefix tools/mcp-conformance``, which the script itself does); the
real targets (sleeper, memory) are exercised by the script's own step in ``.ci/run``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "scripts" / "mcp_conformance.py"
SUITE_CLI = (
    REPO_ROOT / "tools/mcp-conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js"
)

pytestmark = [
    pytest.mark.slow,
    # A developer without the npm suite may skip; CI (CI=true: .ci/run installs it first)
    # may not, or a silent skip would pass for a gate that was never shown to fail.
    pytest.mark.skipif(
        not SUITE_CLI.is_file() and os.environ.get("CI") != "true",
        reason="MCP conformance suite not installed (npm ci --prefix tools/mcp-conformance)",
    ),
]

SERVER_TEMPLATE = """\
import os

from mcp.server.fastmcp import FastMCP
from mcp.server.transport_security import TransportSecuritySettings

mcp = FastMCP(
    "fixture",
    host=os.environ["MCP_HOST"],
    port=int(os.environ["MCP_PORT"]),
    transport_security={security},
)


@mcp.tool()
def echo(text: str) -> str:
    \"\"\"Return the text unchanged.\"\"\"
    return text


mcp.run(transport=os.environ["MCP_TRANSPORT"])
"""


def _server(tmp_path: Path, security: str) -> Path:
    path = tmp_path / "fixture_server.py"
    path.write_text(SERVER_TEMPLATE.format(security=security), encoding="utf-8")
    return path


def _run(script: Path, *scenarios: str) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, str(SCRIPT), "--target", "sleeper", "--sleeper-script", str(script)]
    for scenario in scenarios:
        args += ["--scenario", scenario]
    return subprocess.run(args, capture_output=True, text=True, timeout=100, check=False)


def _verdicts(stdout: str) -> dict[str, str]:
    """scenario -> PASS/FAIL from the runner's table rows."""
    rows = [line.split() for line in stdout.splitlines() if line.startswith("sleeper ")]
    return {row[1]: row[3] for row in rows if len(row) >= 4}


def test_default_fastmcp_server_passes_every_gating_scenario(tmp_path):
    """FastMCP on 127.0.0.1 with its default transport security passes all five scenarios."""
    proc = _run(_server(tmp_path, "None"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _verdicts(proc.stdout) == {
        "server-initialize": "PASS",
        "ping": "PASS",
        "tools-list": "PASS",
        "dns-rebinding-protection": "PASS",
        "server-sse-multiple-streams": "PASS",
    }


def test_server_without_dns_rebinding_protection_fails_the_gate(tmp_path):
    """Switching Host/Origin validation off makes dns-rebinding-protection fail and exit 1."""
    security = "TransportSecuritySettings(enable_dns_rebinding_protection=False)"
    proc = _run(_server(tmp_path, security), "ping", "dns-rebinding-protection")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert _verdicts(proc.stdout) == {"ping": "PASS", "dns-rebinding-protection": "FAIL"}
    assert "localhost-host-rebinding-rejected" in proc.stdout


def test_server_that_exits_at_startup_is_reported_with_its_log(tmp_path):
    """A target that dies before answering HTTP fails the run and its output is quoted."""
    crash = tmp_path / "crash.py"
    crash.write_text("import sys\nprint('refusing to start: bad config')\nsys.exit(3)\n")
    proc = _run(crash, "ping")
    assert proc.returncode == 1
    assert "exited with 3" in proc.stdout
    assert "refusing to start: bad config" in proc.stdout


def test_unknown_target_is_a_usage_error():
    """--target accepts only sleeper, memory or all."""
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--target", "nonsense"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 2
    assert "invalid choice" in proc.stderr
