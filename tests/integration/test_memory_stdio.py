"""robot-mcp-memory over stdio: the default transport, logs on stderr, MCP alone on stdout."""

from __future__ import annotations

import json
import os
import sys

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

pytestmark = pytest.mark.slow


async def test_stdio_save_find_and_store_closed_on_exit(tmp_path):
    """Over stdio a save is findable, and after the client leaves the data is on disk."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_", "MEMORY_"))}
    env.update(MEMORY_DATA_DIR=str(tmp_path), ROBOT_ID="stdio-bot")
    params = StdioServerParameters(command=sys.executable, args=["-m", "robot_mcp_memory"], env=env)
    doc = "---\nid: stack-crates\ntitle: Stack the crates\n---\n\n## Steps\n1. Heaviest first.\n"
    with (tmp_path / "stderr.log").open("w") as errlog:
        with anyio.fail_after(60):
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                init = await session.initialize()
                saved = await session.call_tool("save_process", {"markdown": doc})
                found = await session.call_tool("find_processes", {"query": "stack crates"})
    assert init.serverInfo.name == "memory"
    assert json.loads(saved.content[0].text)["robot"] == "stdio-bot"
    assert json.loads(found.content[0].text)["processes"][0]["id"] == "stack-crates"
    events = [json.loads(line) for line in (tmp_path / "stderr.log").read_text().splitlines()]
    assert any(e["event"] == "tool_call" and e["tool"] == "save_process" for e in events)
    assert (tmp_path / "index.db").exists()
    assert events[-1]["event"] == "memory_server_stopped"  # stdin EOF closes the store
