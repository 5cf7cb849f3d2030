"""index.db: every table declares its kind; the kit's guards hold for it (memory spec §4, §7)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from robot_mcp_kit.store import (
    Kind,
    MigrationFailed,
    PruneRefused,
    Schema,
    SchemaTooNew,
    SqliteStore,
    StoreUnreadable,
    Table,
)
from robot_mcp_memory import db
from robot_mcp_memory.documents import ProcessDoc
from robot_mcp_memory.fleet import FleetRegistry
from robot_mcp_memory.search import HashingEmbedder
from robot_mcp_memory.store import ProcessStore


@pytest.fixture
def index(tmp_path: Path):
    store = db.open_index(tmp_path / "data")
    yield store
    store.close()


class TestDeclaration:
    def test_each_table_has_its_kind(self) -> None:
        """processes, the fleet tables and store_meta are definitions; the index, the
        per-owner statistics and the vectors derive from processes; the revisions are
        records."""
        kinds = {t.name: t.kind for t in db.SCHEMA.all_tables()}
        assert kinds == {
            "processes": Kind.DEFINITION,
            "processes_fts": Kind.DERIVED,
            "processes_postings": Kind.DERIVED,
            "processes_owner_terms": Kind.DERIVED,
            "processes_lengths": Kind.DERIVED,
            "processes_vectors": Kind.DERIVED,
            "processes_revisions": Kind.RECORD,
            "fleet_robots": Kind.DEFINITION,
            "fleet_groups": Kind.DEFINITION,
            "fleet_settings": Kind.DEFINITION,
            "store_meta": Kind.DEFINITION,
        }
        for name, kind in kinds.items():
            if kind is Kind.DERIVED:
                assert db.SCHEMA.table(name).derived_from == "processes"
        assert db.SCHEMA.version == db.SCHEMA_VERSION == 6
        assert set(db.SCHEMA.migrations) == {2, 3, 4, 5, 6}

    def test_only_the_revisions_are_pruned(self) -> None:
        """No definition ages out; the revisions are pruned by count (issue 22)."""
        assert db.SCHEMA.pruned == frozenset({"processes_revisions"})

    def test_every_table_in_the_file_is_declared_or_sqlites(self, index: SqliteStore) -> None:
        """A fresh file holds only declared tables and the fts5 shadow tables the kit derives."""
        names = {r[0] for r in index.query("SELECT name FROM sqlite_schema WHERE type = 'table'")}
        declared = {t.name for t in db.SCHEMA.all_tables()}
        assert declared <= names
        assert names - declared == set(db.SCHEMA.not_ours())
        assert {"processes_fts_data", "processes_fts_content"} <= db.SCHEMA.not_ours()

    def test_processes_has_the_spec_columns_plus_ours(self, index: SqliteStore) -> None:
        """Spec §4's columns in order, then `shared` defaulting to 0, then the revision and
        the recent outcomes (version 5), then the life (version 6)."""
        cols = [(r["name"], r["dflt_value"]) for r in index.query("PRAGMA table_info(processes)")]
        assert [c for c, _ in cols] == [
            "id",
            "title",
            "task_pattern",
            "tags",
            "robot",
            "created",
            "updated",
            "success_count",
            "failure_count",
            "last_used",
            "source_mission_id",
            "body",
            "shared",
            "revision",
            "recent_outcomes",
            "last_success",
            "life",
        ]
        assert dict(cols)["shared"] == "0"
        assert dict(cols)["revision"] == "1"
        assert dict(cols)["life"] == "1"

    def test_fts_uses_the_porter_tokenizer(self, index: SqliteStore) -> None:
        """processes_fts stems (porter over unicode61), so 'parcels' matches 'parcel'."""
        with index.transaction() as conn:
            conn.execute(
                "INSERT INTO processes_fts (id, title, task_pattern, tags, body) "
                "VALUES ('x', 'Parcels', '', '[]', 'b')"
            )
        assert index.query("SELECT id FROM processes_fts WHERE processes_fts MATCH 'parcel'")


class TestOpen:
    def test_open_creates_directory_file_and_version(self, tmp_path: Path) -> None:
        """open_index makes data_dir/index.db at the current schema version (6)."""
        store = db.open_index(tmp_path / "a" / "b")
        try:
            assert store.path == (tmp_path / "a" / "b" / "index.db").absolute()
            row = store.query_one("SELECT value FROM store_meta WHERE key = 'schema_version'")
            assert row is not None
            assert row[0] == str(db.SCHEMA_VERSION) == "6"
        finally:
            store.close()

    def test_reopen_keeps_rows(self, tmp_path: Path) -> None:
        """A second open of the same directory sees the first one's rows."""
        store = db.open_index(tmp_path)
        store.execute(
            "INSERT INTO processes (id, title, body) VALUES ('a', 't', 'b')",
        )
        store.close()
        store = db.open_index(tmp_path)
        try:
            assert store.counts()["processes"] == 1
        finally:
            store.close()

    def test_prune_refuses_processes_and_deletes_nothing(self, index: SqliteStore) -> None:
        """The chokepoint refuses a definition before deleting anything."""
        index.execute("INSERT INTO processes (id, title, body) VALUES ('a', 't', 'b')")
        for table in (
            "processes",
            "processes_fts",
            "processes_vocab",
            "processes_vectors",
            "fleet_robots",
            "fleet_groups",
            "fleet_settings",
            "store_meta",
        ):
            with pytest.raises(PruneRefused):
                index.prune(table, keep_last=0)
        assert index.counts()["processes"] == 1

    def test_unreadable_file_names_path_and_remedy(self, tmp_path: Path) -> None:
        """A text file at index.db is StoreUnreadable naming the path, and is left as is."""
        path = tmp_path / "index.db"
        path.write_text('{"truncated": ')
        with pytest.raises(StoreUnreadable) as info:
            db.open_index(tmp_path)
        assert str(path) in str(info.value)
        assert "backup" in str(info.value)
        assert path.read_text() == '{"truncated": '

    def test_newer_file_is_refused_untouched(self, tmp_path: Path) -> None:
        """A file written by schema version 7 raises SchemaTooNew and keeps its bytes."""
        db.open_index(tmp_path).close()
        path = tmp_path / "index.db"
        conn = sqlite3.connect(path)
        conn.execute("UPDATE store_meta SET value = '7' WHERE key = 'schema_version'")
        conn.commit()
        conn.close()
        before = path.read_bytes()
        with pytest.raises(SchemaTooNew):
            db.open_index(tmp_path)
        assert path.read_bytes() == before


