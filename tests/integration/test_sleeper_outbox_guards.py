"""The durable outbox's guards, through real sleeper processes (issue 18, findings 7-9).

- One process per outbox file: a second sleeper on the file of a running one is refused
  at start with one line naming the file and the holder's pid, while the first keeps
  running and delivering; SIGKILL of the holder releases the file for the next start.
- A damaged outbox (cut short by 100 bytes) is refused at open with one line and exit
  code 1, no traceback, and nothing it held is sent.
- A full disk: ``RLIMIT_FSIZE`` on the child with ``SIGXFSZ`` ignored, so its writes past
  the limit fail with ``EFBIG`` (a real write failure at the file boundary, no patching).
  No event is sent before its row is in the file; failed writes are counted in the
  poster's stats and logged once per episode; after kill -9 and a restart every event the
  receiver saw is in the file, and each task's seqs run without a gap.

Each sleeper is ``examples/sleeper.py`` in a child process over real SSE, posting to
fake_rvc under uvicorn on a free loopback port.
"""

from __future__ import annotations

import json
import os
import re
import resource
import sqlite3
import subprocess
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
FULL_DISK_POSTER = Path(__file__).with_name("_full_disk_poster.py")
# Runs argv[1:] with SIGXFSZ ignored (kept across exec): once the test lowers the child's
# RLIMIT_FSIZE, its writes past the limit fail with EFBIG, as on a full disk, instead of
# the signal killing it.
IGNORE_SIGXFSZ = (
    "import os, signal, sys\n"
    "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])\n"
)


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


