"""Sessions over one PostgreSQL database: each session is one transaction of a pooled
connection (:meth:`PgDatabase.connection <._database.PgDatabase.connection>`),
its rows read by column name.

psycopg's integrity errors become the memory server's here: a foreign key violation is
:class:`~robot_mcp_memory.MissingReference`, any other
:class:`~robot_mcp_memory.WriteConflict`; a connection that is lost or cannot be had is
already :class:`~robot_mcp_kit.store.StoreUnavailable` (the database's).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.rows import dict_row

from robot_mcp_memory._exceptions import MissingReference, WriteConflict
from robot_mcp_memory.backends._sql import POSTGRES, Dialect, Row
from robot_mcp_memory.backends.postgres._database import PgDatabase

__all__ = ["PgSession", "PgSessions", "integrity_error"]


def integrity_error(exc: psycopg.errors.IntegrityError) -> WriteConflict:
    """The memory server's error for psycopg's integrity error ``exc``."""
    table = getattr(exc.diag, "table_name", None) or "a table"
    if isinstance(exc, psycopg.errors.ForeignKeyViolation):
        return MissingReference(f"a write to {table} named a record that does not exist")
    return WriteConflict(f"a write to {table} met a record the store keeps unique")


class PgSession:
    """Statements inside one transaction of ``conn``."""

    dialect: Dialect = POSTGRES

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    @property
    def conn(self) -> psycopg.Connection[Any]:
        """The connection of the transaction (for this backend's own statements)."""
        return self._conn

    def _cursor(self, sql: str, params: Sequence[Any]) -> psycopg.Cursor[dict[str, Any]]:
        try:
            return self._conn.cursor(row_factory=dict_row).execute(
                POSTGRES.sql(sql).encode(), tuple(params)
            )
        except psycopg.errors.IntegrityError as exc:
            raise integrity_error(exc) from None

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        return self._cursor(sql, params).fetchone()

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return list(self._cursor(sql, params).fetchall())

    def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        return int(self._cursor(sql, params).rowcount)

    def many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        try:
            with self._conn.cursor() as cur:
                cur.executemany(POSTGRES.sql(sql).encode(), [tuple(r) for r in rows])
        except psycopg.errors.IntegrityError as exc:
            raise integrity_error(exc) from None


class PgSessions:
    """The sessions of one database.

    Args:
        db: the opened database (not owned: the backend closes it).
    """

    def __init__(self, db: PgDatabase) -> None:
        self._db = db

    @contextmanager
    def read(self) -> Iterator[PgSession]:
        """One read-committed transaction."""
        with self._db.connection() as conn:
            yield PgSession(conn)

    @contextmanager
    def write(self) -> Iterator[PgSession]:
        """One transaction, committed at the end of the block."""
        with self._db.connection() as conn:
            yield PgSession(conn)

    @contextmanager
    def consistent(self) -> Iterator[PgSession]:
        """One ``REPEATABLE READ`` transaction: every read sees one moment."""
        with self._db.connection() as conn:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            yield PgSession(conn)
