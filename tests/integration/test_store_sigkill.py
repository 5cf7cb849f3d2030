"""A process killed with SIGKILL mid-stream of cold writes leaves a sound file."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from robot_mcp_kit.store import Kind, Schema, SqliteStore, Table

pytestmark = pytest.mark.slow

SCHEMA_SRC = """
from robot_mcp_kit.store import Kind, Schema, Table
SCHEMA = Schema(1, (
    Table("docs", Kind.DEFINITION,
          "CREATE TABLE docs (id INTEGER PRIMARY KEY, body TEXT NOT NULL)"),
    Table("docs_fts", Kind.DERIVED, "CREATE VIRTUAL TABLE docs_fts USING fts5(body)",
          derived_from="docs"),
))
"""

WRITER = """
import sys
from robot_mcp_kit.store import SqliteStore
from schema_def import SCHEMA
store = SqliteStore(sys.argv[1], SCHEMA)
i = 0
while True:
    i += 1
    body = f"document {i} " + "lorem ipsum " * 50
    with store.transaction() as conn:
        rowid = conn.execute("INSERT INTO docs (body) VALUES (?)", (body,)).lastrowid
        conn.execute("INSERT INTO docs_fts (rowid, body) VALUES (?, ?)", (rowid, body))
    print(rowid, flush=True)
"""


def test_sigkill_mid_cold_writes_keeps_every_returned_write(tmp_path):
    """After SIGKILL the file reopens, passes integrity_check, and holds every printed id."""
    (tmp_path / "schema_def.py").write_text(textwrap.dedent(SCHEMA_SRC))
    (tmp_path / "writer.py").write_text(textwrap.dedent(WRITER))
    db = tmp_path / "index.db"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    child = subprocess.Popen(
        [sys.executable, str(tmp_path / "writer.py"), str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    printed: list[int] = []
    try:
        deadline = time.monotonic() + 30
        assert child.stdout is not None
        while len(printed) < 200 and time.monotonic() < deadline:
            line = child.stdout.readline()
            if not line:
                break
            printed.append(int(line))
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
        # Lines written before the kill but not yet read also reported a returned write.
        printed += [int(x) for x in child.stdout.read().split()]
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
        if child.stdout:
            child.stdout.close()
        if child.stderr:
            stderr = child.stderr.read()
            child.stderr.close()
    assert child.returncode == -signal.SIGKILL, stderr
    assert len(printed) >= 200, stderr

    schema = Schema(
        1,
        (
            Table("docs", Kind.DEFINITION, "CREATE TABLE docs (id INTEGER PRIMARY KEY, body TEXT)"),
            Table(
                "docs_fts",
                Kind.DERIVED,
                "CREATE VIRTUAL TABLE docs_fts USING fts5(body)",
                derived_from="docs",
            ),
        ),
    )
    with SqliteStore(db, schema) as store:
        assert [tuple(r) for r in store.query("PRAGMA integrity_check")] == [("ok",)]
        ids = {r["id"] for r in store.query("SELECT id FROM docs")}
        indexed = {r[0] for r in store.query("SELECT rowid FROM docs_fts")}
    assert set(printed) <= ids
    assert indexed == ids  # row and index written in one transaction: they agree
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
