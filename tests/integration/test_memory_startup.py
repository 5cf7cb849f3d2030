"""robot-mcp-memory refuses to start on what a restart cannot fix: one line, exit 2."""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    "garbage",
    [os.urandom(4096), b"SQLite format 3\x00" + b"\xff" * 200, b'{"truncated": tr'],
    ids=["random-bytes", "bad-header-body", "truncated-json"],
)
def test_corrupt_index_db_refuses_with_one_line_and_exit_2(tmp_path, garbage, run_memory_server):
    """Garbage in index.db: exit 2, one stderr line naming the file and the remedy, no traceback,
    and the file is left as it was."""
    index = tmp_path / "index.db"
    index.write_bytes(garbage)
    result = run_memory_server({"MEMORY_DATA_DIR": str(tmp_path)})
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert str(index) in lines[0]
    assert "backup" in lines[0]
    assert "move it aside" in lines[0]
    assert "Traceback" not in result.stderr
    assert index.read_bytes() == garbage


def test_invalid_transport_refuses_with_one_line_and_exit_2(tmp_path, run_memory_server):
    """MCP_TRANSPORT=bogus: exit 2, one line naming the variable and the valid values."""
    result = run_memory_server({"MCP_TRANSPORT": "bogus", "MEMORY_DATA_DIR": str(tmp_path)})
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "MCP_TRANSPORT='bogus'" in result.stderr
    assert "streamable-http" in result.stderr
    assert not (tmp_path / "index.db").exists()


# --- PostgreSQL (issue 20): the same one-line refusals -----------------------------------


def test_unreachable_database_refuses_with_one_line_and_exit_2(tmp_path, run_memory_server):
    """Nothing listens at MEMORY_DATABASE_URL: one line naming the database (never its
    password) and what to check, exit 2, nothing written to MEMORY_DATA_DIR."""
    result = run_memory_server(
        {
            "MEMORY_DATA_DIR": str(tmp_path / "data"),
            "MEMORY_DATABASE_URL": "postgresql://fleet:pw-not-shown@127.0.0.1:1/memory",
            "MEMORY_DATABASE_CONNECT_TIMEOUT_S": "1",
        }
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "fleet@127.0.0.1:1/memory" in lines[0]
    assert "MEMORY_DATABASE_URL" in lines[0]
    assert "pw-not-shown" not in result.stderr
    assert not (tmp_path / "data").exists()


def test_a_url_that_is_not_postgresql_refuses_with_one_line(tmp_path, run_memory_server):
    result = run_memory_server(
        {"MEMORY_DATA_DIR": str(tmp_path), "MEMORY_DATABASE_URL": "mysql://u:secret@db/m"}
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "postgresql://" in result.stderr
    assert "secret" not in result.stderr


def test_a_newer_database_schema_refuses_and_is_left_untouched(pg_url, run_memory_server):
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute(
            "INSERT INTO store_meta VALUES ('identity', 'robot-mcp-memory'), "
            "('schema_version', '999')"
        )
    result = run_memory_server({"MEMORY_DATABASE_URL": pg_url})
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "schema version 999" in result.stderr
    with psycopg.connect(pg_url) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema='public'"
        ).fetchall()
    assert tables == [("store_meta",)]


def test_a_database_of_another_application_is_refused(pg_url, run_memory_server):
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE orders (id INT)")
    result = run_memory_server({"MEMORY_DATABASE_URL": pg_url})
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "orders" in result.stderr
    assert "database of its own" in result.stderr
