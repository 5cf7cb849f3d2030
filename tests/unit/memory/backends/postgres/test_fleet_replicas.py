"""The fleet registry and the lessons on PostgreSQL with several replicas: two
``PgDatabase`` on one database (two servers' pools), threads hammering both; and a
connection killed by the server mid-call.

The parity with SQLite is the repository contract (tests/unit/memory/backends/contract.py)
and the lesson stores' tests (backends/test_lessons.py), both run on both backends; these
are what only PostgreSQL has.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from robot_mcp_kit.params import Lesson, ParamStore
from robot_mcp_kit.store import StoreUnavailable
from robot_mcp_memory._exceptions import FleetError
from robot_mcp_memory.backends.postgres import PgBackend
from robot_mcp_memory.backends.postgres._database import PgDatabase
from robot_mcp_memory.backends.postgres._lessons import PgParamBackend
from robot_mcp_memory.backends.postgres._schema import SCHEMA
from robot_mcp_memory.fleet import FleetService
from robot_mcp_memory.params import ScopedParams

THREADS_PER_REPLICA = 4


@pytest.fixture
def replicas(pg_url: str) -> Iterator[tuple[PgDatabase, PgDatabase]]:
    """Two replicas' databases: two pools on one PostgreSQL database."""
    a, b = PgDatabase(pg_url, pool_size=8), PgDatabase(pg_url, pool_size=8)
    a.open(SCHEMA)
    b.open(SCHEMA)
    yield a, b
    a.close()
    b.close()


def _hammer(work: Callable[[int], None], n: int) -> list[BaseException]:
    """Run ``work(i)`` for i in range(n) in threads started together; the errors."""
    errors: list[BaseException] = []
    start = threading.Barrier(n)

    def run(i: int) -> None:
        try:
            start.wait()
            work(i)
        except BaseException as exc:  # pragma: no cover - reported by the caller
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


# --- no lost update between replicas ---------------------------------------------------


@pytest.mark.slow  # threads on two pools of one database
def test_lesson_counters_are_exact_across_replicas(
    replicas: tuple[PgDatabase, PgDatabase],
) -> None:
    """Eight threads on two replicas record outcomes on lessons that do not exist yet
    (so their first writes race to create them): every outcome is counted once."""
    backends = [PgParamBackend(db) for db in replicas]
    rounds = 40
    n = 2 * THREADS_PER_REPLICA

    def work(i: int) -> None:
        store = ParamStore(backends[i % 2], "group:line-3")
        for r in range(rounds):
            for place in ("t1", "t2"):
                store.record("grasp", {"by": i, "r": r}, place=place, success=r % 3 != 0)

    assert _hammer(work, n) == []
    for place in ("t1", "t2"):
        lesson = backends[1].get("group:line-3", "grasp", place)
        assert lesson is not None
        ok = sum(1 for r in range(rounds) if r % 3 != 0) * n
        assert (lesson.success_count, lesson.failure_count) == (ok, rounds * n - ok)


def test_a_losing_creator_reruns_the_rule_on_the_winners_lesson(
    replicas: tuple[PgDatabase, PgDatabase],
) -> None:
    """Two replicas create the same lesson at once: one rule runs again on the other's
    row (the rule may be called more than once), and both outcomes are counted."""
    a, b = (PgParamBackend(db) for db in replicas)
    seen: list[Lesson | None] = []
    both_read = threading.Barrier(2)

    def rule(old: Lesson | None) -> Lesson:
        seen.append(old)
        if old is None:
            both_read.wait(timeout=10)  # both replicas found no lesson
            return Lesson("s", "k", {"x": 1}, success_count=1)
        return Lesson("s", "k", old.params, success_count=old.success_count + 1)

    errors = _hammer(lambda i: (a, b)[i].update("s", "k", None, rule), 2)
    assert errors == []
    assert a.get("s", "k", None).success_count == 2  # type: ignore[union-attr]
    assert [x is None for x in seen].count(True) == 2
    assert [x is None for x in seen].count(False) == 1


