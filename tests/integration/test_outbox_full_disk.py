"""A full disk under the durable outbox does not stop delivery (issue 32, finding 3).

Delivery comes first: an event whose outbox row cannot be written is still sent, in order
with its task's other events, counted as not durable, and written when the disk has room
again, so a later crash can still recover it. Real write failures, no patching:

- a real full file system where the sandbox allows one: a 2 MiB tmpfs mounted in a user
  and mount namespace (``unshare --user --map-root-user --mount``, no root needed where
  unprivileged user namespaces are on), filled by a ballast file, so writes fail with
  ``ENOSPC``; freed by deleting the ballast;
- everywhere: ``RLIMIT_FSIZE`` on the child at its outbox's size with ``SIGXFSZ`` ignored,
  so writes past it fail with ``EFBIG``; freed by lifting the limit.

The poster runs in a child (``_full_disk_poster.py``) or is ``examples/sleeper.py`` over
real SSE; the receiver is fake_rvc under uvicorn on a free loopback port.
"""

from __future__ import annotations

import functools
import json
import os
import re
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from fake_rvc import FakeRvcServer
from robot_mcp_kit.testing import ServiceProcess, free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

REPO = Path(__file__).resolve().parents[2]
SLEEPER = REPO / "examples" / "sleeper.py"
SECRET = "outbox-full-disk-secret"
FULL_DISK_POSTER = Path(__file__).with_name("_full_disk_poster.py")
# Mounts a 2 MiB tmpfs on $0 inside a new user and mount namespace, then runs "$@" there.
TMPFS = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c"]
MOUNT_THEN_EXEC = 'mount -t tmpfs -o size=2m tmpfs "$0" && exec "$@"'
# Runs argv[1:] with SIGXFSZ ignored (kept across exec): once the test lowers the child's
# RLIMIT_FSIZE, its writes past the limit fail with EFBIG instead of the signal killing it.
IGNORE_SIGXFSZ = (
    "import os, signal, sys\n"
    "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])\n"
)


@functools.cache
def tmpfs_refusal() -> str | None:
    """Why a tmpfs cannot be mounted in a user namespace here, or None when it can."""
    try:
        with tempfile.TemporaryDirectory() as where:
            done = subprocess.run(
                [*TMPFS, MOUNT_THEN_EXEC, where, "true"], capture_output=True, text=True, timeout=10
            )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare cannot run: {exc}"
    if done.returncode != 0:
        return f"no tmpfs in a user namespace here: {done.stderr.strip()}"
    return None


@pytest.fixture(params=["tmpfs", "rlimit"])
def disk(request: pytest.FixtureRequest) -> str:
    """How the outbox's disk gets full: a real tmpfs (where permitted) or RLIMIT_FSIZE."""
    if request.param == "tmpfs" and (why := tmpfs_refusal()) is not None:
        pytest.skip(f"{why}; the rlimit case covers the same code")
    return str(request.param)


def child_argv(rvc: FakeRvcServer, directory: Path, disk: str, *mode: str) -> list[str]:
    argv = [sys.executable, str(FULL_DISK_POSTER), rvc.events_url, SECRET, str(directory), disk]
    if disk == "tmpfs":
        return [*TMPFS, MOUNT_THEN_EXEC, str(directory), *argv, *mode]
    return [*argv, *mode]


def in_order(rvc: FakeRvcServer, task_id: str, count: int) -> None:
    """The receiver got ``task_id``'s seqs 1..count, in that order, without an anomaly."""
    timeline = rvc.state.timeline(task_id)
    assert timeline is not None, f"no event of {task_id}"
    assert timeline.seqs == list(range(1, count + 1)), (task_id, timeline.seqs)
    assert [e.seq for e in rvc.state.events(task_id=task_id)] == timeline.seqs
    assert timeline.anomalies == [], timeline.anomalies


