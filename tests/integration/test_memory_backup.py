"""Issue 22, item 1: ``robot-mcp-memory backup`` on a live server, and ``restore``.

Real server processes over SSE, the console script run as a child process, real SQLite
files in the test's temp dir. The backup runs while writers save documents, record
outcomes and register robots; the restored store must be one consistent point: SQLite's
integrity check passes, every document's index rows agree with its row, the per-owner
statistics agree with each other, and what was there before the backup began is in it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import anyio
import pytest

pytestmark = pytest.mark.slow


def cli(data_dir: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``python -m robot_mcp_memory ARGV`` with ``MEMORY_DATA_DIR=data_dir``, to its end."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_", "MEMORY_"))}
    env["MEMORY_DATA_DIR"] = str(data_dir)
    return subprocess.run(
        [sys.executable, "-m", "robot_mcp_memory", *argv],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def doc(id: str, n: int) -> str:
    return (
        f"---\nid: {id}\ntitle: deliver parcel round {n}\ntask_pattern: deliver the parcel\n"
        f"---\n\n## Steps\n1. take the parcel, round {n} word{n}\n2. bring it to the desk\n"
    )


def rows(path: Path, sql: str) -> list[tuple]:
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        return db.execute(sql).fetchall()


def check_consistent(index: Path) -> None:
    """The checks of one consistent point of ``index.db``."""
    assert rows(index, "PRAGMA integrity_check") == [("ok",)]
    # Every document's index entry is its row (same rowid, same text), and nothing else.
    assert rows(
        index,
        "SELECT count(*) FROM processes AS p LEFT JOIN processes_fts AS f ON f.rowid = p.rowid "
        "WHERE f.rowid IS NULL OR f.body IS NOT p.body OR f.title IS NOT p.title",
    ) == [(0,)]
    assert rows(index, "SELECT count(*) FROM processes_fts") == rows(
        index, "SELECT count(*) FROM processes"
    )
    assert rows(index, "SELECT count(*) FROM processes_lengths") == rows(
        index, "SELECT count(*) FROM processes"
    )
    # The per-owner statistics are written in the save's transaction: they agree.
    assert rows(index, "SELECT count(*) FROM processes_postings") == rows(
        index, "SELECT coalesce(sum(docs), 0) FROM processes_owner_terms"
    )


async def test_a_backup_taken_while_writers_save_restores_to_one_consistent_point(
    spawn, mcp_call, tmp_path
):
    server = spawn(transport="sse")
    registered: list[str] = []
    saved_before: set[str] = set()
    stop = anyio.Event()
    backup_started = anyio.Event()

    async def writer(w: int) -> None:
        async with server.session() as session:
            n = 0
            while not stop.is_set():
                id = f"w{w}-{n % 15}"
                out = await mcp_call(session, "save_process", markdown=doc(id, n))
                assert "error" not in out, out
                await mcp_call(session, "record_outcome", id=id, success=n % 3 != 0)
                robot = f"bot-{w}-{n}"
                await mcp_call(session, "register_robot", robot_id=robot)
                registered.append(robot)
                if not backup_started.is_set():
                    saved_before.add(id)
                n += 1

    dest = tmp_path / "backup"
    result: list[subprocess.CompletedProcess[str]] = []
    robots_before: list[str] = []

    async def take_backup() -> None:
        while len(registered) < 30:
            await anyio.sleep(0.05)
        robots_before.extend(registered)
        backup_started.set()
        result.append(await anyio.to_thread.run_sync(cli, server.data_dir, "backup", str(dest)))
        await anyio.sleep(0.5)  # writes go on after the backup, too
        stop.set()

    async with anyio.create_task_group() as tg:
        for w in range(3):
            tg.start_soon(writer, w)
        tg.start_soon(take_backup)

    done = result[0]
    assert done.returncode == 0, done.stderr
    assert "backup done" in done.stdout
    assert "index.db: copying" in done.stdout
    manifest = json.loads((dest / "backup.json").read_text())
    robots_in_backup = {r[0] for r in rows(dest / "index.db", "SELECT robot_id FROM fleet_robots")}
    # Monotone: all that was registered before the backup began is in it; nothing that was
    # never registered is; writes after it are not all in it (it is a point, not the end).
    assert set(robots_before) <= robots_in_backup <= set(registered)
    assert len(robots_in_backup) < len(registered)
    ids_in_backup = {r[0] for r in rows(dest / "index.db", "SELECT id FROM processes")}
    assert saved_before <= ids_in_backup
    assert manifest["files"]["index.db"]["counts"]["fleet_robots"] == len(robots_in_backup)
    check_consistent(dest / "index.db")

    # restore refuses the directory the live server holds ...
    refused = cli(server.data_dir, "restore", str(dest), "--force")
    assert refused.returncode == 2
    assert "in use" in refused.stderr
    assert "Stop the server" in refused.stderr
    assert "Traceback" not in refused.stderr
    server.stop()

    # ... and restores into a new directory, which a server then serves.
    restored = tmp_path / "restored"
    back = cli(restored, "restore", str(dest))
    assert back.returncode == 0, back.stderr
    assert "restore done" in back.stdout
    check_consistent(restored / "index.db")
    assert {r[0] for r in rows(restored / "index.db", "SELECT id FROM processes")} == ids_in_backup
    again = spawn(transport="sse", data_dir=restored)
    async with again.session() as session:
        found = await mcp_call(session, "find_processes", query="deliver the parcel", k=5)
        assert found["processes"], found
        robots = await mcp_call(session, "list_robots")
        assert {r["robot_id"] for r in robots["robots"]} == robots_in_backup


async def test_a_backup_holds_what_is_still_in_the_wal(spawn, mcp_call, tmp_path):
    """The issue's finding: a copy of index.db held 0 robots and 0 processes."""
    server = spawn(transport="sse")
    async with server.session() as session:
        for robot in ("rap-1", "rap-2", "rap-3"):
            await mcp_call(session, "register_robot", robot_id=robot)
        await mcp_call(session, "save_process", markdown=doc("fetch-parcel", 1))
    assert (server.data_dir / "index.db-wal").stat().st_size > 0
    dest = tmp_path / "b1"
    done = cli(server.data_dir, "backup", str(dest))
    assert done.returncode == 0, done.stderr
    assert rows(dest / "index.db", "SELECT count(*) FROM fleet_robots") == [(3,)]
    assert rows(dest / "index.db", "SELECT id FROM processes") == [("fetch-parcel",)]
    assert not (dest / "index.db-wal").exists()

    # A second backup into the same directory is refused, the first one untouched.
    again = cli(server.data_dir, "backup", str(dest))
    assert again.returncode == 2
    assert "not an empty directory" in again.stderr
    assert rows(dest / "index.db", "SELECT count(*) FROM fleet_robots") == [(3,)]


