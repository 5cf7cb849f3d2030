"""PgProcessRows: the process documents' definition rows, read and written whole.

The narrow "bulk" interface the copy command (:mod:`robot_mcp_memory.transfer`) needs of a
process store beyond its service: count, export every document's definition row
(:data:`robot_mcp_memory.processes.COLUMNS`: id, counters and
timestamps exactly as stored) and import rows into an empty store in one transaction,
then recompute what is derived from them (the search columns and vectors) through the
process store's ``reindex``.

It reads and writes the ``processes`` table of the PostgreSQL schema with the SQLite
table's column names, ``shared`` a boolean; the table and its ``reindex`` belong to the
process adapter (``PgProcessStore``), which passes its ``reindex`` here. A database
without a ``processes`` table counts and exports nothing and refuses to import rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from psycopg.rows import dict_row

from robot_mcp_memory.backends.postgres._database import PgDatabase
from robot_mcp_memory.processes import COLUMNS

__all__ = ["PgProcessRows"]

PROCESS_COLUMNS = COLUMNS.split(", ")
_COLS = COLUMNS


class PgProcessRows:
    """Every process document's definition row in one PostgreSQL database.

    Args:
        db: the opened database.
        reindex: the process store's ``reindex`` (rebuilds the derived search columns and
            vectors from the rows; returns how many documents it indexed), or None where
            nothing is derived.
    """

    def __init__(self, db: PgDatabase, *, reindex: Callable[[], int] | None = None) -> None:
        self.db = db
        self._reindex = reindex

    def _has_table(self) -> bool:
        with self.db.connection() as conn:
            row = conn.execute("SELECT to_regclass('processes') IS NOT NULL").fetchone()
        return bool(row and row[0])

    def count_process_rows(self) -> int:
        """How many documents are stored."""
        if not self._has_table():
            return 0
        with self.db.connection() as conn:
            row = conn.execute("SELECT count(*) FROM processes").fetchone()
        return 0 if row is None else int(row[0])

    def export_process_rows(self) -> list[dict[str, Any]]:
        """Every document's row (``PROCESS_COLUMNS``), by id; ``shared`` a bool."""
        if not self._has_table():
            return []
        with self.db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute(f"SELECT {_COLS} FROM processes ORDER BY id".encode())  # noqa: S608
            rows = cur.fetchall()
        return [{**r, "shared": bool(r["shared"])} for r in rows]

    def import_process_rows(self, rows: Sequence[dict[str, Any]]) -> int | None:
        """Insert ``rows`` exactly in one transaction, then reindex; returns how many
        documents the reindex counted (None without a ``reindex``).

        Raises:
            RuntimeError: rows to import and no ``processes`` table in this database.
            psycopg.errors.UniqueViolation: an id already there (nothing is written).
        """
        if rows and not self._has_table():
            raise RuntimeError(
                f"the PostgreSQL database {self.db.where} has no processes table; "
                "this build cannot store process documents there"
            )
        marks = ", ".join(["%s"] * len(PROCESS_COLUMNS))
        with self.db.connection() as conn, conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO processes ({_COLS}) VALUES ({marks})".encode(),  # noqa: S608
                [tuple(r[c] for c in PROCESS_COLUMNS) for r in rows],
            )
        return None if self._reindex is None else self._reindex()

    def __repr__(self) -> str:
        return f"<PgProcessRows {self.db.where!r}>"
