"""The versioned open: create, migrate forward, refuse newer and unreadable files untouched."""

from __future__ import annotations

import hashlib
import logging
import sqlite3

import pytest

from robot_mcp_kit.store import (
    Kind,
    MigrationFailed,
    Schema,
    SchemaMismatch,
    SchemaTooNew,
    SqliteStore,
    StoreUnreadable,
    Table,
)

NOTES = Table("notes", Kind.DEFINITION, "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
NOTES_FTS = Table(
    "notes_fts",
    Kind.DERIVED,
    "CREATE VIRTUAL TABLE notes_fts USING fts5(body)",
    derived_from="notes",
)
TAGS = Table("tags", Kind.DEFINITION, "CREATE TABLE tags (note_id INTEGER, tag TEXT)")
HITS = Table(
    "hits", Kind.RECORD, "CREATE TABLE hits (id INTEGER PRIMARY KEY, ts REAL)", time_column="ts"
)

V1 = Schema(1, (NOTES,))
V3 = Schema(3, (NOTES, TAGS, HITS))


def step_2(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE tags (note_id INTEGER, tag TEXT)")
    conn.execute("INSERT INTO tags SELECT id, 'migrated' FROM notes")


def step_3(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE hits (id INTEGER PRIMARY KEY, ts REAL)")


def failing_step_3(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE hits (id INTEGER PRIMARY KEY, ts REAL)")
    conn.execute("DELETE FROM notes")  # would destroy data, if it were committed
    raise RuntimeError("step 3 is broken")


def sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def file_version(path) -> int:
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT value FROM store_meta WHERE key='schema_version'").fetchone()
        return int(row[0])
    finally:
        conn.close()


@pytest.fixture
def v1_file(tmp_path):
    path = tmp_path / "data" / "index.db"
    with SqliteStore(path, V1) as store:
        store.execute("INSERT INTO notes (body) VALUES ('kept')")
    return path


class TestCreate:
    def test_missing_file_is_created_at_schema_version(self, tmp_path):
        """A missing path (and its directory) is created holding the declared tables."""
        path = tmp_path / "new" / "dir" / "index.db"
        with SqliteStore(path, V3) as store:
            assert store.counts() == {"notes": 0, "tags": 0, "hits": 0, "store_meta": 1}
        assert file_version(path) == 3
        assert not (path.parent / "index.db.creating").exists()

    def test_file_is_in_wal_mode(self, tmp_path):
        """The store puts the file in WAL mode."""
        path = tmp_path / "index.db"
        SqliteStore(path, V1).close()
        conn = sqlite3.connect(path)
        try:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        finally:
            conn.close()

    def test_store_ready_logs_transition_and_counts(self, v1_file, caplog):
        """One store_ready line carries the schema transition and the row counts."""
        caplog.set_level(logging.INFO, logger="robot_mcp_kit.store")
        SqliteStore(v1_file, V3, migrations={2: step_2, 3: step_3}).close()
        ready = [r for r in caplog.records if r.getMessage().startswith("store_ready")]
        assert len(ready) == 1
        record = ready[0]
        assert (record.from_version, record.to_version) == (1, 3)
        assert record.counts == {"notes": 1, "tags": 1, "hits": 0, "store_meta": 1}
        assert record.path == str(v1_file)
        assert "from_version=1 to_version=3" in record.getMessage()


class TestMigrate:
    def test_steps_run_in_order_one_to_three(self, v1_file):
        """Injected steps take a version-1 file to version 3, data carried along."""
        calls = []

        def s2(conn):
            calls.append(2)
            step_2(conn)

        def s3(conn):
            calls.append(3)
            step_3(conn)

        with SqliteStore(v1_file, V3, migrations={2: s2, 3: s3}) as store:
            assert calls == [2, 3]
            assert [tuple(r) for r in store.query("SELECT * FROM tags")] == [(1, "migrated")]
        assert file_version(v1_file) == 3

    def test_failing_step_leaves_file_at_old_version_untouched(self, v1_file):
        """A step that raises rolls back: the file keeps version 1 and its exact bytes."""
        SqliteStore(v1_file, Schema(2, (NOTES, TAGS)), migrations={2: step_2}).close()
        before = sha(v1_file)
        with pytest.raises(MigrationFailed, match="still at version 2") as info:
            SqliteStore(v1_file, V3, migrations={2: step_2, 3: failing_step_3})
        assert info.value.path == str(v1_file)
        assert isinstance(info.value.__cause__, RuntimeError)
        assert file_version(v1_file) == 2
        assert sha(v1_file) == before
        with SqliteStore(v1_file, Schema(2, (NOTES, TAGS))) as store:
            assert store.counts()["notes"] == 1

    def test_missing_step_is_a_migration_failure(self, v1_file):
        """No step for a version in between: MigrationFailed, file unchanged."""
        before = sha(v1_file)
        with pytest.raises(MigrationFailed, match="no migration step to version 2"):
            SqliteStore(v1_file, V3, migrations={3: step_3})
        assert sha(v1_file) == before

    def test_step_that_commits_is_refused(self, v1_file):
        """A step that commits on its own breaks the one-transaction rule and is reported."""

        def committing(conn):
            conn.execute("CREATE TABLE tags (note_id INTEGER, tag TEXT)")
            conn.commit()

        with pytest.raises(MigrationFailed, match="committed on its own"):
            SqliteStore(v1_file, Schema(2, (NOTES, TAGS)), migrations={2: committing})
        assert file_version(v1_file) == 1


class TestRefuse:
    def test_newer_file_is_refused_untouched(self, tmp_path):
        """A file written by a newer schema raises SchemaTooNew and keeps its bytes."""
        path = tmp_path / "index.db"
        SqliteStore(path, V3, migrations={2: step_2, 3: step_3}).close()
        before = sha(path)
        with pytest.raises(SchemaTooNew, match="version 3, newer than this code's 1") as info:
            SqliteStore(path, V1)
        assert info.value.path == str(path)
        assert sha(path) == before
        assert not (tmp_path / "index.db-wal").exists()

    @pytest.mark.parametrize(
        ("content", "reason"),
        [
            (b"robots:\n  - rap-1\n" * 50, "SQLite header"),
            (b"", "empty"),
        ],
        ids=["text", "zero-bytes"],
    )
    def test_not_a_database_is_unreadable(self, tmp_path, content, reason):
        """A text file or an empty file raises StoreUnreadable naming path and remedy."""
        path = tmp_path / "index.db"
        path.write_bytes(content)
        with pytest.raises(StoreUnreadable) as info:
            SqliteStore(path, V1)
        message = str(info.value)
        assert str(path) in message
        assert reason in message
        assert "move it aside" in message
        assert "fresh" in message
        assert info.value.path == str(path)
        assert path.read_bytes() == content

    def test_truncated_database_is_unreadable(self, tmp_path):
        """A database cut short raises StoreUnreadable and is left as it was."""
        path = tmp_path / "index.db"
        with SqliteStore(path, V1) as store, store.transaction() as conn:
            conn.executemany(
                "INSERT INTO notes (body) VALUES (?)", [("x" * 500,) for _ in range(400)]
            )
        data = path.read_bytes()
        assert len(data) > 40_000
        path.write_bytes(data[: len(data) // 2])
        before = sha(path)
        with pytest.raises(StoreUnreadable, match=r"index\.db") as info:
            SqliteStore(path, V1)
        assert "Restore index.db from a backup" in str(info.value)
        assert sha(path) == before

    @pytest.mark.parametrize(
        ("cut", "reason"),
        [(100, "not a whole number of 4096-byte pages"), (4096, "holds {n} of the {pages} pages")],
        ids=["part-of-a-page", "a-whole-page"],
    )
    def test_a_file_cut_short_at_its_end_is_unreadable(self, tmp_path, cut, reason):
        """Cut at the end, the last page reads as zeros: quick_check passes such a file
        (issue 18: an outbox cut by 100 bytes sent a corrupted body); the size check does not."""
        path = tmp_path / "index.db"
        with SqliteStore(path, V1) as store, store.transaction() as conn:
            conn.executemany(
                "INSERT INTO notes (body) VALUES (?)", [("x" * 300,) for _ in range(100)]
            )
        size = path.stat().st_size
        pages = size // 4096
        assert size == pages * 4096
        reason = reason.format(n=pages - 1, pages=pages)
        with path.open("r+b") as f:
            f.truncate(size - cut)
        if cut < 4096:  # sqlite reads the missing part of the page as zeros: quick_check passes
            ro = sqlite3.connect(f"{path.as_uri()}?mode=ro&immutable=1", uri=True)
            try:
                assert ro.execute("PRAGMA quick_check").fetchall() == [("ok",)]
            finally:
                ro.close()
        before = sha(path)
        with pytest.raises(StoreUnreadable, match=reason) as info:
            SqliteStore(path, V1)
        assert "cut short" in str(info.value)
        assert sha(path) == before

    def test_full_check_finds_an_index_out_of_step_with_its_table(self, tmp_path):
        """full_check=True runs integrity_check, which compares every index with its table."""
        indexed = Table(
            "notes",
            Kind.DEFINITION,
            NOTES.ddl,
            indexes=("CREATE INDEX notes_body ON notes (body)",),
        )
        schema = Schema(1, (indexed,))
        path = tmp_path / "index.db"
        with SqliteStore(path, schema) as store:
            store.execute("INSERT INTO notes (body) VALUES ('a'), ('b')")
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA writable_schema=ON")  # the index now claims another column
        conn.execute(
            "UPDATE sqlite_schema SET sql = 'CREATE INDEX notes_body ON notes (id)' "
            "WHERE name = 'notes_body'"
        )
        conn.commit()
        conn.close()
        SqliteStore(path, schema).close()  # quick_check does not compare indexes
        with pytest.raises(StoreUnreadable, match="integrity_check reports"):
            SqliteStore(path, schema, full_check=True)

    def test_undeclared_table_is_a_mismatch(self, tmp_path):
        """A table the schema neither declares nor derives stops the open, named."""
        path = tmp_path / "index.db"
        SqliteStore(path, V1).close()
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE stray (x)")
        conn.commit()
        conn.close()
        with pytest.raises(SchemaMismatch, match="stray"):
            SqliteStore(path, V1)

    def test_fts5_shadow_tables_are_not_a_mismatch(self, tmp_path):
        """sqlite's fts5 shadow tables pass the startup check without being declared."""
        path = tmp_path / "index.db"
        schema = Schema(1, (NOTES, NOTES_FTS))
        SqliteStore(path, schema).close()
        with SqliteStore(path, schema) as store:
            names = {r[0] for r in store.query("SELECT name FROM sqlite_schema WHERE type='table'")}
            assert {"notes_fts_data", "notes_fts_config"} <= names
            assert "notes_fts" not in store.counts()

    def test_file_without_store_meta_is_refused(self, tmp_path):
        """A database with tables but no recorded version is not guessed at."""
        path = tmp_path / "index.db"
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        conn.commit()
        conn.close()
        with pytest.raises(SchemaMismatch, match="no store_meta"):
            SqliteStore(path, V1)

    def test_declared_time_column_must_exist(self, tmp_path):
        """A RECORD's time_column is checked against the file."""
        bad = Table("hits", Kind.RECORD, "CREATE TABLE hits (id INTEGER)", time_column="ts")
        with pytest.raises(SchemaMismatch, match="'ts'"):
            SqliteStore(tmp_path / "x.db", Schema(1, (bad,)))