def test_restore_refuses_a_damaged_backup_and_an_existing_store(tmp_path):
    data = tmp_path / "data"
    made = cli(data, "backup", str(tmp_path / "nothing"))
    assert made.returncode == 2
    assert "no index.db" in made.stderr
    # A store made by a short server-less open: the lock is free.
    from robot_mcp_memory.backends.sqlite._schema import open_index

    open_index(data).close()
    dest = tmp_path / "b"
    assert cli(data, "backup", str(dest)).returncode == 0
    target = tmp_path / "target"
    assert cli(target, "restore", str(dest)).returncode == 0
    again = cli(target, "restore", str(dest))
    assert again.returncode == 2
    assert "--force" in again.stderr
    forced = cli(target, "restore", str(dest), "--force")
    assert forced.returncode == 0, forced.stderr
    assert any(p.name.startswith("index.db.before-restore-") for p in target.iterdir())
    with (dest / "index.db").open("r+b") as f:
        f.seek(200)
        f.write(b"\xff" * 16)
    damaged = cli(tmp_path / "other", "restore", str(dest))
    assert damaged.returncode == 2
    assert "does not match its manifest" in damaged.stderr
    assert not (tmp_path / "other" / "index.db").exists()


def test_a_second_server_on_the_same_directory_is_refused(spawn, run_memory_server):
    """The lock restore and load respect is the one a serving server holds."""
    server = spawn(transport="sse")
    second = run_memory_server({"MEMORY_DATA_DIR": str(server.data_dir)})
    assert second.returncode == 2
    assert "in use" in second.stderr
    assert "memory.lock" in second.stderr
    assert "Traceback" not in second.stderr
    holder = (server.data_dir / "memory.lock").read_text()
    assert f"pid={server.proc.pid}" in holder


def test_restore_refuses_a_backup_file_that_is_a_symlink(tmp_path):
    """A backup's ``index.db`` linking to a database elsewhere (its digest right) is
    refused, not followed; nothing is restored."""
    from robot_mcp_memory.backends.sqlite._schema import open_index

    data = tmp_path / "data"
    open_index(data).close()
    dest = tmp_path / "b"
    assert cli(data, "backup", str(dest)).returncode == 0
    (dest / "index.db").rename(tmp_path / "elsewhere.db")
    (dest / "index.db").symlink_to(tmp_path / "elsewhere.db")
    target = tmp_path / "target"
    refused = cli(target, "restore", str(dest))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "is a symbolic link" in refused.stderr
    assert refused.stderr.count("\n") == 1
    assert not (target / "index.db").exists()