# What version 1 of this code declared: the tables it created, unchanged since (store_meta,
# declared then by this package too, is the kit's own table).
V1_SCHEMA = Schema(version=1, tables=(db.PROCESSES_V1, db.PROCESSES_FTS))

# What version 5 declared (its processes table is v1's plus the columns its step adds).
V5_SCHEMA = Schema(
    version=5,
    tables=(
        db.PROCESSES_V1,
        db.PROCESSES_FTS,
        db.PROCESSES_POSTINGS,
        db.PROCESSES_OWNER_TERMS,
        db.PROCESSES_LENGTHS,
        db.PROCESSES_VECTORS,
        db.PROCESSES_REVISIONS_V5,
        db.FLEET_GROUPS,
        db.FLEET_ROBOTS,
        db.FLEET_SETTINGS,
    ),
    migrations={n: db.MIGRATIONS[n] for n in (2, 3, 4, 5)},
    pruned=frozenset({"processes_revisions"}),
)


def _insert_documents(store: SqliteStore, *docs: tuple[str, str, str, int]) -> None:
    """Rows and index entries as every version wrote them: (id, title, body, successes)."""
    with store.transaction() as conn:
        for id, title, body, successes in docs:
            rowid = conn.execute(
                "INSERT INTO processes (id, title, robot, success_count, body) "
                "VALUES (?, ?, 'rap-1', ?, ?)",
                (id, title, successes, body),
            ).lastrowid
            conn.execute(
                "INSERT INTO processes_fts (rowid, id, title, task_pattern, tags, body) "
                "VALUES (?, ?, ?, '', '[]', ?)",
                (rowid, id, title, body),
            )


def _make_v1(data_dir: Path) -> None:
    """A version-1 index.db holding two documents."""
    with SqliteStore(data_dir / "index.db", V1_SCHEMA) as store:
        _insert_documents(
            store,
            ("fetch-parcel", "Fetch a parcel", "Go to the mailroom\n", 1),
            ("water-plants", "Water the plants", "Fill the can\n", 0),
        )