def sleeper(
    rvc: FakeRvcServer, outbox: Path, *, argv: list[str] | None = None, **env: str
) -> ServiceProcess:
    """A sleeper on ``outbox`` (not started); ``argv`` replaces ``python sleeper.py``."""
    port = free_port()
    return ServiceProcess(
        "sleeper",
        argv or [sys.executable, str(SLEEPER)],
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


# -- a full disk ----------------------------------------------------------------------------


def event_ids_in(outbox: Path) -> set[str]:
    with closing(sqlite3.connect(outbox)) as conn:
        return {r[0] for r in conn.execute("SELECT event_id FROM outbox_events")}


def test_failed_writes_are_counted_logged_once_and_nothing_unwritten_is_sent(tmp_path):
    """The poster in a child whose outbox stops growing: what it tells, what it sends."""
    outbox = tmp_path / "outbox.db"
    with FakeRvcServer({"sleeper": SECRET}) as rvc:
        child = subprocess.Popen(
            [sys.executable, str(FULL_DISK_POSTER), rvc.events_url, SECRET, str(outbox)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert child.stdin is not None
            assert child.stdout is not None
            failing = json.loads(child.stdout.readline() or "{}")
            received_while_failing = len(rvc.state.events())
            child.stdin.write("go\n")
            child.stdin.flush()
            recovered = json.loads(child.stdout.readline() or "{}")
            closed = json.loads(child.stdout.readline() or "{}")
            _, log = child.communicate(timeout=60)
        finally:
            child.kill()
            child.wait()
        assert child.returncode == 0, log
        received = rvc.state.events()

    # While the file cannot grow: counted, visible, nothing unwritten sent.
    stats = failing["stats"]
    assert stats["outbox_failing"] is True, failing
    assert stats["outbox_unwritten"] == 200, failing
    assert stats["outbox_write_failures"] >= 3, failing
    assert (stats["sent"], stats["queued"], stats["dropped"]) == (20, 200, 0), failing
    assert "outbox='failing'" in failing["repr"]
    assert received_while_failing == 20
    # Once it can: every event written, then sent; the episode over, its count kept.
    stats = recovered["stats"]
    assert (stats["outbox_failing"], stats["outbox_unwritten"]) == (False, 0), recovered
    assert stats["sent"] == 220
    assert stats["outbox_write_failures"] >= failing["stats"]["outbox_write_failures"]
    assert "outbox='ok'" in recovered["repr"]
    assert (closed["stats"]["dropped"], closed["stats"]["kept"]) == (0, 0)
    # One line when the episode starts, one when it ends, whatever the number of failures.
    assert log.count("outbox_write_failing") == 1, log
    assert log.count("outbox_write_recovered") == 1, log
    assert log.count("store_hot_write_failed") <= 1, log
    assert "Traceback" not in log
    # The delivery.md promise: every event the receiver saw is in the file.
    assert len(received) == 220
    assert {e.event_id for e in received} <= event_ids_in(outbox)
    for task_id in ("sleep-a", "sleep-b"):
        seqs, _ = seqs_and_types(rvc, task_id)
        assert seqs == list(range(1, len(seqs) + 1))


def test_events_still_unwritten_at_close_are_counted_dropped_never_sent(tmp_path):
    """Closed while its outbox still cannot grow: the unwritten events are tried once more,
    then counted dropped with one ERROR line; none of them was sent, none is in the file."""
    outbox = tmp_path / "outbox.db"
    with FakeRvcServer({"sleeper": SECRET}) as rvc:
        argv = [sys.executable, str(FULL_DISK_POSTER), rvc.events_url, SECRET, str(outbox)]
        done = subprocess.run(
            [*argv, "close-while-failing"], capture_output=True, text=True, timeout=120
        )
        received = rvc.state.events()
    assert done.returncode == 0, done.stderr
    failing, closed = (json.loads(line) for line in done.stdout.splitlines())
    assert failing["stats"]["outbox_unwritten"] == 200
    stats = closed["stats"]
    assert (stats["sent"], stats["dropped"], stats["kept"]) == (20, 200, 0), closed
    assert done.stderr.count("outbox_events_lost") == 1, done.stderr
    assert "events=200" in done.stderr
    assert len(received) == 20
    in_file = event_ids_in(outbox)
    assert {e.event_id for e in received} <= in_file
    assert len(in_file) == 20


async def test_a_sleeper_on_a_full_disk_sends_only_what_is_in_its_outbox(tmp_path):
    """kill -9 while its outbox cannot grow, restart with room: no event the receiver saw is
    missing from the file, and each task's seqs run on without a gap to INTERRUPTED.

    The limit is set on the running sleeper (``prlimit``) at its outbox's size then, so no
    later write to the outbox fits (a limit set at start would let small writes through
    after large ones failed, and the test would depend on which).
    """
    outbox = tmp_path / "outbox.db"
    argv = [sys.executable, "-c", IGNORE_SIGXFSZ, str(SLEEPER)]
    with FakeRvcServer({"sleeper": SECRET}) as rvc:
        first = sleeper(rvc, outbox, argv=argv, LOG_LEVEL="WARNING").start(ready_timeout_s=30)
        try:
            assert first.pid is not None
            async with session_to(url_of(first)) as session:
                task = await call(session, "sleep_task", duration_s=60, tick_s=0.02)
                task_id = task["task_id"]
                await rvc.state.wait_for_async(
                    lambda r: len(r.events(task_id=task_id)) >= 20 or None, 30
                )
                limit = max(os.path.getsize(f"{outbox}{tail}") for tail in ("", "-wal"))
                hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
                resource.prlimit(first.pid, resource.RLIMIT_FSIZE, (limit, hard))
                deadline = time.monotonic() + 30
                while not re.search(r"store_hot_\w*failed", first.log_text()):
                    assert time.monotonic() < deadline, first.log_tail()
                    time.sleep(0.1)
                time.sleep(1.0)  # an attempt already under way may still land
                seen_at_failure = len(rvc.state.events(task_id=task_id))
                # The server keeps serving; the task keeps running; nothing more is sent.
                later = await call(session, "sleep_task", duration_s=60, tick_s=0.05)
                time.sleep(1.5)
                info = await call(session, "get_task", task_id=task_id)
                assert info["state"] == "running"
                assert len(rvc.state.events(task_id=task_id)) == seen_at_failure
                assert rvc.state.events(task_id=later["task_id"]) == []
        finally:
            first.kill()
            log = first.log_text()
            first.close()
        assert log.count("outbox_write_failing") == 1, log
        assert log.count("store_hot_write_failed") == 1, log
        assert "Traceback" not in log
        assert max(os.path.getsize(f"{outbox}{tail}") for tail in ("", "-wal")) <= limit
        received_before = {e.event_id for e in rvc.state.events()}
        assert received_before <= event_ids_in(outbox)

        # The task started while the disk was full is in the journal only if its task
        # row found room; either way a receiver hears of it consistently after a restart.
        with closing(sqlite3.connect(outbox)) as conn:
            journalled = {r[0] for r in conn.execute("SELECT task_id FROM tasks")}
        assert task_id in journalled
        reported = [t for t in (task_id, later["task_id"]) if t in journalled]

        second = sleeper(rvc, outbox).start(ready_timeout_s=30)
        try:
            for tid in reported:
                await rvc.state.wait_for_event_async(tid, "task_failed", 30)
            async with session_to(url_of(second)) as session:
                marker = await call(session, "sleep_task", duration_s=0.1, tick_s=0.1)
                await rvc.state.wait_for_event_async(marker["task_id"], "task_done", 30)
                after = await call(session, "get_task", task_id=later["task_id"])
        finally:
            second.close()
        for tid in reported:
            seqs, types = seqs_and_types(rvc, tid)
            assert seqs == list(range(1, len(seqs) + 1)), (tid, seqs)
            assert types[-1] == "task_failed"
            assert types.count("task_failed") == 1
            assert "task_done" not in types
            last = rvc.state.events(task_id=tid, type="task_failed")[0]
            assert last.payload["error_code"] == "INTERRUPTED"
        if later["task_id"] not in journalled:
            assert rvc.state.events(task_id=later["task_id"]) == []
            assert after.get("error") == "not_found"
        assert {e.event_id for e in rvc.state.events()} <= event_ids_in(outbox)
