"""A server built as the kit spec shows (no ``TaskRuntime``) reports its interrupted tasks
at the next start, with nobody calling it (issue 32, finding 6).

``_spec_pattern_server.py`` builds ``EventPoster`` and ``TaskManager`` at import and serves
with ``mcp.run("sse")``; with ``RVC_OUTBOX`` set it runs a long task, is killed with -9 and
started again. No client connects to the second process, and no new task starts: the
interrupted task's ``task_failed`` (``INTERRUPTED``) must still reach fake_rvc (under
uvicorn on a loopback port), with the task's next seq.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.sse import sse_client

from fake_rvc import FakeRvcServer
from robot_mcp_kit.testing import ServiceProcess, free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

SERVER = Path(__file__).with_name("_spec_pattern_server.py")
SECRET = "spec-pattern-secret"


def spec_server(rvc: FakeRvcServer, outbox: Path) -> ServiceProcess:
    port = free_port()
    return ServiceProcess(
        "spec-pattern server",
        [sys.executable, str(SERVER)],
        port,
        env={
            "MCP_PORT": str(port),
            "RVC_CALLBACK_URL": rvc.events_url,
            "RVC_EVENT_SECRET": SECRET,
            "RVC_OUTBOX": str(outbox),
            "PYTHONUNBUFFERED": "1",
        },
    )


async def start_task(proc: ServiceProcess, **arguments: Any) -> str:
    url = f"http://127.0.0.1:{proc.port}/sse"
    async with sse_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool("sleep_task", arguments)
        assert not result.isError, result.content
        return str(json.loads(result.content[0].text)["task_id"])  # type: ignore[union-attr]


async def test_an_idle_restart_reports_the_task_kill_9_interrupted(tmp_path: Path) -> None:
    """After kill -9 and a restart nobody calls, fake_rvc gets the task's INTERRUPTED."""
    outbox = tmp_path / "outbox.db"
    with FakeRvcServer({"sleeper": SECRET}) as rvc:
        first = spec_server(rvc, outbox).start(ready_timeout_s=30)
        try:
            task_id = await start_task(first, duration_s=120, tick_s=0.1)
            await rvc.state.wait_for_async(
                lambda r: len(r.events(task_id=task_id)) >= 3 or None, 30
            )
        finally:
            first.kill()
            first.close()
        seen = len(rvc.state.events(task_id=task_id))

        with spec_server(rvc, outbox).start(ready_timeout_s=30) as again:
            try:
                failed = await rvc.state.wait_for_event_async(task_id, "task_failed", 20)
            except Exception:
                pytest.fail(
                    "the restarted server never reported the interrupted task\n"
                    + again.log_tail(30)
                )
        assert failed.payload["error_code"] == "INTERRUPTED"
        assert failed.payload["recoverable"] is True
        timeline = rvc.state.timeline(task_id)
        assert timeline is not None
        assert timeline.seqs == list(range(1, len(timeline.seqs) + 1))
        assert len(timeline.seqs) >= seen
        assert [e.type for e in timeline.events][-1] == "task_failed"
