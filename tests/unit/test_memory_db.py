"""index.db: every table declares its kind; the kit's guards hold for it (memory spec §4, §7)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from robot_mcp_kit.store import (
    Kind,
    PruneRefused,
    SchemaTooNew,
    SqliteStore,
    StoreUnreadable,
)
from robot_mcp_memory import db


@pytest.fixture
def index(tmp_path: Path):
    store = db.open_index(tmp_path / "data")
    yield store
    store.close()


class TestDeclaration:
    def test_each_table_has_its_kind(self) -> None:
        """processes and store_meta are definitions; processes_fts is derived from processes."""
        kinds = {t.name: t.kind for t in db.SCHEMA.tables}
        assert kinds == {
            "processes": Kind.DEFINITION,
            "processes_fts": Kind.DERIVED,
            "store_meta": Kind.DEFINITION,
        }
        assert db.SCHEMA.table("processes_fts").derived_from == "processes"
        assert db.SCHEMA.version == db.SCHEMA_VERSION == 1

    def test_nothing_is_pruned(self) -> None:
        """No table of this service ages out."""
        assert db.SCHEMA.pruned == frozenset()

    def test_every_table_in_the_file_is_declared_or_sqlites(self, index: SqliteStore) -> None:
        """A fresh file holds only declared tables and the fts5 shadow tables the kit derives."""
        names = {r[0] for r in index.query("SELECT name FROM sqlite_schema WHERE type = 'table'")}
        declared = {t.name for t in db.SCHEMA.tables}
        assert declared <= names
        assert names - declared == set(db.SCHEMA.not_ours())
        assert {"processes_fts_data", "processes_fts_content"} <= db.SCHEMA.not_ours()

    def test_processes_has_the_spec_columns_plus_shared(self, index: SqliteStore) -> None:
        """Spec §4's columns in order, then `shared` defaulting to 0."""
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
        ]
        assert dict(cols)["shared"] == "0"

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
        """open_index makes data_dir/index.db at schema version 1."""
        store = db.open_index(tmp_path / "a" / "b")
        try:
            assert store.path == (tmp_path / "a" / "b" / "index.db").absolute()
            row = store.query_one("SELECT value FROM store_meta WHERE key = 'schema_version'")
            assert row is not None
            assert row[0] == "1"
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
        for table in ("processes", "processes_fts", "store_meta"):
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
        """A file written by schema version 2 raises SchemaTooNew."""
        db.open_index(tmp_path).close()
        path = tmp_path / "index.db"
        conn = sqlite3.connect(path)
        conn.execute("UPDATE store_meta SET value = '2' WHERE key = 'schema_version'")
        conn.commit()
        conn.close()
        with pytest.raises(SchemaTooNew):
            db.open_index(tmp_path)