@pytest.mark.slow  # threads on two pools of one database
def test_registry_writes_from_two_replicas_all_land(
    replicas: tuple[PgDatabase, PgDatabase],
) -> None:
    """Both replicas register the same robots, upsert the same groups and regroup robots
    at once: no error, one row per robot and group, every robot in a group that exists,
    and what one replica wrote is read at once on the other."""
    fleets = [FleetService(PgBackend(db).fleet) for db in replicas]
    groups = [f"g{i}" for i in range(4)]
    robots = [f"r{i:02d}" for i in range(30)]

    def work(i: int) -> None:
        fleet = fleets[i % 2]
        for round_ in range(5):
            for g in groups:
                fleet.upsert_group(g, name=f"by {i} round {round_}")
            for j, rid in enumerate(robots):
                fleet.register_robot(rid, group_id=groups[(i + j) % 4], meta={"by": i})
                fleet.set_group(rid, groups[(i + j + round_) % 4] if j % 3 else None)

    assert _hammer(work, 2 * THREADS_PER_REPLICA) == []
    a, b = fleets
    assert [r.robot_id for r in a.list_robots()] == robots
    assert [g.group_id for g in b.list_groups()] == groups
    members = sorted(rid for g in a.list_groups() for rid in g.robots)
    assert members == sorted(r.robot_id for r in b.list_robots() if r.group_id is not None)
    a.register_robot("fresh", group_id="g1")
    assert b.get_robot("fresh").group_id == "g1"  # type: ignore[union-attr]
    assert b.visible_robots("fresh") >= {"fresh"}


def test_delete_group_against_a_registration_into_it(
    replicas: tuple[PgDatabase, PgDatabase],
) -> None:
    """One replica deletes a group while the other registers a robot into it, many times:
    exactly one of them wins each time (never a deleted group with a robot in it)."""
    a, b = (FleetService(PgBackend(db).fleet) for db in replicas)
    outcomes: dict[str, int] = {}
    for i in range(40):
        gid = f"g{i}"
        a.upsert_group(gid)
        results: dict[str, str] = {}

        def work(k: int, gid: str = gid, results: dict[str, str] = results) -> None:
            try:
                if k == 0:
                    a.delete_group(gid)
                else:
                    b.register_robot(f"r{gid}", group_id=gid)
                results["delete" if k == 0 else "register"] = "ok"
            except FleetError as exc:
                results["delete" if k == 0 else "register"] = exc.code

        assert _hammer(work, 2) == []
        key = f"delete {results['delete']}, register {results['register']}"
        outcomes[key] = outcomes.get(key, 0) + 1
        robot = a.get_robot(f"r{gid}")
        group = a.get_group(gid)
        if results["delete"] == "ok":
            assert (results["register"], robot, group) == ("not_found", None, None)
        else:
            assert results == {"delete": "conflict", "register": "ok"}
            assert group is not None
            assert group.robots == (f"r{gid}",)
    assert set(outcomes) <= {
        "delete ok, register not_found",
        "delete conflict, register ok",
    }


def test_the_self_improve_gate_is_read_across_replicas(
    replicas: tuple[PgDatabase, PgDatabase],
) -> None:
    """An operator's switch on one replica gates the lessons on the other at once."""
    fleet_a, fleet_b = (FleetService(PgBackend(db).fleet) for db in replicas)
    lessons_b = ScopedParams(fleet_b, PgParamBackend(replicas[1]))
    fleet_a.upsert_group("g1")
    fleet_a.register_robot("a1", group_id="g1")
    assert lessons_b.record("a1", "grasp", {"x": 1})["reason"] == "self_improve_off"
    fleet_a.set_self_improve(True)
    assert lessons_b.record("a1", "grasp", {"x": 1})["scope"] == "group:g1"
    fleet_a.set_self_improve(False, "g1")
    assert lessons_b.recall("a1", "grasp")["reason"] == "self_improve_off"


# --- a connection lost mid-call ----------------------------------------------------------


def _terminate_when(pg_url: str, where: str, timeout_s: float = 10.0) -> int:
    """Wait until one of our pool's backends matches ``where`` (a pg_stat_activity
    condition), terminate it from a connection of its own; its pid."""
    deadline = time.monotonic() + timeout_s
    query = (
        "SELECT pid FROM pg_stat_activity WHERE application_name = 'robot-mcp-memory' "  # noqa: S608
        f"AND datname = current_database() AND {where} LIMIT 1"
    ).encode()
    with psycopg.connect(pg_url, autocommit=True) as admin:
        while time.monotonic() < deadline:
            row = admin.execute(query).fetchone()
            if row is not None:
                admin.execute("SELECT pg_terminate_backend(%s)", (row[0],))
                return int(row[0])
            time.sleep(0.02)
    raise AssertionError(f"no backend matched {where!r} within {timeout_s} s")