def _tables(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
    finally:
        conn.close()


class TestLegacyLives:
    def test_a_delete_or_a_merge_ends_a_life(self) -> None:
        """Revisions numbered on across lives (schema 5) are split after each revision
        that ended a life; the row is in the life after the last one."""
        lives, now = db.legacy_lives([(3, "save"), (1, "save"), (2, "delete"), (4, "save")])
        assert (lives, now) == ({1: 1, 2: 1, 3: 2, 4: 2}, 2)
        assert db.legacy_lives([(1, "merged")]) == ({1: 1}, 2)
        assert db.legacy_lives([(1, "revert"), (2, "merge:b:1")]) == ({1: 1, 2: 1}, 1)
        assert db.legacy_lives([]) == ({}, 1)


class TestMigration:
    def test_v1_file_migrates_to_v6_and_keeps_its_documents(self, tmp_path: Path) -> None:
        """A file made by the v1 declaration opens at v6: the fleet tables and their index
        exist, the documents, counters and search index are intact."""
        _make_v1(tmp_path)
        assert "fleet_robots" not in _tables(tmp_path / "index.db")
        store = ProcessStore(db.open_index(tmp_path))
        try:
            row = store.store.query_one("SELECT value FROM store_meta WHERE key = 'schema_version'")
            assert row is not None
            assert row[0] == "6"
            assert {"fleet_robots", "fleet_groups", "fleet_settings"} <= _tables(store.store.path)
            indexes = {
                r[0] for r in store.store.query("SELECT name FROM sqlite_schema WHERE type='index'")
            }
            assert "fleet_robots_group" in indexes
            assert [d.id for d in store.list()] == ["fetch-parcel", "water-plants"]
            parcel = store.get("fetch-parcel")
            assert parcel is not None
            assert parcel.success_count == 1
            assert [f.doc.id for f in store.find("parcel from the mailroom")] == ["fetch-parcel"]
            counts = store.store.counts()
            assert counts["fleet_robots"] == counts["fleet_groups"] == 0
            # The migrated tables are the declared ones: the fleet works on them.
            fleet = FleetRegistry(store.store)
            fleet.upsert_group("line-3")
            fleet.register_robot("rap-1", group_id="line-3")
            assert fleet.scope_of("rap-1") == "group:line-3"
        finally:
            store.close()
        # Reopening a migrated file is a plain open (no second migration).
        again = db.open_index(tmp_path)
        try:
            assert again.counts()["fleet_robots"] == 1
        finally:
            again.close()

    def test_migrated_and_fresh_files_have_the_same_fleet_tables(self, tmp_path: Path) -> None:
        """The v2 step creates exactly the columns a fresh v2 file has."""
        _make_v1(tmp_path / "old")
        db.open_index(tmp_path / "old").close()
        db.open_index(tmp_path / "new").close()

        def shape(path: Path) -> dict[str, list[tuple[object, ...]]]:
            conn = sqlite3.connect(path)
            try:
                return {
                    t: [tuple(r) for r in conn.execute(f"PRAGMA table_info({t})")]
                    for t in ("fleet_robots", "fleet_groups", "fleet_settings")
                }
            finally:
                conn.close()

        assert shape(tmp_path / "old" / "index.db") == shape(tmp_path / "new" / "index.db")

    def test_v2_file_migrates_and_a_server_embeds_its_documents(self, tmp_path: Path) -> None:
        """v2 -> v4 adds an empty vectors table; a store opened with an embedder then
        embeds every document once (issue 11)."""
        v2 = Schema(
            version=2,
            tables=(
                db.PROCESSES_V1,
                db.PROCESSES_FTS,
                db.FLEET_GROUPS,
                db.FLEET_ROBOTS,
                db.FLEET_SETTINGS,
            ),
            migrations={2: db.MIGRATIONS[2]},
        )
        with SqliteStore(tmp_path / "index.db", v2) as old:
            _insert_documents(old, ("fetch-parcel", "Fetch a parcel", "Go to the mailroom\n", 0))
        assert "processes_vectors" not in _tables(tmp_path / "index.db")
        store = ProcessStore(db.open_index(tmp_path), embedder=HashingEmbedder())
        try:
            assert "processes_vectors" in _tables(store.store.path)
            assert store.store.counts()["processes_vectors"] == 1
            assert store.search_mode == "hybrid"
            assert [f.doc.id for f in store.find("parcel")] == ["fetch-parcel"]
        finally:
            store.close()

    def test_v3_file_migrates_to_v4_and_counts_every_document(self, tmp_path: Path) -> None:
        """v3 -> v4 drops the fleet-wide vocabulary view and creates the per-owner
        statistics; the store counts each existing document into them when it opens the
        file, so a narrowed search finds them at once (issue 18)."""
        v3_vocab = Table(
            "processes_vocab",
            Kind.DERIVED,
            "CREATE VIRTUAL TABLE processes_vocab USING fts5vocab(processes_fts, row)",
            derived_from="processes_fts",
        )
        v3 = Schema(
            version=3,
            tables=(
                db.PROCESSES_V1,
                db.PROCESSES_FTS,
                v3_vocab,
                db.PROCESSES_VECTORS,
                db.FLEET_GROUPS,
                db.FLEET_ROBOTS,
                db.FLEET_SETTINGS,
            ),
        )
        with SqliteStore(tmp_path / "index.db", v3) as old:
            _insert_documents(
                old,
                ("fetch-parcel", "Fetch a parcel", "Go to the mailroom\n", 0),
                ("water-plants", "Water the plants", "Fill the can\n", 0),
            )
            assert "processes_vocab" in _tables(old.path)
        store = ProcessStore(db.open_index(tmp_path))
        try:
            tables = _tables(store.store.path)
            assert "processes_vocab" not in tables
            counts = store.store.counts()
            assert counts["processes_lengths"] == 2
            assert counts["processes_postings"] > 0
            assert [f.doc.id for f in store.find("parcel", robots=["rap-1"])] == ["fetch-parcel"]
            assert store.find("parcel", robots=["rap-2"]) == []
            assert store.sync_terms() == 0  # nothing left to count
        finally:
            store.close()

    def test_v4_file_migrates_to_v5_with_revision_1_and_no_outcomes(self, tmp_path: Path) -> None:
        """v4 -> v5 adds the revisions table and the three columns: every existing
        document is at revision 1 with no recent outcomes, and the first change of it keeps
        that version as revision 1 (issue 22)."""
        v4 = Schema(
            version=4,
            tables=(
                db.PROCESSES_V1,
                db.PROCESSES_FTS,
                db.PROCESSES_POSTINGS,
                db.PROCESSES_OWNER_TERMS,
                db.PROCESSES_LENGTHS,
                db.PROCESSES_VECTORS,
                db.FLEET_GROUPS,
                db.FLEET_ROBOTS,
                db.FLEET_SETTINGS,
            ),
        )
        with SqliteStore(tmp_path / "index.db", v4) as old:
            _insert_documents(old, ("fetch-parcel", "Fetch a parcel", "Go to the mailroom\n", 2))
        assert "processes_revisions" not in _tables(tmp_path / "index.db")
        store = ProcessStore(db.open_index(tmp_path))
        try:
            assert "processes_revisions" in _tables(store.store.path)
            state = store.states(["fetch-parcel"])["fetch-parcel"]
            assert (state.revision, state.recent, state.last_success) == (1, "", None)
            doc = store.get("fetch-parcel")
            assert doc is not None
            doc.body = "Go to the mail room, then the desk\n"
            saved = store.save(doc, expected_revision=1)
            assert saved.revision == 2
            old_doc = store.get_revision("fetch-parcel", 1)
            assert old_doc is not None
            assert old_doc.body == "Go to the mailroom\n"
            assert old_doc.success_count == 2
        finally:
            store.close()
        # The migrated table is the declared one.
        fresh = db.open_index(tmp_path / "fresh")
        fresh.close()

        def shape(path: Path) -> list[tuple[object, ...]]:
            conn = sqlite3.connect(path)
            try:
                return [
                    tuple(r)
                    for t in ("processes", "processes_revisions")
                    for r in conn.execute(f"PRAGMA table_info({t})")
                ]
            finally:
                conn.close()

        assert shape(tmp_path / "index.db") == shape(tmp_path / "fresh" / "index.db")

    def test_v5_file_migrates_to_v6_keeping_every_revision_in_its_life(
        self, tmp_path: Path
    ) -> None:
        """v5 -> v6 (issue 32): every kept revision stays, in the life the revisions that
        ended one (a delete, a merge) tell apart; a revision's owner is read from its own
        frontmatter; the migrated tables are the declared ones."""
        with SqliteStore(tmp_path / "index.db", V1_SCHEMA):
            pass
        with SqliteStore(tmp_path / "index.db", V5_SCHEMA) as old:
            _insert_documents(
                old,
                ("coil", "Coil", "sweep the floor\n", 0),
                ("undone", "Undone", "back again\n", 0),
                ("plain", "Plain", "second text\n", 0),
                ("keep", "Keep", "kept text\n", 3),
            )
            stamp = "2026-01-02T03:04:05Z"
            with old.transaction() as conn:
                for id, revision, reason, robot, when in (
                    ("coil", 1, "save", "rap-2", "2026-01-01T00:00:00Z"),
                    ("coil", 2, "delete", "rap-2", "2026-01-01T00:01:00Z"),
                    ("coil", 3, "save", "rap-1", "2026-01-01T00:02:00Z"),
                    ("undone", 1, "save", "rap-2", stamp),
                    ("undone", 2, "delete", "rap-2", "2026-01-02T03:05:00Z"),
                    ("plain", 1, "save", "rap-1", stamp),
                    ("gone", 1, "merged", "rap-2", stamp),
                    ("keep", 1, "merge:gone:1", "rap-1", stamp),
                ):
                    count = 1 if id == "gone" else 0
                    markdown = ProcessDoc.parse(
                        f"---\nid: {id}\ntitle: {id} v{revision}\nrobot: {robot}\n"
                        f"success_count: {count}\n---\n\nversion {revision}\n"
                    ).render()
                    conn.execute(
                        "INSERT INTO processes_revisions VALUES (?, ?, ?, ?, ?)",
                        (id, revision, when, reason, markdown),
                    )
                for id, revision in (("coil", 4), ("undone", 3), ("plain", 2), ("keep", 2)):
                    conn.execute("UPDATE processes SET revision = ? WHERE id = ?", (revision, id))
        store = ProcessStore(db.open_index(tmp_path))
        try:
            assert store.store.counts()["processes_revisions"] == 8
            assert store.lives("coil") == [1, 2]
            assert store.states(["coil"])["coil"].life == 2
            (now,) = store.revisions("coil")
            assert (now.revision, now.life, now.robot, now.shared) == (3, 2, "rap-1", False)
            earlier = store.revisions("coil", life=1)
            assert [(r.revision, r.reason, r.robot) for r in earlier] == [
                (2, "delete", "rap-2"),
                (1, "save", "rap-2"),
            ]
            first = store.get_revision("coil", 1, life=1)
            assert first is not None
            assert first.title == "coil v1"
            assert store.get_revision("coil", 1) is None  # not in the current life
            # A document a v5 store brought back after its delete cannot be told from a
            # re-created one: its earlier versions are an earlier life (the admin's).
            assert store.lives("undone") == [1, 2]
            assert store.revisions("undone") == []
            assert store.lives("plain") == [1]
            assert [r.revision for r in store.revisions("plain")] == [1]
            assert [r.reason for r in store.revisions("gone")] == ["merged"]
            # Writes go on in each life.
            coil = store.get("coil")
            assert coil is not None
            coil.body = "sweep the floor twice\n"
            assert store.save(coil).revision == 5
            assert [r.revision for r in store.revisions("coil")] == [4, 3]
            back = ProcessDoc.parse("---\nid: gone\ntitle: Gone again\n---\n\nnew\n")
            assert store.save(back).revision == 1
            assert store.lives("gone") == [1, 2]
            # The merge a v5 store made is undone as it was: the merged counts come off.
            store.store.flush()
            reverted = store.revert("keep", 1)
            assert reverted is not None
            assert reverted.doc.success_count == 2
        finally:
            store.close()
        fresh = db.open_index(tmp_path / "fresh")
        fresh.close()

        def shape(path: Path) -> list[tuple[object, ...]]:
            conn = sqlite3.connect(path)
            try:
                return [
                    tuple(r)
                    for t in ("processes", "processes_revisions")
                    for r in conn.execute(f"PRAGMA table_info({t})")
                ]
            finally:
                conn.close()

        assert shape(tmp_path / "index.db") == shape(tmp_path / "fresh" / "index.db")

    def test_failed_step_leaves_the_file_at_v1(self, tmp_path: Path) -> None:
        """A step that fails rolls back: the file is still v1 with its documents."""
        _make_v1(tmp_path)

        def broken(conn: sqlite3.Connection) -> None:
            conn.execute("CREATE TABLE fleet_groups (group_id TEXT)")
            raise RuntimeError("disk on fire")

        with pytest.raises(MigrationFailed, match="disk on fire"):
            SqliteStore(tmp_path / "index.db", db.SCHEMA, migrations={2: broken})
        assert "fleet_groups" not in _tables(tmp_path / "index.db")
        with SqliteStore(tmp_path / "index.db", V1_SCHEMA) as v1:
            assert v1.counts()["processes"] == 2

    def test_group_id_references_fleet_groups(self, index: SqliteStore) -> None:
        """The file itself refuses a robot in a group that does not exist."""
        with pytest.raises(sqlite3.IntegrityError):
            index.execute(
                "INSERT INTO fleet_robots (robot_id, group_id, registered, updated) "
                "VALUES ('rap-1', 'nowhere', 't', 't')"
            )
