"""What only the PostgreSQL process store has: several replicas on one database.

Two replicas are two :class:`PgDatabase` pools on one ``pg_url`` (each with its own
:class:`PgProcessStore`), hammered from threads. The database settles every race: the
counters, the id collisions, the per-robot document limit. Faults are the real server's:
a backend terminated with ``pg_terminate_backend`` from another connection.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import psycopg
import pytest

from robot_mcp_kit.store import StoreUnavailable
from robot_mcp_memory._exceptions import DocError, DocTooLarge, RevisionConflict
from robot_mcp_memory.documents import ProcessDoc
from robot_mcp_memory.postgres import SCHEMA, PgDatabase, PgSchema
from robot_mcp_memory.postgres._process_index import rebuild_index
from robot_mcp_memory.postgres.processes import PgProcessStore
from robot_mcp_memory.search import HashingEmbedder

Replicas = Callable[..., PgProcessStore]


@pytest.fixture
def replica(pg_url: str) -> Iterator[Replicas]:
    """``replica(**store_kwargs)``: one more replica (its own pool) on the test's database."""
    dbs: list[PgDatabase] = []

    def open_replica(**kwargs: Any) -> PgProcessStore:
        db = PgDatabase(pg_url, pool_size=6)
        db.open(SCHEMA)
        dbs.append(db)
        return PgProcessStore(db, **kwargs)

    yield open_replica
    for db in dbs:
        db.close()


def doc(id: str, title: str = "Open the gate", **fields: Any) -> ProcessDoc:
    return ProcessDoc(id=id, title=title, body="## Steps\n1. walk to the gate\n", **fields)


def hammer(workers: list[Callable[[], None]]) -> list[BaseException]:
    """Run every worker in its own thread, all released at once; the errors they raised."""
    errors: list[BaseException] = []
    start = threading.Barrier(len(workers))

    def run(work: Callable[[], None]) -> None:
        start.wait()
        try:
            work()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return errors


def index_snapshot(store: PgProcessStore) -> dict[str, list[tuple[Any, ...]]]:
    tables = {
        "processes_postings": "term, owner, rid, freq",
        "processes_owner_terms": "term, owner, docs",
        "processes_search": "rid, owner, tokens, tsv::text",
    }
    with store.db.connection() as conn:
        return {
            t: sorted(tuple(r) for r in conn.execute(f"SELECT {c} FROM {t}"))  # noqa: S608
            for t, c in tables.items()
        }


def assert_index_is_a_recount(store: PgProcessStore) -> None:
    kept = index_snapshot(store)
    with store.db.connection() as conn:
        rebuild_index(conn)
    assert index_snapshot(store) == kept


