"""PgProcessRows: the process documents' stored tables, read and written whole.

The narrow "bulk" interface the copy command (:mod:`robot_mcp_memory.transfer`) needs of a
process store beyond its repository: count, export the rows of ``processes`` (every
document: id, counters, timestamps, revision number and recent outcomes exactly as stored)
and ``processes_revisions`` (the versions writes replaced), and import rows into an empty
store in one transaction, then recompute what is derived from them (the search columns and
vectors) through the process store's ``reindex``.

Each table is read with every column it has (looked up in the catalog, so a column a
later schema adds is copied without being named here), except ``processes.rid``, the row
number the derived tables refer to (the destination numbers its rows itself). Values are
as SQLite stores them: a ``boolean`` column reads as 0 or 1 and is written back as a
boolean. The tables and their ``reindex`` belong to the process repository
(``PgProcessRepo``), whose ``rebuild_index`` the backend passes here. A database without one of the
tables counts and exports nothing of it and refuses to import rows into it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from psycopg import sql

from robot_mcp_memory.backends.postgres._database import PgDatabase
from robot_mcp_memory.backends.postgres._tables import PROCESSES, PROCESSES_REVISIONS

__all__ = ["PgProcessRows"]

_TABLES = (PROCESSES.name, PROCESSES_REVISIONS.name)

_NOT_COPIED = {PROCESSES.name: frozenset({"rid"})}
"""PostgreSQL's own columns: the row number every derived row refers to."""


class PgProcessRows:
    """Every process document's row and kept revision in one PostgreSQL database.

    Args:
        db: the opened database.
        reindex: the process store's ``reindex`` (rebuilds the derived search columns and
            vectors from the rows; returns how many documents it indexed), or None where
            nothing is derived.
    """

    def __init__(self, db: PgDatabase, *, reindex: Callable[[], int] | None = None) -> None:
        self.db = db
        self._reindex = reindex

    def _types(self, table: str) -> dict[str, str]:
        """``{column: type}`` of ``table`` in column order (empty: no such table).

        Raises:
            ValueError: ``table`` is not one of the process tables.
        """
        if table not in _TABLES:
            raise ValueError(f"{table!r} is not one of {_TABLES}")
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute AS a "
                "WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped "
                "ORDER BY a.attnum",
                (table,),
            ).fetchall()
        skipped = _NOT_COPIED.get(table, frozenset())
        return {str(name): str(kind) for name, kind in rows if name not in skipped}

    def count_process_rows(self) -> int:
        """How many documents are stored."""
        if not self._types(PROCESSES.name):
            return 0
        with self.db.connection() as conn:
            row = conn.execute("SELECT count(*) FROM processes").fetchone()
        return 0 if row is None else int(row[0])

    def columns(self, table: str) -> tuple[str, ...]:
        """The columns of ``table`` the copy reads and writes (``rid`` left out)."""
        return tuple(self._types(table))

    def export_table(self, table: str) -> list[dict[str, Any]]:
        """Every row of ``table`` (a boolean as 0 or 1)."""
        types = self._types(table)
        if not types:
            return []
        query = sql.SQL("SELECT {} FROM {}").format(
            sql.SQL(", ").join(sql.Identifier(c) for c in types), sql.Identifier(table)
        )
        with self.db.connection() as conn:
            rows = conn.execute(query).fetchall()
        flags = [types[c] == "boolean" for c in types]
        return [
            {
                c: int(v) if flag and v is not None else v
                for c, v, flag in zip(types, row, flags, strict=True)
            }
            for row in rows
        ]

    def import_tables(self, tables: Mapping[str, Sequence[dict[str, Any]]]) -> int | None:
        """Insert each table's rows exactly, all in one transaction, then reindex; returns
        how many documents the reindex counted (None without a ``reindex``).

        Raises:
            RuntimeError: rows to import into a table this database does not have.
            psycopg.errors.UniqueViolation: a row already there (nothing is written).
        """
        statements = []
        for table, rows in tables.items():
            if not rows:
                continue
            types = self._types(table)
            if not types:
                raise RuntimeError(
                    f"the PostgreSQL database {self.db.where} has no {table} table; "
                    "this build cannot store process documents there"
                )
            columns = list(rows[0])
            insert = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
                sql.Identifier(table),
                sql.SQL(", ").join(sql.Identifier(c) for c in columns),
                sql.SQL(", ").join(sql.Placeholder() for _ in columns),
            )
            flags = [types.get(c) == "boolean" for c in columns]
            values = [
                tuple(
                    bool(r[c]) if flag and r[c] is not None else r[c]
                    for c, flag in zip(columns, flags, strict=True)
                )
                for r in rows
            ]
            statements.append((insert, values))
        with self.db.connection() as conn, conn.cursor() as cur:
            for insert, values in statements:
                cur.executemany(insert, values)
        return None if self._reindex is None else self._reindex()

    def __repr__(self) -> str:
        return f"<PgProcessRows {self.db.where!r}>"
