"""PgDatabase against a real PostgreSQL: create, reopen, migrate, refuse, unavailable."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

from robot_mcp_kit.store import (
    Kind,
    MigrationFailed,
    SchemaMismatch,
    SchemaTooNew,
    StoreClosed,
    StoreUnavailable,
    Table,
)
from robot_mcp_memory.backends.postgres._database import PgDatabase, PgSchema, describe_url

NOTES = Table(
    "notes", Kind.DEFINITION, "CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT NOT NULL)"
)
V1 = PgSchema("test-store", 1, (NOTES,))


def _add_column(conn: psycopg.Connection[Any]) -> None:
    conn.execute("ALTER TABLE notes ADD COLUMN n INTEGER NOT NULL DEFAULT 0")


V2 = PgSchema("test-store", 2, (NOTES,), migrations={2: _add_column})


def _open(url: str, schema: PgSchema = V1, **kw: Any) -> PgDatabase:
    db = PgDatabase(url, **kw)
    db.open(schema)
    return db


def test_fresh_database_gets_every_table_and_reopens(pg_url: str) -> None:
    db = _open(pg_url)
    with db.connection() as conn:
        conn.execute("INSERT INTO notes VALUES ('a', 'x')")
    db.close()
    db = _open(pg_url)
    with db.connection() as conn:
        assert conn.execute("SELECT body FROM notes").fetchall() == [("x",)]
    assert db.ping()
    db.close()
    assert not db.ping()


def test_older_schema_migrates_once_newer_is_refused(pg_url: str) -> None:
    _open(pg_url).close()
    db = _open(pg_url, V2)
    with db.connection() as conn:
        conn.execute("INSERT INTO notes VALUES ('a', 'x', 3)")
        version = conn.execute("SELECT value FROM store_meta WHERE key='schema_version'")
        assert version.fetchone() == ("2",)
    db.close()
    with pytest.raises(SchemaTooNew, match="newer than this release's 1"):
        _open(pg_url, V1)


def test_replicas_opening_together_migrate_once(pg_url: str) -> None:
    _open(pg_url).close()
    errors: list[BaseException] = []

    def start() -> None:
        try:
            _open(pg_url, V2).close()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_failed_migration_leaves_the_version(pg_url: str) -> None:
    _open(pg_url).close()

    def broken(conn: psycopg.Connection[Any]) -> None:
        conn.execute("ALTER TABLE notes ADD COLUMN n INTEGER")
        conn.execute("SELECT no_such_function()")

    with pytest.raises(MigrationFailed, match="nothing was changed"):
        _open(pg_url, PgSchema("test-store", 2, (NOTES,), migrations={2: broken}))
    db = _open(pg_url)  # still version 1, still without the column
    with db.connection() as conn:
        cols = conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name='notes'"
        ).fetchall()
    assert sorted(c[0] for c in cols) == ["body", "id"]
    db.close()


def test_a_database_that_is_not_ours_is_refused_untouched(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE invoices (id INT)")
    with pytest.raises(SchemaMismatch, match="invoices"):
        _open(pg_url)
    with psycopg.connect(pg_url) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema='public'"
        ).fetchall()
    assert tables == [("invoices",)]


def test_another_identity_is_refused(pg_url: str) -> None:
    _open(pg_url).close()
    with pytest.raises(SchemaMismatch, match="belongs to 'test-store'"):
        _open(pg_url, PgSchema("other-store", 1, (NOTES,)))


def test_unreachable_server_is_one_clear_error_without_the_password() -> None:
    url = "postgresql://robot:s3cret-pw@127.0.0.1:1/fleet"
    with pytest.raises(StoreUnavailable) as caught:
        _open(url, connect_timeout_s=1)
    message = str(caught.value)
    assert "robot@127.0.0.1:1/fleet" in message
    assert "MEMORY_DATABASE_URL" in message
    assert "s3cret" not in message


def test_statement_timeout_answers_unavailable_and_writes_nothing(pg_url: str) -> None:
    db = _open(pg_url, statement_timeout_s=0.2)

    def slow_write() -> None:
        with db.connection() as conn:
            conn.execute("INSERT INTO notes VALUES ('a', 'x')")
            conn.execute("SELECT pg_sleep(2)")

    with pytest.raises(StoreUnavailable, match="MEMORY_DATABASE_STATEMENT_TIMEOUT_S"):
        slow_write()
    with db.connection() as conn:
        assert conn.execute("SELECT count(*) FROM notes").fetchone() == (0,)
    db.close()
    with pytest.raises(StoreClosed), db.connection():
        pass


def test_describe_url_never_shows_a_password() -> None:
    assert describe_url("postgresql://u:pw@db.example:6543/mem") == "u@db.example:6543/mem"
    assert describe_url("postgresql:///mem?host=/run/postgresql") == "/run/postgresql:5432/mem"


def test_a_snapshot_reads_one_moment_and_writes_nothing(pg_url: str) -> None:
    """What ``dump`` and ``backup`` rely on: every connection in the block sees the
    database as of the moment the block began, whatever another replica commits."""
    db, other = _open(pg_url), _open(pg_url)
    with other.connection() as conn:
        conn.execute("INSERT INTO notes VALUES ('before', 'x')")
    with db.snapshot():
        with other.connection() as conn:
            conn.execute("INSERT INTO notes VALUES ('during', 'x')")
        for _ in range(2):  # two transactions, two (pooled) connections: one moment
            with db.connection() as conn:
                assert conn.execute("SELECT count(*) FROM notes").fetchone() == (1,)
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction), db.connection() as conn:
            conn.execute("INSERT INTO notes VALUES ('from-the-dump', 'x')")
    with db.connection() as conn:
        assert conn.execute("SELECT count(*) FROM notes").fetchone() == (2,)
    db.close()
    other.close()
