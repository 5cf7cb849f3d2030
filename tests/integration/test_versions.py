"""One version (src/robot_mcp_kit/_version.py), reported everywhere (issue 12)."""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mcp.shared.memory import create_connected_server_and_client_session

from robot_mcp_kit import TaskManager, __version__
from robot_mcp_kit.fastmcp_ext import set_server_version
from robot_mcp_kit.testing import RecordingPoster

REPO = Path(__file__).resolve().parents[2]


def test_the_distribution_metadata_carries_the_one_version():
    """hatchling reads _version.py: the installed metadata says the same."""
    assert importlib.metadata.version("robot-mcp-kit") == __version__


@pytest.mark.parametrize(
    "argv",
    [
        ["fake-rvc", "--version"],
        ["robot-mcp-demo", "--version"],
        ["robot-mcp-conformance", "--version"],
        [sys.executable, str(REPO / "examples" / "sleeper.py"), "--version"],
    ],
    ids=["fake-rvc", "robot-mcp-demo", "robot-mcp-conformance", "sleeper"],
)
def test_every_command_reports_the_version(argv):
    """`--version` prints the command's name and the one version, exit 0."""
    command = shutil.which(argv[0]) or argv[0]
    proc = subprocess.run(
        [command, *argv[1:]], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith(f" {__version__}"), proc.stdout


async def test_server_info_version_is_the_kits():
    """set_server_version makes mcp 1.x FastMCP report our version, not the SDK's."""
    from mcp.server.fastmcp import FastMCP

    server = FastMCP("navigation")
    async with create_connected_server_and_client_session(server) as client:
        before = await client.initialize()
    assert before.serverInfo.version != __version__  # the SDK reports its own version
    set_server_version(server)
    manager = TaskManager("navigation", RecordingPoster())
    async with create_connected_server_and_client_session(server) as client:
        init = await client.initialize()
    await manager.aclose()
    assert init.serverInfo.version == __version__