class TestTwoReplicas:
    def test_concurrent_outcomes_on_both_replicas_are_counted_exactly(
        self, replica: Replicas
    ) -> None:
        """4 threads on each replica record 25 outcomes each (with notes): every one
        counted, every note in the body once, the index a recount of the rows."""
        a, b = replica(), replica()
        a.save(doc("gate"))
        per_thread = 25

        def worker(store: PgProcessStore, tag: str) -> Callable[[], None]:
            def work() -> None:
                for i in range(per_thread):
                    store.record_outcome("gate", i % 3 != 0, f"{tag} run {i}")

            return work

        errors = hammer([worker(s, f"{n}{t}") for n, s in (("a", a), ("b", b)) for t in "wxyz"])
        assert errors == []
        stored = b.get("gate")
        assert stored is not None
        total = 8 * per_thread
        failures = 8 * len(range(0, per_thread, 3))
        assert (stored.success_count, stored.failure_count) == (total - failures, failures)
        lines = [line for line in stored.body.splitlines() if " run " in line]
        assert len(lines) == len(set(lines)) == total
        assert stored.body.count("## Outcome log") == 1
        assert_index_is_a_recount(a)

    def test_concurrent_saves_of_one_id_are_settled_by_the_database(
        self, replica: Replicas
    ) -> None:
        """Saves of the same id from different missions on both replicas: each gets an id
        of its own (id, id-2, …), none lost or overwritten."""
        a, b = replica(), replica()
        saved: list[str] = []
        lock = threading.Lock()

        def worker(store: PgProcessStore, mission: str) -> Callable[[], None]:
            def work() -> None:
                result = store.save(
                    doc("fetch-x", title=f"by {mission}", source_mission_id=mission)
                )
                with lock:
                    saved.append(result.doc.id)

            return work

        missions = [f"m-{i}" for i in range(12)]
        errors = hammer([worker(a if i % 2 else b, m) for i, m in enumerate(missions)])
        assert errors == []
        expected = ["fetch-x"] + [f"fetch-x-{n}" for n in range(2, 13)]
        assert sorted(saved) == sorted(expected)
        assert a.count() == 12
        titles = {d.title for d in b.list(limit=100)}
        assert titles == {f"by {m}" for m in missions}
        assert_index_is_a_recount(a)

    def test_concurrent_saves_of_one_mission_update_one_row(self, replica: Replicas) -> None:
        """The same id and mission saved from both replicas at once: one document."""
        a, b = replica(), replica()
        errors = hammer(
            [
                (
                    lambda s=s, i=i: (
                        s.save(doc("x", title=f"rev {i}", source_mission_id="m")) and None
                    )
                )
                for i, s in enumerate([a, b] * 5)
            ]
        )
        assert errors == []
        assert [d.id for d in a.list()] == ["x"]
        assert_index_is_a_recount(b)

    def test_the_robot_document_limit_holds_across_replicas(self, replica: Replicas) -> None:
        """Twelve new documents of one robot at once, limit 5: exactly 5 stored."""
        a, b = replica(), replica()
        refused: list[BaseException] = []

        def worker(store: PgProcessStore, i: int) -> Callable[[], None]:
            def work() -> None:
                try:
                    store.save(doc(f"d{i}", robot="rap-1"), max_robot_documents=5)
                except DocTooLarge as exc:
                    refused.append(exc)

            return work

        errors = hammer([worker(a if i % 2 else b, i) for i in range(12)])
        assert errors == []
        assert a.count(robots=["rap-1"]) == 5
        assert len(refused) == 7

    def test_a_save_on_one_replica_is_read_at_once_on_the_other(self, replica: Replicas) -> None:
        """No cache between replicas: get, find, list, count and vectors see the write."""
        a = replica(embedder=HashingEmbedder())
        b = replica(embedder=HashingEmbedder())
        for i in range(5):
            a.save(doc(f"gate-{i}", title=f"Open gate {i}"))
            assert b.get(f"gate-{i}") is not None
            assert f"gate-{i}" in [f.doc.id for f in b.find(f"open gate {i}", k=10)]
            assert b.count() == i + 1
        a.save(doc("gate-0", title="Close the hatch"))
        assert b.find("hatch")[0].doc.id == "gate-0"
        assert b.find("hatch")[0].semantic is not None
        assert b.delete("gate-1")
        assert a.get("gate-1") is None


