"""The durable outbox's guards, through real sleeper processes (issue 18, findings 7 and 9).

- One process per outbox file: a second sleeper on the file of a running one is refused
  at start with one line naming the file and the holder's pid, while the first keeps
  running and delivering; SIGKILL of the holder releases the file for the next start.
- A damaged outbox (cut short by 100 bytes) is refused at open with one line and exit
  code 1, no traceback, and nothing it held is sent.

Each sleeper is ``examples/sleeper.py`` in a child process over real SSE, posting to
fake_rvc under uvicorn on a free loopback port.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, closing
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
SECRET = "outbox-guard-secret"


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


def sleeper(rvc: FakeRvcServer, outbox: Path, **env: str) -> ServiceProcess:
    """A sleeper on ``outbox`` (not started)."""
    port = free_port()
    return ServiceProcess(
        "sleeper",
        [sys.executable, str(SLEEPER)],
        port,
        env={
            "MCP_TRANSPORT": "sse",
            "MCP_HOST": "127.0.0.1",
            "MCP_PORT": str(port),
            "RVC_CALLBACK_URL": rvc.events_url,
            "RVC_EVENT_SECRET": SECRET,
            "RVC_OUTBOX": str(outbox),
            "PYTHONUNBUFFERED": "1",
            **env,
        },
    )


def url_of(proc: ServiceProcess) -> str:
    return f"http://127.0.0.1:{proc.port}/sse"


def refusal(proc: ServiceProcess, timeout_s: float = 60) -> tuple[int, list[str], str]:
    """Launch a sleeper that must refuse to start: (exit code, its output lines, all of it)."""
    proc.launch()
    assert proc.proc is not None
    code = proc.proc.wait(timeout=timeout_s)
    text = proc.log_text()
    proc.close()
    return code, [line for line in text.splitlines() if line.strip()], text


def seqs_and_types(rvc: FakeRvcServer, task_id: str) -> tuple[list[int], list[str]]:
    timeline = rvc.state.timeline(task_id)
    assert timeline is not None, f"no event of {task_id}"
    return timeline.seqs, [e.type for e in timeline.events]


# -- one process per outbox file ------------------------------------------------------------


async def test_a_second_process_on_the_same_outbox_is_refused_and_the_first_goes_on(tmp_path):
    outbox = tmp_path / "outbox.db"
    with FakeRvcServer({"sleeper": SECRET}) as rvc:
        first = sleeper(rvc, outbox).start(ready_timeout_s=30)
        try:
            async with session_to(url_of(first)) as session:
                task = await call(session, "sleep_task", duration_s=3, tick_s=0.1)
                task_id = task["task_id"]
                await rvc.state.wait_for_async(
                    lambda r: len(r.events(task_id=task_id)) >= 3 or None, 20
                )

                code, lines, text = refusal(sleeper(rvc, outbox))
                assert code != 0
                assert "Traceback" not in text
                assert len(lines) == 1, text
                assert str(outbox) in lines[0]
                assert f"process {first.pid} " in lines[0]
                assert str(outbox) + ".lock" in lines[0]

                # The first goes on: the task finishes, nobody reported it INTERRUPTED.
                await rvc.state.wait_for_event_async(task_id, "task_done", 30)
                assert (await call(session, "get_task", task_id=task_id))["state"] == "succeeded"
                more = await call(session, "sleep_task", duration_s=0.3, tick_s=0.1)
                await rvc.state.wait_for_event_async(more["task_id"], "task_done", 30)
            seqs, types = seqs_and_types(rvc, task_id)
            assert seqs == list(range(1, len(seqs) + 1))
            assert types[-1] == "task_done"
            assert "task_failed" not in types

            # SIGKILL of the holder releases the file: the next start takes it.
            async with session_to(url_of(first)) as session:
                running = await call(session, "sleep_task", duration_s=120, tick_s=0.1)
                await rvc.state.wait_for_async(
                    lambda r: len(r.events(task_id=running["task_id"])) >= 2 or None, 20
                )
        finally:
            first.kill()
            first.close()
        again = sleeper(rvc, outbox).start(ready_timeout_s=30)
        try:
            interrupted = await rvc.state.wait_for_event_async(
                running["task_id"], "task_failed", 30
            )
            assert interrupted.payload["error_code"] == "INTERRUPTED"
        finally:
            again.close()
        assert rvc.state.events(task_id=task_id, type="task_failed") == []


# -- a damaged outbox -----------------------------------------------------------------------


async def pending_outbox(rvc: FakeRvcServer, outbox: Path) -> str:
    """Leave ``outbox`` holding undelivered events after a clean stop; return the task id."""
    rvc.state.inject_fault("sleeper", status=503, count=1_000_000)
    proc = sleeper(rvc, outbox, LOG_LEVEL="WARNING").start(ready_timeout_s=30)
    try:
        async with session_to(url_of(proc)) as session:
            task = await call(session, "sleep_task", duration_s=0.5, tick_s=0.05)
            await rvc.state.wait_for_async(lambda r: len(r.attempts()) >= 3 or None, 20)
            time.sleep(0.6)  # the task has finished: its every event is queued
    finally:
        proc.stop(grace_s=30)  # SIGTERM: the close grace, then the file is closed whole
        proc.close()
    rvc.state.clear_faults()
    assert not Path(f"{outbox}-wal").exists()  # closed whole: every page in the file
    assert len(pending_bodies(outbox)) >= 5
    return str(task["task_id"])


def pending_bodies(outbox: Path) -> list[bytes]:
    with closing(sqlite3.connect(f"{outbox.as_uri()}?mode=ro", uri=True)) as conn:
        rows = conn.execute("SELECT body FROM outbox_events WHERE state = 'pending' ORDER BY id")
        return [bytes(r[0]) for r in rows]


async def test_an_outbox_cut_short_is_refused_at_start_with_one_line(tmp_path):
    outbox = tmp_path / "outbox.db"
    with FakeRvcServer({"sleeper": SECRET}) as rvc:
        task_id = await pending_outbox(rvc, outbox)
        with outbox.open("r+b") as f:
            f.truncate(outbox.stat().st_size - 100)

        code, lines, text = refusal(sleeper(rvc, outbox))
        assert code == 1
        assert "Traceback" not in text
        assert len(lines) == 1, text
        assert lines[0].startswith(f"sleeper: {outbox} is not a database")
        assert "cut short" in lines[0]
        assert rvc.state.events(task_id=task_id) == []  # nothing it held went out


async def test_an_outbox_with_a_damaged_event_body_is_refused_at_start(tmp_path):
    """Bytes of a pending event's body overwritten in place (same length): the SQLite file
    is well formed, the event is not; the row check refuses it before anything is sent."""
    outbox = tmp_path / "outbox.db"
    with FakeRvcServer({"sleeper": SECRET}) as rvc:
        task_id = await pending_outbox(rvc, outbox)
        body = pending_bodies(outbox)[0]
        data = outbox.read_bytes()
        assert body in data
        outbox.write_bytes(data.replace(body, body[:10] + b"\x00" * 30 + body[40:]))

        code, lines, text = refusal(sleeper(rvc, outbox))
        assert code == 1
        assert "Traceback" not in text
        assert len(lines) == 1, text
        assert str(outbox) in lines[0]
        assert "damaged" in lines[0]
        assert rvc.state.events(task_id=task_id) == []


def test_a_file_that_is_no_database_is_one_line_too(tmp_path):
    outbox = tmp_path / "outbox.db"
    outbox.write_text("not a database\n" * 100)
    proc = ServiceProcess(
        "sleeper",
        [sys.executable, str(SLEEPER)],
        free_port(),
        env={
            "RVC_CALLBACK_URL": "http://127.0.0.1:9/api/agent/events",
            "RVC_EVENT_SECRET": SECRET,
            "RVC_OUTBOX": str(outbox),
            "MCP_TRANSPORT": "sse",
        },
    )
    code, lines, text = refusal(proc)
    assert code == 1
    assert "Traceback" not in text
    assert lines == [
        f"sleeper: {outbox} is not a database this store can open: it does not start with "
        f"the SQLite header. Restore outbox.db from a backup, or move it aside (e.g. to "
        f"outbox.db.broken); the service creates a fresh, empty one at that path on its "
        f"next start."
    ]
    assert os.path.getsize(outbox) == len("not a database\n" * 100)
