"""``robot-mcp-memory copy``: SQLite -> PostgreSQL -> SQLite through the CLI, verified.

The command runs in a subprocess (``python -m robot_mcp_memory copy ...``) against a real
PostgreSQL (the ``pg_url`` fixture) and real SQLite data directories.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from robot_mcp_kit.params import ParamStore, SqliteBackend
from robot_mcp_memory.__main__ import EXIT_CONFIG, EXIT_MISMATCH
from robot_mcp_memory.backends import storage_at
from robot_mcp_memory.backends.postgres import PgBackend
from robot_mcp_memory.backends.postgres._database import PgDatabase
from robot_mcp_memory.backends.postgres._lessons import PgParamBackend
from robot_mcp_memory.backends.postgres._schema import SCHEMA
from robot_mcp_memory.fleet import FleetService
from robot_mcp_memory.processes import ProcessDoc, ProcessService
from robot_mcp_memory.transfer import EXIT_MISMATCH as TRANSFER_EXIT_MISMATCH
from robot_mcp_memory.transfer import TABLES, Endpoint, table_sums


def _prepare_pg(url: str) -> None:
    database = PgDatabase(url)
    database.open(SCHEMA)
    database.close()


def _fill_sqlite(data: Path) -> None:
    """A store with documents (counters, notes, a shared one, text beyond ASCII) and their
    revisions (two documents edited, one deleted), a registry (groups with and without
    toggles, robots with meta) and lessons."""
    backend = storage_at(str(data)).open()
    processes = ProcessService(backend.processes, robot_id="rap-1")
    for i in range(12):
        processes.save(
            ProcessDoc(
                id=f"doc-{i:02d}",
                title=f"Pick the {['red', 'blue', 'grün'][i % 3]} cup from shelf {i}",
                task_pattern="pick * cup",
                tags=["pick", f"shelf-{i}"],
                robot=f"rap-{i % 3}",
                shared=i % 5 == 0,
                source_mission_id=f"m-{i}",
                body=f"# Steps\n1. go to shelf {i}\n2. grasp — gently ✓\n",
            )
        )
    for i in range(0, 12, 2):
        processes.record_outcome(f"doc-{i:02d}", success=i % 4 == 0, note=f"run {i}")
    for round in (2, 3):  # doc-01 at revision 3, its revisions 1 and 2 kept
        edited = processes.get("doc-01")
        assert edited is not None
        edited.body += f"{round}. check the cup — round {round}\n"
        processes.save(edited)
    edited = processes.get("doc-02")
    assert edited is not None
    edited.title = "Pick the grün cup, carefully"
    processes.save(edited)
    processes.delete("doc-11")  # gone, its last version kept as a revision...
    processes.save(  # ... and the id saved again: a second life
        ProcessDoc(id="doc-11", title="Stack the trays", robot="rap-1", body="# Steps\n1. stack\n")
    )
    fleet = FleetService(backend.fleet)
    fleet.upsert_group("line-3", name="Line 3", customer="ACME", factory="Lyon")
    fleet.upsert_group("line-4")
    fleet.set_self_improve(True)
    fleet.set_self_improve(False, "line-4")
    fleet.register_robot("rap-1", name="Rap", group_id="line-3", meta={"arm": "ur5", "z": 1.5})
    fleet.register_robot("rap-2", group_id="line-4", meta={"é": [1, None, True]})
    fleet.register_robot("rap-0")
    backend.close()
    lessons = SqliteBackend(data / "lessons.db")
    group = ParamStore(lessons, "group:line-3")
    group.record("grasp", {"dz": 0.01}, place="t1", robot="rap-1", success=True, note="ok")
    group.record("grasp", success=False, place="t1")
    ParamStore(lessons, "robot:rap-2").record("push", {"force": 3}, robot="rap-2")
    lessons.close()


def _copy(src: str, dst: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "robot_mcp_memory", "copy", "--from", src, "--to", dst],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _sums(where: str) -> dict[str, Any]:
    side = Endpoint(where, source=True)
    try:
        return table_sums(side.snapshot())
    finally:
        side.close()


def _printed(stdout: str) -> dict[str, tuple[int, int, str]]:
    found = {}
    for line in stdout.splitlines():
        m = re.fullmatch(r"(\w+)\s+(\d+)\s+(\d+)\s+([0-9a-f]{64})\s+ok", line)
        if m:
            found[m[1]] = (int(m[2]), int(m[3]), m[4])
    return found


def test_sqlite_to_postgres_and_back_is_exact(tmp_path: Path, pg_url: str) -> None:
    """SQLite -> PostgreSQL -> SQLite: every table's count and sha256 equal on all three,
    printed by the command; the copied store answers find from its rebuilt index."""
    first, last = tmp_path / "first", tmp_path / "last"
    _fill_sqlite(first)
    _prepare_pg(pg_url)
    there = _copy(str(first), pg_url)
    assert there.returncode == 0, there.stderr
    back = _copy(pg_url, str(last))
    assert back.returncode == 0, back.stderr

    original = _sums(str(first))
    assert {t: s.rows for t, s in original.items()} == {
        "processes": 12,
        "processes_revisions": 4,
        "fleet_groups": 2,
        "fleet_robots": 3,
        "fleet_settings": 1,
        "lessons": 2,
    }
    assert _sums(pg_url) == original
    assert _sums(str(last)) == original
    for out in (there.stdout, back.stdout):
        printed = _printed(out)
        assert set(printed) == set(TABLES)
        for table, (n_src, n_dst, digest) in printed.items():
            assert (n_src, n_dst, digest) == (original[table].rows,) * 2 + (original[table].sha256,)
        assert "copied and verified: 24 rows in 6 tables" in out
    assert "search index rebuilt for 12 documents" in back.stdout

    backend = storage_at(str(last)).open()
    copied = ProcessService(backend.processes)
    try:
        found = copied.find("pick the grün cup", k=3)
        assert found
        assert found[0].doc.id in {"doc-02", "doc-05", "doc-08"}
        # Every column came along, the lives of a re-created id included.
        life = backend.index.query("SELECT life FROM processes WHERE id = 'doc-11'")
        assert [r["life"] for r in life] == [2]
        kept = backend.index.query(
            "SELECT life, revision FROM processes_revisions WHERE doc_id = 'doc-11'"
        )
        assert [(r["life"], r["revision"]) for r in kept] == [(1, 1)]
        assert copied.get("doc-00").success_count == 1  # type: ignore[union-attr]
        # The history came along: revision numbers, kept versions, a deleted document's.
        assert [r.revision for r in copied.revisions("doc-01")] == [2, 1]
        first_version = copied.get_revision("doc-01", 1)
        assert first_version is not None
        assert "round 2" not in first_version.body
        assert copied.states(["doc-01"])["doc-01"].revision == 3
        state = copied.states(["doc-00"])["doc-00"]
        assert (state.recent, state.last_success is not None) == ("s", True)
        fleet = FleetService(backend.fleet)
        assert fleet.resolve("rap-2").where == "group:line-4"
        assert fleet.get_robot("rap-2").meta == {"é": [1, None, True]}  # type: ignore[union-attr]
    finally:
        backend.close()


def test_a_non_empty_destination_is_refused_untouched(tmp_path: Path, pg_url: str) -> None:
    """Copying into a store that holds anything is one line naming what it holds and how
    to proceed; the destination keeps exactly what it had."""
    first = tmp_path / "first"
    _fill_sqlite(first)
    _prepare_pg(pg_url)
    database = PgDatabase(pg_url)
    database.open(SCHEMA)
    FleetService(PgBackend(database).fleet).upsert_group("already-here")
    before = _sums(pg_url)
    done = _copy(str(first), pg_url)
    assert done.returncode == EXIT_CONFIG
    line = done.stderr.strip()
    assert "\n" not in line
    assert "is not empty (1 rows in fleet_groups)" in line
    assert "empty database" in line
    assert _sums(pg_url) == before
    assert PgParamBackend(database).count() == 0
    database.close()


def test_refusals_are_one_line(tmp_path: Path) -> None:
    """A source without index.db, or the same store on both sides: exit 2, one line."""
    missing = _copy(str(tmp_path / "nothing"), str(tmp_path / "dst"))
    assert missing.returncode == EXIT_CONFIG
    assert "holds no index.db" in missing.stderr
    assert missing.stderr.count("\n") == 1
    assert not (tmp_path / "dst").exists()
    _fill_sqlite(tmp_path / "same")
    same = _copy(str(tmp_path / "same"), str(tmp_path / "same" / "."))
    assert same.returncode == EXIT_CONFIG
    assert "name the same store" in same.stderr


def test_a_database_without_a_store_or_out_of_reach_is_refused(tmp_path: Path, pg_url: str) -> None:
    """An empty database as the source is refused and left empty (nothing created in
    it); an unreachable one is one line without its password."""
    empty = _copy(pg_url, str(tmp_path / "dst"))
    assert empty.returncode == EXIT_CONFIG
    assert "holds no memory store" in empty.stderr
    assert empty.stderr.count("\n") == 1
    with psycopg.connect(pg_url) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchone()
    assert tables == (0,)
    down = _copy("postgresql://robot:s3cret-pw@127.0.0.1:1/fleet", str(tmp_path / "dst"))
    assert down.returncode == EXIT_CONFIG
    assert "robot@127.0.0.1:1/fleet" in down.stderr
    assert "s3cret" not in down.stderr
    assert down.stderr.count("\n") == 1
    assert not (tmp_path / "dst").exists()


def test_help_explains_the_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "robot_mcp_memory", "copy", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0
    text = " ".join(done.stdout.split())  # argparse wraps lines where it likes
    for needle in ("--from SRC", "--to DST", "postgresql://", "must be empty", "sha256"):
        assert needle in text
    assert "with their revision history" in text
    assert TRANSFER_EXIT_MISMATCH == EXIT_MISMATCH


@pytest.mark.parametrize("table", ["fleet_robots", "lessons"])
def test_a_mismatch_is_reported_and_fails(tmp_path: Path, pg_url: str, table: str) -> None:
    """A destination that reads back differently (here: a trigger on the PostgreSQL side
    altering what is written) is a MISMATCH line and exit 3, not a silent success."""
    first = tmp_path / "first"
    _fill_sqlite(first)
    _prepare_pg(pg_url)
    database = PgDatabase(pg_url)
    database.open(SCHEMA)
    column = "updated"
    with database.connection() as conn:
        conn.execute(
            "CREATE FUNCTION tamper() RETURNS trigger LANGUAGE plpgsql AS "
            f"$$ BEGIN NEW.{column} := 'tampered'; RETURN NEW; END $$"
        )
        conn.execute(
            f"CREATE TRIGGER tamper BEFORE INSERT ON {table} FOR EACH ROW EXECUTE FUNCTION tamper()"
        )
    database.close()
    done = _copy(str(first), pg_url)
    assert done.returncode == EXIT_MISMATCH
    assert re.search(rf"^{table}\s.*MISMATCH$", done.stdout, re.MULTILINE)
    assert "does not match the source in " + table in done.stdout


def test_sides_whose_process_tables_differ_are_refused_before_writing(
    tmp_path: Path, pg_url: str
) -> None:
    """A destination whose revisions table has a column the source lacks (another schema)
    is one line naming the column; nothing is written there."""
    first = tmp_path / "first"
    _fill_sqlite(first)
    _prepare_pg(pg_url)
    with psycopg.connect(pg_url) as conn:
        conn.execute("ALTER TABLE processes_revisions ADD COLUMN colour TEXT")
    done = _copy(str(first), pg_url)
    assert done.returncode == EXIT_CONFIG, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1
    assert "processes_revisions table has other columns" in done.stderr
    assert "only in the destination: ['colour']" in done.stderr
    assert {t: s.rows for t, s in _sums(pg_url).items()} == dict.fromkeys(TABLES, 0)