class TestRevisionsAcrossReplicas:
    """Issue 22 on PostgreSQL: the revision check and the write are one transaction with
    the row locked, so replicas cannot lose an update."""

    def test_two_replicas_saving_one_expected_revision_exactly_one_wins(
        self, replica: Replicas, pg_url: str
    ) -> None:
        """Both saves are made to overlap for sure: a third session holds a lock that stops
        any write to ``processes_revisions`` until both saves wait on the database (on
        that lock, or on the first save's row lock), then lets them go."""
        a, b = replica(), replica()
        a.save(doc("gate", source_mission_id="m-1"))
        a.save(doc("gate", title="Open the gate, v2", source_mission_id="m-1"))  # revision 2
        outcomes: dict[str, Any] = {}
        gate = psycopg.connect(pg_url)
        gate.execute("LOCK TABLE processes_revisions IN SHARE ROW EXCLUSIVE MODE")

        def edit(store: PgProcessStore, name: str) -> Callable[[], None]:
            def work() -> None:
                try:
                    outcomes[name] = store.save(
                        doc("gate", title=f"Open the gate, {name}'s edit", source_mission_id="m-1"),
                        expected_revision=2,
                    )
                except RevisionConflict as exc:
                    outcomes[name] = exc

            return work

        def release_when_both_wait() -> None:
            try:
                with psycopg.connect(pg_url, autocommit=True) as watch:
                    deadline = time.monotonic() + 30
                    while time.monotonic() < deadline:
                        row = watch.execute(
                            "SELECT count(*) FROM pg_stat_activity WHERE datname = "
                            "current_database() AND wait_event_type = 'Lock'"
                        ).fetchone()
                        if row is not None and row[0] >= 2:
                            break
                        time.sleep(0.01)
            finally:
                gate.commit()
                gate.close()

        assert hammer([edit(a, "a"), edit(b, "b"), release_when_both_wait]) == []
        saved = [o for o in outcomes.values() if not isinstance(o, RevisionConflict)]
        conflicts = [o for o in outcomes.values() if isinstance(o, RevisionConflict)]
        assert len(saved) == 1, outcomes
        assert len(conflicts) == 1, outcomes
        assert saved[0].revision == 3
        assert (conflicts[0].expected, conflicts[0].current) == (2, 3)
        stored = b.get("gate")
        assert stored is not None
        assert stored.title == saved[0].doc.title  # the winner's edit, not overwritten
        assert [r.revision for r in a.revisions("gate")] == [2, 1]

    def test_two_replicas_creating_one_id_with_expected_revision_0_one_wins(
        self, replica: Replicas
    ) -> None:
        a, b = replica(), replica()
        results: list[Any] = []

        def create(store: PgProcessStore) -> Callable[[], None]:
            def work() -> None:
                try:
                    results.append(store.save(doc("fresh"), expected_revision=0))
                except RevisionConflict as exc:
                    results.append(exc)

            return work

        assert hammer([create(a), create(b)]) == []
        conflicts = [r for r in results if isinstance(r, RevisionConflict)]
        assert len(conflicts) == 1, results
        assert conflicts[0].current == 1
        assert a.count() == 1

    def test_revisions_are_pruned_to_the_setting_also_after_delete(self, replica: Replicas) -> None:
        store = replica(revisions_keep=2)
        for n in range(5):
            store.save(doc("gate", title=f"Open the gate v{n}"))
        assert [r.revision for r in store.revisions("gate")] == [4, 3]
        assert store.delete("gate")
        kept = store.revisions("gate")
        assert [(r.revision, r.reason) for r in kept] == [(5, "delete"), (4, "save")]
        back = store.revert("gate", 5)
        assert back is not None
        assert (back.created, back.revision, back.doc.title) == (True, 6, "Open the gate v4")


