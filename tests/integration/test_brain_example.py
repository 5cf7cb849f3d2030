"""examples/brain.py (the README's receiver example) runs as written, against the real sleeper.

Both are child processes on free loopback ports, configured only through the environment
the README names. A task that asks for confirmation is answered by the example's handler;
every event of the task reaches the handler once, in seq order, and they are exactly the
server's ``get_task_events``. And the receiver suite passes the example as it stands.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.sse import sse_client

from robot_mcp_kit.testing import ServiceProcess, free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

REPO = Path(__file__).resolve().parents[2]
SECRET = "brain-example-secret"
LINE = re.compile(r"^sleeper (\S+) #(\d+) (\w+) \((\w+)\)( redelivered)?$")


async def call(url: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    async with sse_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool(tool, args)
    data: dict[str, Any] = json.loads(result.content[0].text)  # type: ignore[union-attr]
    return data


def test_the_readme_brain_answers_a_question_and_gets_every_event_once(tmp_path: Path) -> None:
    brain_port, sleeper_port = free_port(), free_port()
    mcp_url = f"http://127.0.0.1:{sleeper_port}/sse"
    brain_log = (tmp_path / "brain.log").open("wb")
    brain = ServiceProcess(
        "brain",
        [sys.executable, str(REPO / "examples" / "brain.py")],
        brain_port,
        env={
            "RVC_SERVERS": "sleeper",
            "RVC_SLEEPER_SECRET": SECRET,
            "RVC_SLEEPER_MCP_URL": mcp_url,
            "BRAIN_PORT": str(brain_port),
            "BRAIN_STATE": str(tmp_path / "brain.db"),
        },
        output=brain_log,
        cwd=tmp_path,
    )
    sleeper = ServiceProcess(
        "sleeper",
        [sys.executable, str(REPO / "examples" / "sleeper.py")],
        sleeper_port,
        env={
            "MCP_TRANSPORT": "sse",
            "MCP_PORT": str(sleeper_port),
            "RVC_CALLBACK_URL": f"http://127.0.0.1:{brain_port}/api/agent/events",
            "RVC_EVENT_SECRET": SECRET,
            "RVC_OUTBOX": "",
        },
    )
    try:
        sleeper.start(ready_timeout_s=60)
        brain.start(ready_timeout_s=60)
        args = {"duration_s": 0.6, "tick_s": 0.2, "confirm": True}
        task_id = asyncio.run(call(mcp_url, "sleep_task", args))["task_id"]
        deadline = time.monotonic() + 60
        while f"{task_id} #" not in brain.log_text() or "task_done" not in brain.log_text():
            assert time.monotonic() < deadline, brain.log_text()[-3000:]
            time.sleep(0.1)
        expected = asyncio.run(call(mcp_url, "get_task_events", {"task_id": task_id}))
    finally:
        brain.close()
        sleeper.close()
        brain_log.close()
    seen = [
        (int(m[2]), m[3], m[4])
        for m in (LINE.match(line) for line in (tmp_path / "brain.log").read_text().splitlines())
        if m is not None and m[1] == task_id
    ]
    assert [(seq, type_) for seq, type_, _ in seen] == [
        (e["seq"], e["type"]) for e in expected["events"]
    ]
    types = [type_ for _, type_, _ in seen]
    assert types[:2] == ["input_required", "input_answered"]
    assert types[-1] == "task_done"
    assert {source for *_, source in seen} <= {"post", "repair", "reconcile"}


def test_the_readme_brain_passes_the_receiver_suite(tmp_path: Path) -> None:
    """robot-mcp-conformance receiver against examples/brain.py as the README starts it (two
    secrets of a rotation, no inspection hook): every clause passes or is not checked."""
    port = free_port()
    brain = ServiceProcess(
        "brain",
        [sys.executable, str(REPO / "examples" / "brain.py")],
        port,
        env={
            "RVC_SERVERS": "sleeper",
            "RVC_SLEEPER_SECRET": SECRET,
            "RVC_SLEEPER_SECRET_NEXT": "brain-example-next",
            "BRAIN_PORT": str(port),
            "BRAIN_STATE": str(tmp_path / "brain.db"),
        },
        cwd=tmp_path,
    )
    argv = [sys.executable, "-m", "robot_mcp_conformance", "receiver"]
    argv += [f"http://127.0.0.1:{port}/api/agent/events", "--secret", SECRET]
    argv += ["--second-secret", "brain-example-next", "--server-name", "sleeper"]
    argv += ["--report-json", str(tmp_path / "report.json"), "-p", "robot_mcp_conformance.plugin"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONFORMANCE_", "COVERAGE_"))}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    try:
        brain.start(ready_timeout_s=60)
        done = subprocess.run(
            argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=150, check=False
        )
    finally:
        brain.close()
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    report = json.loads((tmp_path / "report.json").read_text())
    statuses = {c["id"]: c["status"] for c in report["clauses"]}
    assert set(statuses.values()) <= {"passed", "not_checked", "warning"}, statuses
    assert statuses["receiver.unknown-type-acknowledged"] == "passed"
