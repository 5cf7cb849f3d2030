"""The opening steps of a store file, each called on its own (``robot_mcp_kit.store._open``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from robot_mcp_kit.store import (
    Kind,
    MigrationFailed,
    Schema,
    SchemaMismatch,
    SchemaTooNew,
    StoreUnreadable,
    Table,
    _open,
)

NOTES = Table("notes", Kind.DEFINITION, "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
HITS = Table(
    "hits", Kind.RECORD, "CREATE TABLE hits (id INTEGER PRIMARY KEY, ts REAL)", time_column="ts"
)
V1 = Schema(1, (NOTES,))
V2 = Schema(2, (NOTES, HITS))


def add_hits(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE hits (id INTEGER PRIMARY KEY, ts REAL)")


def version_of(path: Path) -> int:
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        return _open.read_version(conn, path)
    finally:
        conn.close()


class TestPrepareFile:
    def test_missing_file_is_created_and_reported_new(self, tmp_path: Path) -> None:
        """A missing path is created at the schema's version: (created=True, 0)."""
        path = tmp_path / "a" / "x.db"
        assert _open.prepare_file(path, V1, busy_timeout_ms=100) == (True, 0)
        assert version_of(path) == 1
        assert not path.with_name("x.db.creating").exists()

    def test_existing_file_is_only_read(self, tmp_path: Path) -> None:
        """An existing older file comes back with its version and unchanged bytes."""
        path = tmp_path / "x.db"
        _open.create_file(path, V1)
        before = path.read_bytes()
        assert _open.prepare_file(path, V2, busy_timeout_ms=100) == (False, 1)
        assert path.read_bytes() == before

    def test_newer_file_is_refused(self, tmp_path: Path) -> None:
        path = tmp_path / "x.db"
        _open.create_file(path, V2)
        with pytest.raises(SchemaTooNew):
            _open.prepare_file(path, V1, busy_timeout_ms=100)

    def test_empty_file_is_unreadable(self, tmp_path: Path) -> None:
        path = tmp_path / "x.db"
        path.write_bytes(b"")
        with pytest.raises(StoreUnreadable, match="empty"):
            _open.prepare_file(path, V1, busy_timeout_ms=100)


class TestMigrate:
    def test_steps_run_in_order_and_bump_the_version(self, tmp_path: Path) -> None:
        path = tmp_path / "x.db"
        _open.create_file(path, V1)
        conn = _open.connect(path, busy_timeout_ms=100)
        try:
            _open.migrate(conn, path, from_version=1, to_version=2, steps={2: add_hits})
            _open.check_tables(conn, path, V2)
            assert _open.count_rows(conn, V2.all_tables()) == {
                "notes": 0,
                "hits": 0,
                "store_meta": 1,
            }
        finally:
            conn.close()
        assert version_of(path) == 2

    def test_missing_step_fails_and_leaves_the_version(self, tmp_path: Path) -> None:
        path = tmp_path / "x.db"
        _open.create_file(path, V1)
        conn = _open.connect(path, busy_timeout_ms=100)
        try:
            with pytest.raises(MigrationFailed, match="no migration step to version 2"):
                _open.migrate(conn, path, from_version=1, to_version=2, steps={})
        finally:
            conn.close()
        assert version_of(path) == 1


class TestCheckTables:
    def test_undeclared_table_is_a_mismatch(self, tmp_path: Path) -> None:
        path = tmp_path / "x.db"
        _open.create_file(path, V1)
        conn = _open.connect(path, busy_timeout_ms=100)
        try:
            conn.execute("CREATE TABLE stray (x)")
            with pytest.raises(SchemaMismatch, match="stray"):
                _open.check_tables(conn, path, V1)
        finally:
            conn.close()

    def test_missing_declared_table_is_a_mismatch(self, tmp_path: Path) -> None:
        path = tmp_path / "x.db"
        _open.create_file(path, V1)
        conn = _open.connect(path, busy_timeout_ms=100)
        try:
            with pytest.raises(SchemaMismatch, match="hits"):
                _open.check_tables(conn, path, V2)
        finally:
            conn.close()


def test_quote_doubles_inner_quotes() -> None:
    assert _open.quote('a"b') == '"a""b"'
