"""Kill -9 during registry and lesson writes leaves the old or the new state (issue 10).

A real child process loops over three kinds of write — a compound registry change in one
transaction (rename a group, move a robot, replace its meta), a single registration, and a
lesson recorded with an outcome and a note — and is SIGKILLed at random moments, several
times over the same files. Each reopen must show every write whole: the compound change all
or nothing, a registration's name and meta from the same call, a lesson whose params, count
and note agree; and nothing the child reported done may be missing.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from robot_mcp_memory.backends.sqlite import SqliteBackend
from robot_mcp_memory.backends.sqlite._schema import open_index
from robot_mcp_memory.fleet import FleetService
from robot_mcp_memory.params import ScopedParams

pytestmark = pytest.mark.slow

CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from robot_mcp_memory.backends.sqlite._schema import open_index
    from robot_mcp_memory.backends.sqlite import SqliteBackend
    from robot_mcp_memory.fleet import FleetService
    from robot_mcp_memory.params import ScopedParams

    data = Path(sys.argv[1])
    store = open_index(data)
    backend = SqliteBackend(data, store)
    fleet = FleetService(backend.fleet)
    lessons = ScopedParams(fleet, backend.lessons)
    if fleet.get_group("g-a") is None:
        with store.transaction():
            fleet.upsert_group("g-a", name="rev0")
            fleet.upsert_group("g-b")
            fleet.register_robot("rap-1", group_id="g-b", meta={"rev": 0})
            fleet.set_self_improve(True)
    i = fleet.get_robot("rap-1").meta["rev"]
    found = lessons.recall("rap-1", "grasp", place="t1")["lesson"]
    n = found["success_count"] if found else 0
    print(f"ready {i} {n}", flush=True)
    while True:
        i += 1
        with store.transaction():  # one unit: rename + move + meta
            fleet.upsert_group("g-a", name=f"rev{i}")
            fleet.set_group("rap-1", "g-a" if i % 2 else "g-b")
            fleet.set_robot_meta("rap-1", {"rev": i, "pad": "x" * 2000})
        fleet.register_robot(f"r-{i % 5}", name=f"n{i}", meta={"rev": i, "pad": "y" * 1000})
        n += 1
        lessons.record(
            "rap-1", "grasp", {"rev": n, "pad": "z" * 2000}, place="t1",
            success=True, note=f"rev{n}", private=True,
        )
        print(f"{i} {n}", flush=True)
    """
)


def _run_and_kill(data: Path, delay_s: float) -> tuple[tuple[int, int], tuple[int, int]]:
    """Start the child, let it write for ``delay_s`` after it is ready, SIGKILL it.

    Returns ``(start, done)``: the (registry, lesson) revisions it started from, and the
    last ones it reported done.
    """
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[list[str]] = []
    ready = threading.Event()

    def read() -> None:
        assert child.stdout is not None
        for line in child.stdout:
            if line.endswith("\n"):  # a line cut by the kill reports nothing
                lines.append(line.split())
                ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert ready.wait(30), "the child never became ready"
        time.sleep(delay_s)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
        reader.join(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
        stderr = child.stderr.read() if child.stderr else ""
        for stream in (child.stdout, child.stderr):
            if stream is not None:
                stream.close()
    assert child.returncode == -signal.SIGKILL, stderr
    assert lines[0][0] == "ready", (lines[:3], stderr)
    start = (int(lines[0][1]), int(lines[0][2]))
    done = (int(lines[-1][0]), int(lines[-1][1])) if len(lines) > 1 else start
    return start, done


def _integrity(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


def _check(data: Path, done: tuple[int, int]) -> tuple[int, int]:
    """Every write is whole and nothing reported done is lost; return the stored revisions."""
    assert _integrity(data / "index.db") == "ok"
    if not (data / "lessons.db").exists():  # killed before the first lesson
        assert done[1] == 0
    else:
        assert _integrity(data / "lessons.db") == "ok"
    store = open_index(data)
    backend = SqliteBackend(data, store)
    fleet = FleetService(backend.fleet)
    lessons = ScopedParams(fleet, backend.lessons)
    try:
        robot = fleet.get_robot("rap-1")
        group = fleet.get_group("g-a")
        assert robot is not None
        assert group is not None
        rev = robot.meta["rev"]
        # The compound change: all three parts from the same iteration, or none of them.
        assert group.name == f"rev{rev}"
        assert robot.group_id == ("g-a" if rev % 2 else "g-b")
        assert done[0] <= rev <= done[0] + 1
        for other in fleet.list_robots():
            if other.robot_id.startswith("r-"):
                assert other.name == f"n{other.meta['rev']}"
        listed = lessons.list_lessons("rap-1")
        if not listed:
            assert done[1] == 0
            return rev, 0
        [lesson] = listed
        n = lesson["success_count"]
        assert lesson["params"]["rev"] == n
        assert lesson["note"] == f"rev{n}"
        assert lesson["scope"] == "robot:rap-1"
        assert done[1] <= n <= done[1] + 1
        return rev, n
    finally:
        lessons.close()
        store.close()


def test_sigkill_leaves_old_or_new_state(tmp_path: Path) -> None:
    """Four SIGKILLs at random moments: each reopen sees whole writes only, and the files
    keep moving forward from where the killed child left them."""
    seed = random.randrange(1_000_000)
    rng = random.Random(seed)
    data = tmp_path / "data"
    stored = (0, 0)
    for cycle in range(4):
        start, done = _run_and_kill(data, rng.uniform(0.05, 0.6))
        assert start == stored, f"seed={seed} cycle={cycle}"
        stored = _check(data, done)
    assert stored[0] > 0
    assert stored[1] > 0
