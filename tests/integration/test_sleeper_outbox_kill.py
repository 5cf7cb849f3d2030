"""kill -9 of a real sleeper with the durable outbox on (issue 14, restart semantics).

The sleeper runs as a child process over real SSE with ``RVC_OUTBOX`` set, posting to
fake_rvc under uvicorn on a free loopback port. Three long tasks are started and a short
one finishes; fake_rvc then answers 503 for a moment, so events pile up undelivered; the
child is SIGKILLed mid-task and started again on the same outbox file. The receiver must
end with, per long task: every event once or more, in ``seq`` order with no gap, then
exactly one terminal event — ``task_failed`` ``INTERRUPTED``, ``recoverable``, with the
next ``seq`` — and ``get_task`` must answer the last known state, not ``not_found``.

The same scenario without ``RVC_OUTBOX`` is run as the control and must be judged broken
by the same checks (no terminal event, ``not_found``): the test can fail.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.sse import sse_client

from fake_rvc import FakeRvcServer
from robot_mcp_kit.testing import ServiceProcess, free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

REPO = Path(__file__).resolve().parents[2]
SLEEPER = REPO / "examples" / "sleeper.py"
SECRET = "outbox-kill-secret"
LONG_TASKS = 3


@asynccontextmanager
async def session_to(url: str) -> AsyncIterator[ClientSession]:
    async with sse_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert not result.isError, result.content
    data: dict[str, Any] = json.loads(result.content[0].text)  # type: ignore[union-attr]
    return data


def start_sleeper(rvc: FakeRvcServer, outbox: Path | None) -> tuple[ServiceProcess, str]:
    port = free_port()
    env = {
        "MCP_TRANSPORT": "sse",
        "MCP_HOST": "127.0.0.1",
        "MCP_PORT": str(port),
        "RVC_CALLBACK_URL": rvc.events_url,
        "RVC_EVENT_SECRET": SECRET,
        "RVC_OUTBOX": "" if outbox is None else str(outbox),
        "PYTHONUNBUFFERED": "1",
    }
    proc = ServiceProcess("sleeper", [sys.executable, str(SLEEPER)], port, env=env)
    proc.start(ready_timeout_s=30)
    return proc, f"http://127.0.0.1:{port}/sse"


def kill_9(proc: ServiceProcess) -> None:
    proc.kill()  # SIGKILL: no shutdown code runs
    proc.close()


def problems_after_restart(
    rvc: FakeRvcServer, task_ids: list[str], states: dict[str, dict[str, Any]]
) -> list[str]:
    """Everything the receiver's record and get_task say is wrong; [] when all holds."""
    found: list[str] = []
    for task_id in task_ids:
        timeline = rvc.state.timeline(task_id)
        if timeline is None:
            found.append(f"{task_id}: no event at all")
            continue
        seqs = timeline.seqs
        if seqs != list(range(1, len(seqs) + 1)):
            found.append(f"{task_id}: seqs not 1..n in arrival order: {seqs}")
        terminal = [e for e in timeline.events if e.type in ("task_done", "task_failed")]
        if len(terminal) != 1:
            found.append(f"{task_id}: {len(terminal)} terminal events")
        else:
            last = terminal[0]
            if last is not timeline.events[-1]:
                found.append(f"{task_id}: the terminal event is not the last one")
            if last.type != "task_failed" or last.payload.get("error_code") != "INTERRUPTED":
                found.append(f"{task_id}: terminal is {last.type} {last.payload}")
            if last.payload.get("recoverable") is not True:
                found.append(f"{task_id}: INTERRUPTED is not recoverable")
        bad = [a for a in timeline.anomalies if a["kind"] != "duplicate"]
        if bad:
            found.append(f"{task_id}: anomalies {bad}")
        info = states[task_id]
        failure = info.get("failure") or {}
        if info.get("state") != "failed" or failure.get("error_code") != "INTERRUPTED":
            found.append(f"{task_id}: get_task after restart answered {info}")
    return found


async def run_scenario(tmp_path: Path, *, outbox: bool) -> tuple[list[str], dict[str, Any]]:
    """Start, fault, kill -9, restart; return (problems, facts) for the long tasks."""
    path = tmp_path / "sleeper-outbox.db" if outbox else None
    with FakeRvcServer({"sleeper": SECRET}) as rvc:
        first, url = start_sleeper(rvc, path)
        try:
            async with session_to(url) as session:
                short = await call(session, "sleep_task", duration_s=0.2, tick_s=0.1)
                long_ids = [
                    (await call(session, "sleep_task", duration_s=120, tick_s=0.1))["task_id"]
                    for _ in range(LONG_TASKS)
                ]
                await rvc.state.wait_for_event_async(short["task_id"], "task_done", 20)
                for task_id in long_ids:
                    rvc.state.wait_for(
                        lambda r, t=task_id: len(r.events(task_id=t)) >= 3 or None, 20
                    )
                # The receiver fails for a while: events pile up undelivered, then the kill.
                rvc.state.inject_fault("sleeper", status=503, count=1_000_000)
                time.sleep(1.0)
        finally:
            kill_9(first)
        rvc.state.clear_faults()
        before_restart = {t: len(rvc.state.events(task_id=t)) for t in long_ids}

        second, url = start_sleeper(rvc, path)
        try:
            if outbox:
                # Before any client connects: an idle restarted server sends what it
                # recovered at start (issue 19, finding 3), not when a new task posts.
                for task_id in long_ids:
                    await rvc.state.wait_for_event_async(task_id, "task_failed", 30)
            async with session_to(url) as session:
                states = {t: await call(session, "get_task", task_id=t) for t in long_ids}
                short_after = await call(session, "get_task", task_id=short["task_id"])
                # Anything still to come for the killed tasks would be in flight by now.
                marker = await call(session, "sleep_task", duration_s=0.1, tick_s=0.1)
                await rvc.state.wait_for_event_async(marker["task_id"], "task_done", 30)
        finally:
            second.close()
        facts = {
            "before_restart": before_restart,
            "after_restart": {t: len(rvc.state.events(task_id=t)) for t in long_ids},
            "short_after": short_after,
            "rejected": [
                a for a in rvc.state.attempts() if a.outcome not in ("accepted", "duplicate")
            ],
        }
        return problems_after_restart(rvc, long_ids, states), facts


async def test_kill_9_mid_task_then_restart_reports_each_task_once(tmp_path):
    """With the outbox: every event in order, no gap, one INTERRUPTED per task, get_task knows."""
    problems, facts = await run_scenario(tmp_path, outbox=True)
    assert problems == []
    # Events held back by the 503s before the kill arrived after the restart.
    for task_id, count in facts["after_restart"].items():
        assert count > facts["before_restart"][task_id] + 1, facts
    assert facts["short_after"]["state"] == "succeeded"
    assert all(a.outcome == "fault" for a in facts["rejected"])


async def test_without_the_outbox_the_same_checks_fail(tmp_path):
    """The control: no journal, so no terminal event and get_task says not_found."""
    problems, facts = await run_scenario(tmp_path, outbox=False)
    assert any("0 terminal events" in p for p in problems), problems
    assert any("not_found" in p for p in problems), problems
    assert facts["short_after"].get("error") == "not_found"