def test_new_events_reach_the_receiver_in_order_while_the_disk_is_full(tmp_path, disk):
    """50 events posted on a full disk all reach a healthy receiver, in order, counted not
    durable with one ERROR line; once space returns they are written (durable again), the
    counters and one WARNING say so."""
    directory = tmp_path / "fs"
    directory.mkdir()
    with FakeRvcServer({"sleeper": SECRET}) as rvc:
        child = subprocess.Popen(
            child_argv(rvc, directory, disk),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert child.stdin is not None
            assert child.stdout is not None
            full = json.loads(child.stdout.readline() or "{}")
            received_while_full = rvc.state.events()
            in_order(rvc, "sleep-a", 45)
            in_order(rvc, "sleep-b", 25)
            child.stdin.write("go\n")
            child.stdin.flush()
            recovered = json.loads(child.stdout.readline() or "{}")
            closed = json.loads(child.stdout.readline() or "{}")
            _, log = child.communicate(timeout=60)
        finally:
            child.kill()
            child.communicate()  # reaps it and closes its pipes
        assert child.returncode == 0, log
        received = rvc.state.events()

    # While the disk is full: every new event delivered, its row not in the file.
    assert len(received_while_full) == 70, full
    stats = full["stats"]
    assert (stats["sent"], stats["queued"], stats["dropped"]) == (70, 0, 0), full
    assert stats["outbox_failing"] is True, full
    assert 1 <= stats["outbox_not_durable"] <= 50, full
    assert stats["outbox_unwritten"] == stats["outbox_not_durable"], full
    assert stats["outbox_write_failures"] >= 3, full
    assert "outbox='failing'" in full["repr"]
    assert f"outbox_not_durable={stats['outbox_not_durable']}" in full["repr"]
    assert len(full["rows"]) == 70 - stats["outbox_not_durable"]
    # Space back: every row written, each in the state it reached (delivered).
    stats = recovered["stats"]
    assert (stats["outbox_failing"], stats["outbox_unwritten"]) == (False, 0), recovered
    assert stats["outbox_written_late"] == stats["outbox_not_durable"] >= 1, recovered
    assert "outbox='ok'" in recovered["repr"]
    assert recovered["rows"] == {e.event_id: "delivered" for e in received}
    # In acceptance order: each task's rows in seq order (a restart sends them so).
    where = {e.event_id: (e.task_id, e.seq) for e in received}
    for task_id in ("sleep-a", "sleep-b"):
        seqs = [where[i][1] for i in recovered["rows"] if where[i][0] == task_id]
        assert seqs == sorted(seqs), (task_id, seqs)
    stats = closed["stats"]
    assert (stats["sent"], stats["dropped"], stats["kept"]) == (70, 0, 0), closed
    assert len(received) == 70
    # One ERROR when the episode starts, one WARNING when it ends.
    assert log.count("outbox_write_failing") == 1, log
    assert "sent all the same" in log
    assert log.count("outbox_write_recovered") == 1, log
    assert "Traceback" not in log


def test_closed_while_the_disk_is_full_nothing_delivered_is_lost(tmp_path, disk):
    """Closed with the disk still full: the events were delivered already; their rows are
    tried once more and the one line at close says the file lacks them."""
    directory = tmp_path / "fs"
    directory.mkdir()
    with FakeRvcServer({"sleeper": SECRET}) as rvc:
        done = subprocess.run(
            child_argv(rvc, directory, disk, "close-while-full"),
            capture_output=True,
            text=True,
            timeout=120,
        )
        received = rvc.state.events()
    assert done.returncode == 0, done.stderr
    full, closed = (json.loads(line) for line in done.stdout.splitlines())
    assert len(received) == 70
    in_order(rvc, "sleep-a", 45)
    in_order(rvc, "sleep-b", 25)
    stats = closed["stats"]
    assert (stats["sent"], stats["dropped"], stats["kept"]) == (70, 0, 0), closed
    not_durable = full["stats"]["outbox_not_durable"]
    assert not_durable >= 1
    assert len(closed["rows"]) == 70 - not_durable
    assert done.stderr.count("outbox_rows_unwritten") == 1, done.stderr
    assert "outbox_events_lost" not in done.stderr
    assert "Traceback" not in done.stderr


def test_a_settlement_that_fails_while_the_poster_idles_is_written_once_space_returns(
    tmp_path, disk
):
    """The disk fills while an event's post is held; its 2xx then comes and its
    settlement cannot be written; nothing else is posted. Space back, the settlement is
    written without a new event (a crash would not send the delivered event again), the
    outbox is healthy again, and one ERROR and one WARNING say so."""
    directory = tmp_path / "fs"
    directory.mkdir()
    with FakeRvcServer({"sleeper": SECRET}) as rvc:
        rvc.state.inject_fault("sleeper", delay_s=2.0, task_id="held")
        done = subprocess.run(
            child_argv(rvc, directory, disk, "idle-mark"),
            capture_output=True,
            text=True,
            timeout=120,
        )
        received = rvc.state.events()
    assert done.returncode == 0, done.stderr
    full, idle, closed = (json.loads(line) for line in done.stdout.splitlines())
    held = full["held"]
    assert [e.event_id for e in received if e.task_id == "held"] == [held]
    assert full["stats"]["sent"] == 21, full
    assert full["stats"]["outbox_failing"] is True, full
    assert full["rows"][held] == "pending", full
    assert idle["stats"]["posted"] == 21, idle
    assert idle["stats"]["outbox_failing"] is False, idle
    assert "outbox='ok'" in idle["repr"]
    assert idle["rows"][held] == "delivered", idle  # a restart does not send it again
    assert (closed["stats"]["dropped"], closed["stats"]["kept"]) == (0, 0), closed
    assert done.stderr.count("outbox_write_failing") == 1, done.stderr
    assert done.stderr.count("outbox_write_recovered") == 1, done.stderr
    assert "Traceback" not in done.stderr


# -- a sleeper on a full disk, then a crash after space returned ------------------------------


def event_ids_in(outbox: Path) -> set[str]:
    with closing(sqlite3.connect(outbox)) as conn:
        return {r[0] for r in conn.execute("SELECT event_id FROM outbox_events")}


def sleeper(rvc: FakeRvcServer, outbox: Path, argv: list[str], **env: str) -> ServiceProcess:
    port = free_port()
    return ServiceProcess(
        "sleeper",
        argv,
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


async def call(url: str, tool: str, **arguments: Any) -> dict[str, Any]:
    from mcp import ClientSession
    from mcp.client.sse import sse_client

    async with sse_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool(tool, arguments)
    assert not result.isError, result.content
    data: dict[str, Any] = json.loads(result.content[0].text)  # type: ignore[union-attr]
    return data


def wait_for_log(proc: ServiceProcess, pattern: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not re.search(pattern, proc.log_text()):
        assert time.monotonic() < deadline, (pattern, proc.log_tail())
        time.sleep(0.1)


async def test_a_sleeper_delivers_on_a_full_disk_and_a_crash_after_space_returns_loses_nothing(
    tmp_path,
):
    """The sleeper's outbox stops growing (``prlimit`` at its size): its task's events keep
    reaching the receiver in order. Space returns, the rows are written; kill -9 and a
    restart: every event the receiver saw is in the file and the task's seqs run on without
    a gap or a reorder to INTERRUPTED."""
    outbox = tmp_path / "outbox.db"
    argv = [sys.executable, "-c", IGNORE_SIGXFSZ, str(SLEEPER)]
    with FakeRvcServer({"sleeper": SECRET}) as rvc:
        first = sleeper(rvc, outbox, argv, LOG_LEVEL="WARNING").start(ready_timeout_s=30)
        try:
            assert first.pid is not None
            url = f"http://127.0.0.1:{first.port}/sse"
            task_id = (await call(url, "sleep_task", duration_s=60, tick_s=0.05))["task_id"]
            await rvc.state.wait_for_async(
                lambda r: len(r.events(task_id=task_id)) >= 10 or None, 30
            )
            limit = max(os.path.getsize(f"{outbox}{tail}") for tail in ("", "-wal"))
            hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
            resource.prlimit(first.pid, resource.RLIMIT_FSIZE, (limit, hard))
            wait_for_log(first, r"outbox_write_failing")
            seen_at_failure = len(rvc.state.events(task_id=task_id))
            # The disk is full; the task's events still go out, in order.
            await rvc.state.wait_for_async(
                lambda r: len(r.events(task_id=task_id)) >= seen_at_failure + 20 or None, 30
            )
            in_file_while_full = event_ids_in(outbox)
            sent_while_full = {e.event_id for e in rvc.state.events(task_id=task_id)}
            assert sent_while_full - in_file_while_full, "nothing was sent unwritten"
            resource.prlimit(first.pid, resource.RLIMIT_FSIZE, (hard, hard))
            wait_for_log(first, r"outbox_write_recovered")
            info = await call(url, "get_task", task_id=task_id)
            assert info["state"] == "running"
            seen_before_kill = {e.event_id for e in rvc.state.events(task_id=task_id)}
        finally:
            first.kill()
            log = first.log_text()
            first.close()
        assert log.count("outbox_write_failing") == 1, log
        assert log.count("outbox_write_recovered") == 1, log
        assert "Traceback" not in log
        assert seen_before_kill <= event_ids_in(outbox)

        second = sleeper(rvc, outbox, [sys.executable, str(SLEEPER)]).start(ready_timeout_s=30)
        try:
            await rvc.state.wait_for_event_async(task_id, "task_failed", 30)
        finally:
            second.close()
        timeline = rvc.state.timeline(task_id)
        assert timeline is not None
        assert timeline.seqs == list(range(1, len(timeline.seqs) + 1)), timeline.seqs
        assert [e.type for e in timeline.events][-1] == "task_failed"
        # At least once: a restart may send again an event whose 2xx the file did not
        # record (the mark was lost to the full disk, or the kill came first).
        assert {a["kind"] for a in timeline.anomalies} <= {"duplicate"}, timeline.anomalies
        (last,) = rvc.state.events(task_id=task_id, type="task_failed")
        assert last.payload["error_code"] == "INTERRUPTED"
        assert {e.event_id for e in rvc.state.events()} <= event_ids_in(outbox)