class TestLivesMigration:
    """Issue 32: a version-1 database (revisions numbered on across an id's lives) opens
    at version 2 with every kept revision in its life and its owner read from its own
    frontmatter."""

    def test_a_version_1_database_keeps_every_revision_in_its_life(self, pg_url: str) -> None:
        from robot_mcp_memory.postgres._fleet_tables import FLEET_TABLES
        from robot_mcp_memory.postgres._lesson_tables import LESSON_TABLES
        from robot_mcp_memory.postgres._process_tables import (
            NEEDS,
            PROCESSES_OWNER_TERMS,
            PROCESSES_POSTINGS,
            PROCESSES_REVISIONS_V1,
            PROCESSES_SEARCH,
            PROCESSES_V1,
            PROCESSES_VECTORS,
        )
        from robot_mcp_memory.postgres._schema import IDENTITY

        v1 = PgSchema(
            IDENTITY,
            1,
            (
                PROCESSES_V1,
                PROCESSES_REVISIONS_V1,
                PROCESSES_SEARCH,
                PROCESSES_POSTINGS,
                PROCESSES_OWNER_TERMS,
                PROCESSES_VECTORS,
                *FLEET_TABLES,
                *LESSON_TABLES,
            ),
            extensions=("vector",),
            needs=NEEDS,
        )
        old = PgDatabase(pg_url)
        old.open(v1)
        stamp = "2026-01-02T03:04:05Z"
        with old.connection() as conn:
            for id, revision, successes in (("coil", 4, 0), ("plain", 2, 0), ("keep", 2, 3)):
                conn.execute(
                    "INSERT INTO processes (id, title, robot, body, revision, success_count) "
                    "VALUES (%s, %s, 'rap-1', 'text', %s, %s)",
                    (id, id.title(), revision, successes),
                )
            for id, revision, reason, robot, when in (
                ("coil", 1, "save", "rap-2", "2026-01-01T00:00:00Z"),
                ("coil", 2, "delete", "rap-2", "2026-01-01T00:01:00Z"),
                ("coil", 3, "save", "rap-1", "2026-01-01T00:02:00Z"),
                ("plain", 1, "save", "rap-1", stamp),
                ("gone", 1, "merged", "rap-2", stamp),
                ("keep", 1, "merge:gone:1", "rap-1", stamp),
            ):
                markdown = ProcessDoc.parse(
                    f"---\nid: {id}\ntitle: {id} v{revision}\nrobot: {robot}\n"
                    f"success_count: {int(id == 'gone')}\n---\n\nversion {revision}\n"
                ).render()
                conn.execute(
                    "INSERT INTO processes_revisions VALUES (%s, %s, %s, %s, %s)",
                    (id, revision, when, reason, markdown),
                )
            conn.execute(
                "INSERT INTO processes_revisions VALUES ('odd', 1, %s, 'delete', 'no frontmatter')",
                (stamp,),
            )
        old.close()
        db = PgDatabase(pg_url)
        db.open(SCHEMA)
        try:
            store = PgProcessStore(db)
            with db.connection() as conn:
                version = conn.execute("SELECT value FROM store_meta WHERE key='schema_version'")
                assert version.fetchone() == ("2",)
                assert conn.execute("SELECT count(*) FROM processes_revisions").fetchone() == (7,)
                key = conn.execute(
                    "SELECT a.attname FROM pg_index AS i JOIN pg_attribute AS a ON "
                    "a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) WHERE "
                    "i.indrelid = 'processes_revisions'::regclass AND i.indisprimary"
                ).fetchall()
                assert sorted(k[0] for k in key) == ["doc_id", "life", "revision"]
            assert store.lives("coil") == [1, 2]
            assert store.states(["coil"])["coil"].life == 2
            (now,) = store.revisions("coil")
            assert (now.revision, now.life, now.robot, now.shared) == (3, 2, "rap-1", False)
            earlier = store.revisions("coil", life=1)
            assert [(r.revision, r.reason, r.robot) for r in earlier] == [
                (2, "delete", "rap-2"),
                (1, "save", "rap-2"),
            ]
            assert store.get_revision("coil", 1) is None
            first = store.get_revision("coil", 1, life=1)
            assert first is not None
            assert first.title == "coil v1"
            assert [r.revision for r in store.revisions("plain")] == [1]
            (odd,) = store.revisions("odd")
            assert (odd.robot, odd.shared) == (None, False)  # unreadable: the admin's only
            coil = store.get("coil")
            assert coil is not None
            coil.body = "sweep the floor twice\n"
            assert store.save(coil).revision == 5
            assert store.save(doc("gone")).revision == 1
            assert store.lives("gone") == [1, 2]
            reverted = store.revert("keep", 1)
            assert reverted is not None
            assert reverted.doc.success_count == 2  # the v1 merge's counts come off
        finally:
            db.close()


