"""Gap repair end to end (issue 14): fake_rvc fills a seq gap through get_task_events.

The sleeper runs as a real child process over SSE; fake_rvc (uvicorn, loopback) is in
repair mode for it. Two posts are acknowledged and lost on purpose (an injected 200 that
stores nothing: a receiver that "missed" them), so the next event shows a gap; fake_rvc
then fetches the missing events from the sleeper's ``get_task_events`` and marks them
repaired. Without repair mode the same run keeps its gap (the control).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.sse import sse_client

from fake_rvc import FakeRvcServer
from robot_mcp_kit.testing import ServiceProcess, free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

REPO = Path(__file__).resolve().parents[2]
SLEEPER = REPO / "examples" / "sleeper.py"
SECRET = "repair-secret"


async def run(repair: bool) -> dict[str, Any]:
    port = free_port()
    mcp_url = f"http://127.0.0.1:{port}/sse"
    options = {"repair_urls": {"sleeper": mcp_url}} if repair else {}
    with FakeRvcServer({"sleeper": SECRET}, **options) as rvc:
        sleeper = ServiceProcess(
            "sleeper",
            [sys.executable, str(SLEEPER)],
            port,
            env={
                "MCP_TRANSPORT": "sse",
                "MCP_PORT": str(port),
                "RVC_CALLBACK_URL": rvc.events_url,
                "RVC_EVENT_SECRET": SECRET,
                "RVC_OUTBOX": "",
            },
        )
        sleeper.start(ready_timeout_s=30)
        try:
            async with sse_client(mcp_url) as (r, w), ClientSession(r, w) as session:
                await session.initialize()
                result = await session.call_tool("sleep_task", {"duration_s": 3.0, "tick_s": 0.2})
                task_id = json.loads(result.content[0].text)["task_id"]  # type: ignore[union-attr]
                rvc.state.wait_for(lambda s: len(s.events(task_id=task_id)) >= 4 or None, 20)
                rvc.state.inject_fault("sleeper", status=200, count=2)  # acked, then lost
                await rvc.state.wait_for_event_async(task_id, "task_done", 30)
                if repair:
                    rvc.state.wait_for(
                        lambda s: (t := s.timeline(task_id)) is not None and not t.missing_seqs,
                        20,
                    )
            timeline = rvc.state.timeline(task_id)
            assert timeline is not None
            async with httpx.AsyncClient() as client:
                served = (await client.get(f"{rvc.url}/api/fake/tasks/{task_id}")).json()
            return {
                "timeline": timeline,
                "served": served,
                "lost_ids": [
                    a.event_id
                    for a in rvc.state.attempts()
                    if a.outcome == "fault" and a.task_id == task_id
                ],
                "counters": rvc.state.counters(),
            }
        finally:
            sleeper.close()


async def test_a_gap_is_filled_through_get_task_events_and_marked_repaired():
    """The two lost events come back, same ids, marked repaired; nothing is missing."""
    got = await run(repair=True)
    timeline = got["timeline"]
    gaps = [a for a in timeline.anomalies if a["kind"] == "gap"]
    assert len(gaps) == 1
    assert len(gaps[0]["missing"]) == 2
    assert timeline.repaired_seqs == gaps[0]["missing"]
    assert timeline.missing_seqs == []
    repaired_ids = [e.event_id for e in timeline.events if e.repaired]
    assert sorted(repaired_ids) == sorted(got["lost_ids"])
    assert got["served"]["repaired_seqs"] == gaps[0]["missing"]
    assert got["counters"]["repaired"] == 2
    assert sorted(timeline.seqs) == list(range(1, len(timeline.seqs) + 1))


async def test_without_repair_mode_the_gap_stays():
    """The control: the same run without repair mode keeps two missing seqs."""
    got = await run(repair=False)
    assert len(got["timeline"].missing_seqs) == 2
    assert got["timeline"].repaired_seqs == []