def test_a_lesson_update_whose_connection_dies_writes_nothing(pg_url: str) -> None:
    """The server kills the connection while the rule runs (the row read and locked,
    nothing written yet): StoreUnavailable, the lesson as it was; the next call works."""
    db = PgDatabase(pg_url)
    db.open(SCHEMA)
    backend = PgParamBackend(db)
    store = ParamStore(backend, "group:g1")
    before = store.record("grasp", {"x": 1}, success=True)
    in_rule, release = threading.Event(), threading.Event()

    def slow_rule(old: Lesson | None) -> Lesson:
        assert old is not None
        in_rule.set()
        release.wait(timeout=10)
        return Lesson("group:g1", "grasp", {"x": 2}, success_count=old.success_count + 1)

    errors: list[BaseException] = []

    def update() -> None:
        try:
            backend.update("group:g1", "grasp", None, slow_rule)
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=update)
    worker.start()
    assert in_rule.wait(timeout=10)
    _terminate_when(pg_url, "state = 'idle in transaction'")
    release.set()
    worker.join(timeout=20)
    assert len(errors) == 1
    assert isinstance(errors[0], StoreUnavailable)
    assert "nothing was written" in str(errors[0])
    assert store.get("grasp") == before
    assert store.record("grasp", success=True).success_count == 2
    db.close()


def test_a_regroup_whose_connection_dies_mid_call_writes_nothing(pg_url: str) -> None:
    """set_group is two statements (lock the robot, move it): the connection is killed
    while the second waits on a lock held elsewhere. StoreUnavailable; the robot stays in
    its group; the registry answers again at once."""
    db = PgDatabase(pg_url)
    db.open(SCHEMA)
    fleet = FleetService(PgBackend(db).fleet)
    fleet.upsert_group("g1")
    fleet.upsert_group("g2")
    before = fleet.register_robot("rap-1", group_id="g1")
    errors: list[BaseException] = []

    def move() -> None:
        try:
            fleet.set_group("rap-1", "g2")
        except BaseException as exc:
            errors.append(exc)

    with psycopg.connect(pg_url) as holder:  # another client locks the target group
        holder.execute("SELECT 1 FROM fleet_groups WHERE group_id = 'g2' FOR UPDATE")
        worker = threading.Thread(target=move)
        worker.start()
        _terminate_when(pg_url, "wait_event_type = 'Lock'")
        worker.join(timeout=20)
        holder.rollback()
    assert len(errors) == 1
    assert isinstance(errors[0], StoreUnavailable)
    assert fleet.get_robot("rap-1") == before
    assert fleet.get_group("g2").robots == ()  # type: ignore[union-attr]
    assert fleet.set_group("rap-1", "g2").group_id == "g2"
    db.close()


def test_registering_during_an_outage_is_unavailable_not_an_error_text(pg_url: str) -> None:
    """Every backend of ours killed between calls: the next call gets a fresh connection
    (the pool checks it) or StoreUnavailable — never a psycopg error."""
    db = PgDatabase(pg_url, pool_size=4)
    db.open(SCHEMA)
    fleet = FleetService(PgBackend(db).fleet)
    fleet.register_robot("rap-1")
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'robot-mcp-memory' AND datname = current_database()"
        )
    results: list[Any] = []
    for i in range(3):
        try:
            results.append(fleet.register_robot(f"rap-{i + 2}").robot_id)
        except StoreUnavailable:
            results.append("unavailable")
    assert results[-1] == "rap-4"
    assert [r.robot_id for r in fleet.list_robots()] == [
        "rap-1",
        *(r for r in results if r != "unavailable"),
    ]
    db.close()


def test_ids_sort_by_code_point_whatever_the_database_collation(pg_url: str) -> None:
    """Ids, scopes and lesson keys are COLLATE "C": listed in SQLite's byte order even in
    a database whose default collation is a language's (where 'a' sorts before 'B')."""
    db = PgDatabase(pg_url)
    db.open(SCHEMA)
    with db.connection() as conn:
        rows = conn.execute(
            "SELECT table_name, column_name, collation_name FROM information_schema.columns "
            "WHERE table_name IN ('fleet_robots', 'fleet_groups', 'fleet_settings', 'lessons') "
            "AND column_name IN ('robot_id', 'group_id', 'key', 'scope') "
            "ORDER BY table_name, column_name"
        ).fetchall()
    db.close()
    assert rows == [
        ("fleet_groups", "group_id", "C"),
        ("fleet_robots", "group_id", "C"),
        ("fleet_robots", "robot_id", "C"),
        ("fleet_settings", "key", "C"),
        ("lessons", "key", "C"),
        ("lessons", "scope", "C"),
    ]