class TestFaults:
    def test_a_terminated_backend_is_unavailable_and_writes_nothing(
        self, replica: Replicas, pg_url: str
    ) -> None:
        """A save blocked on a row lock has its backend terminated by the server: the call
        raises StoreUnavailable, the document and its index are as before, and the next
        call goes through."""
        store = replica()
        store.save(doc("gate", title="Open the gate", source_mission_id="m"))
        before = index_snapshot(store)
        with psycopg.connect(pg_url) as holder:
            holder.execute("SELECT 1 FROM processes WHERE id = 'gate' FOR UPDATE")
            errors: list[BaseException] = []

            def save() -> None:
                try:
                    store.save(doc("gate", title="Shut the door", source_mission_id="m"))
                except BaseException as exc:
                    errors.append(exc)

            thread = threading.Thread(target=save)
            thread.start()
            with psycopg.connect(pg_url, autocommit=True) as killer:
                for _ in range(200):
                    pids = [
                        r[0]
                        for r in killer.execute(
                            "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                            "AND application_name = 'robot-mcp-memory'"
                        )
                    ]
                    if pids:
                        break
                    time.sleep(0.02)
                assert pids, "the save never waited on the lock"
                killer.execute("SELECT pg_terminate_backend(%s)", (pids[0],))
            thread.join(30)
            holder.rollback()
        assert len(errors) == 1
        assert isinstance(errors[0], StoreUnavailable)
        stored = store.get("gate")
        assert stored is not None
        assert stored.title == "Open the gate"
        assert index_snapshot(store) == before
        assert store.save(doc("gate", title="Shut the door", source_mission_id="m")).doc.title == (
            "Shut the door"
        )


class TestHostileInput:
    QUERIES = (
        "'",
        '"',
        "\\",
        "\\'",
        "&|!:*()",
        "a & b | !c:* <-> (d)",
        "it's o'clock \\\\ 'x' & y",
        "\x00",
        "gate\x00gate",
        "x" * 10_000,
        "open gate " * 1_000,
        "ＯＰＥＮ　ＧＡＴＥ",
        "'; DROP TABLE processes; --",
        "$$ $1 %s %(x)s {}",
        "\ud800 lone surrogate",
        "gate:* & !gate",
    )

    @pytest.mark.parametrize("hybrid", [False, True])
    def test_hostile_queries_answer_without_error(self, replica: Replicas, hybrid: bool) -> None:
        store = replica(embedder=HashingEmbedder() if hybrid else None)
        store.save(doc("gate"))
        for query in self.QUERIES:
            for robots in (None, ["rap-1"], []):
                found = store.find(query, k=5, robots=robots)
                assert isinstance(found, list)
        assert store.find("open gate")[0].doc.id == "gate"
        assert store.count() == 1

    def test_a_nul_character_is_refused_clearly(self, replica: Replicas) -> None:
        """PostgreSQL text cannot hold U+0000: the save says so and stores nothing; reads
        and deletes of such an id answer 'not found'."""
        store = replica()
        with pytest.raises(DocError) as info:
            store.save(ProcessDoc(id="gate", title="Open", body="step one\x00two\n"))
        assert info.value.field == "body"
        assert "NUL" in str(info.value)
        assert store.count() == 0
        assert store.get("a\x00b") is None
        assert store.owner("a\x00b") is None
        assert store.delete("a\x00b") is False
        assert store.record_outcome("a\x00b", True) is None
        store.save(doc("gate"))
        assert store.record_outcome("gate", True, "note with \x00 inside") is not None


class TestWithoutPgvector:
    def test_an_embedder_without_pgvector_warns_and_ranks_lexically(
        self, pg_url: str, capture_logs: Any
    ) -> None:
        db = PgDatabase(pg_url)
        db.open(replace(SCHEMA, extensions=()))
        try:
            with capture_logs() as logs:
                store = PgProcessStore(db, embedder=HashingEmbedder())
            assert store.search_mode == "lexical"
            warning = [e for e in logs if e["event"] == "pgvector_missing"]
            assert warning
            assert warning[0]["log_level"] == "warning"
            store.save(doc("gate"))
            found = store.find("open the gate")
            assert [f.doc.id for f in found] == ["gate"]
            assert found[0].semantic is None
        finally:
            db.close()
