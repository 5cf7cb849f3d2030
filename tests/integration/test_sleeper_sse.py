"""The §5 sleeper as a real subprocess over real SSE, posting signed events to fake_rvc.

Acceptance (kit spec §7): the sleeper runs as an SSE server and, with RVC_CALLBACK_URL
pointed at a receiver, emits correctly signed events in order. The receiver is fake_rvc
under uvicorn on a free loopback port: it verifies every signature, dedupes and tracks seq.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.sse import sse_client

from fake_rvc import FakeRvcServer
from robot_mcp_kit.models import TaskEvent
from robot_mcp_kit.testing import ServiceProcess, free_port

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SLEEPER_PATH = REPO / "examples" / "sleeper.py"
SECRET = "sleeper-integration-secret"


class EventReceiver:
    """The test's view of fake_rvc: verified events per task, and what was not accepted."""

    def __init__(self, server: FakeRvcServer) -> None:
        self.server = server
        self.url = server.events_url

    def events(self, task_id: str) -> list[TaskEvent]:
        """Verified events of one task, stored once each, in arrival order."""
        return [r.event for r in self.server.state.events(task_id=task_id)]

    def rejected(self) -> list[Any]:
        """Every POST fake_rvc did not accept (bad signature, bad body, ...)."""
        return [
            a for a in self.server.state.attempts() if a.outcome not in ("accepted", "duplicate")
        ]

    async def wait_for(self, task_id: str, type_: str, timeout_s: float = 20.0) -> TaskEvent:
        """Long-poll fake_rvc until a verified event of ``type_`` for ``task_id`` arrived."""
        received = await self.server.state.wait_for_event_async(task_id, type_, timeout_s)
        return received.event


@pytest.fixture(scope="module")
def event_receiver() -> Iterator[EventReceiver]:
    """fake_rvc on a free loopback port, knowing the sleeper's secret."""
    with FakeRvcServer({"sleeper": SECRET}) as server:
        yield EventReceiver(server)


@pytest.fixture(scope="module")
def sleeper_url(event_receiver: EventReceiver) -> Iterator[str]:
    """Start examples/sleeper.py with MCP_TRANSPORT=sse on a free port; yield its SSE URL."""
    port = free_port()
    sleeper = ServiceProcess(
        "sleeper",
        [sys.executable, str(SLEEPER_PATH)],
        port,
        env={
            "MCP_TRANSPORT": "sse",
            "MCP_HOST": "127.0.0.1",
            "MCP_PORT": str(port),
            "RVC_CALLBACK_URL": event_receiver.url,
            "RVC_EVENT_SECRET": SECRET,
            "PYTHONUNBUFFERED": "1",
        },
    )
    try:
        sleeper.start(ready_timeout_s=30)
        yield f"http://127.0.0.1:{port}/sse"
    finally:
        sleeper.close()


@asynccontextmanager
async def session_to(url: str) -> AsyncIterator[ClientSession]:
    async with sse_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert not result.isError, result.content
    return json.loads(result.content[0].text)  # type: ignore[union-attr]


# -- scenarios ----------------------------------------------------------------------------


async def test_eta_below_task_yields_signed_ordered_events(sleeper_url, event_receiver):
    """Signed events, seq 1..n, the eta_below trigger once, unknown trigger never, task_done."""
    trigger = {"type": "eta_below", "seconds": 0.25}
    async with session_to(sleeper_url) as session:
        info = await call(
            session,
            "sleep_task",
            duration_s=0.5,
            tick_s=0.1,
            triggers=[trigger, {"type": "warp_drive"}],
        )
        assert info["state"] == "running"
        task_id = info["task_id"]
        done = await event_receiver.wait_for(task_id, "task_done")
        final = await call(session, "get_task", task_id=task_id)

    events = event_receiver.events(task_id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [e.type for e in events].count("progress") == 5
    fired = [e for e in events if e.type == "trigger_fired"]
    assert len(fired) == 1
    assert fired[0].payload["trigger"] == trigger
    assert fired[0].payload["eta_s"] < 0.25
    assert events[-1] == done
    assert done.payload == {"result": {"slept_s": 0.5}}
    assert all(e.server == "sleeper" and e.tool == "sleep_task" for e in events)
    assert event_receiver.rejected() == []
    timeline = event_receiver.server.state.timeline(task_id)
    assert timeline is not None
    assert timeline.anomalies == []
    assert final["state"] == "succeeded"


async def test_cancelled_task_emits_no_task_failed(sleeper_url, event_receiver):
    """cancel_task over MCP: answers cancelled, get_task agrees, no terminal event is posted."""
    async with session_to(sleeper_url) as session:
        info = await call(session, "sleep_task", duration_s=60, tick_s=0.1)
        task_id = info["task_id"]
        await event_receiver.wait_for(task_id, "progress")
        cancelled = await call(session, "cancel_task", task_id=task_id)
        again = await call(session, "cancel_task", task_id=task_id)
        final = await call(session, "get_task", task_id=task_id)
        running = await call(session, "list_tasks", states=["running"])
        # The poster sends from one FIFO queue: once a later task's task_done has arrived,
        # anything the cancelled task could have posted has arrived too.
        marker = await call(session, "sleep_task", duration_s=0.1, tick_s=0.1)
        await event_receiver.wait_for(marker["task_id"], "task_done")

    # cancel_task answers the whole TaskInfo (structured results, issue 12); idempotent.
    assert (cancelled["task_id"], cancelled["state"]) == (task_id, "cancelled")
    assert again == cancelled
    assert final["state"] == "cancelled"
    assert task_id not in [t["task_id"] for t in running["tasks"]]
    types = [e.type for e in event_receiver.events(task_id)]
    assert "task_failed" not in types
    assert "task_done" not in types
    assert event_receiver.rejected() == []


async def test_failing_task_emits_task_failed(sleeper_url, event_receiver):
    """fail=True: a signed task_failed with FAKE_FAILURE ends the task's events."""
    async with session_to(sleeper_url) as session:
        info = await call(session, "sleep_task", duration_s=0.2, tick_s=0.1, fail=True)
        task_id = info["task_id"]
        failed = await event_receiver.wait_for(task_id, "task_failed")
        final = await call(session, "get_task", task_id=task_id)

    assert failed.payload["error_code"] == "FAKE_FAILURE"
    assert failed.payload["suggestions"] == ["retry_without_fail"]
    events = event_receiver.events(task_id)
    assert [e.type for e in events] == ["progress", "progress", "task_failed"]
    assert [e.seq for e in events] == [1, 2, 3]
    assert final["state"] == "failed"
    assert final["failure"]["error_code"] == "FAKE_FAILURE"
    assert event_receiver.rejected() == []


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"MCP_TRANSPORT": "carrier-pigeon"}, "MCP_TRANSPORT must be one of"),
        ({"MCP_TRANSPORT": "sse", "MCP_PORT": "ninety"}, "MCP_PORT must be an integer"),
        (
            {"MCP_TRANSPORT": "sse", "RVC_CALLBACK_URL": "http://127.0.0.1:9/x"},
            "RVC_EVENT_SECRET",
        ),
    ],
)
def test_bad_configuration_exits_with_one_line(overrides, fragment):
    """Misconfiguration stops the sleeper at once with a one-line reason, not a traceback."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_", "RVC_"))}
    env.update(overrides)
    proc = subprocess.run(
        [sys.executable, str(SLEEPER_PATH)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode != 0
    assert fragment in proc.stderr
    assert "Traceback" not in proc.stderr
