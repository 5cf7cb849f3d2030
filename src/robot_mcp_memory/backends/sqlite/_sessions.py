"""Sessions over ``index.db``: the kit store's readers for reads, its write transaction
(``BEGIN IMMEDIATE``, a savepoint when one is already open on the thread) for writes.

SQLite's integrity errors become the memory server's here: a failed foreign key is
:class:`~robot_mcp_memory.MissingReference`, any other constraint
:class:`~robot_mcp_memory.WriteConflict`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from robot_mcp_kit.store import SqliteStore
from robot_mcp_memory._exceptions import MissingReference, WriteConflict
from robot_mcp_memory.backends._sql import SQLITE, Dialect, Row

__all__ = ["SqliteSessions", "SqliteTransaction", "integrity_error"]


def integrity_error(exc: sqlite3.IntegrityError) -> WriteConflict:
    """The memory server's error for SQLite's integrity error ``exc``."""
    text = str(exc)
    if "FOREIGN KEY" in text:
        return MissingReference(f"a write named a record that does not exist ({text})")
    return WriteConflict(f"a write met a record the store keeps unique ({text})")


@contextmanager
def _ours() -> Iterator[None]:
    """SQLite's integrity errors raised inside, as the memory server's."""
    try:
        yield
    except sqlite3.IntegrityError as exc:
        raise integrity_error(exc) from None


class _Reads:
    """Each statement on one of the store's reader connections (a snapshot of its own)."""

    dialect: Dialect = SQLITE

    def __init__(self, store: SqliteStore) -> None:
        self._store = store

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        return self._store.query_one(sql, tuple(params))

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return list(self._store.query(sql, tuple(params)))

    def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        raise TypeError("a read session does not write; use Sessions.write()")

    def many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        raise TypeError("a read session does not write; use Sessions.write()")


class SqliteTransaction:
    """Statements inside one open transaction of the write connection."""

    dialect: Dialect = SQLITE

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    @property
    def conn(self) -> sqlite3.Connection:
        """The write connection (for this backend's own statements)."""
        return self._conn

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        with _ours():
            row: Row | None = self._conn.execute(sql, tuple(params)).fetchone()
        return row

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        with _ours():
            return list(self._conn.execute(sql, tuple(params)).fetchall())

    def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        with _ours():
            return int(self._conn.execute(sql, tuple(params)).rowcount)

    def many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        with _ours():
            self._conn.executemany(sql, [tuple(r) for r in rows])


class SqliteSessions:
    """The sessions of one ``index.db``.

    Args:
        store: the kit store (not owned: the backend closes it).
    """

    def __init__(self, store: SqliteStore) -> None:
        self._store = store
        self._reads = _Reads(store)

    @staticmethod
    def on(conn: sqlite3.Connection) -> SqliteTransaction:
        """A session inside the write transaction open on ``conn``."""
        return SqliteTransaction(conn)

    @staticmethod
    def reads(store: SqliteStore) -> _Reads:
        """A read session over ``store``'s readers."""
        return _Reads(store)

    @contextmanager
    def read(self) -> Iterator[_Reads]:
        """Reads, each its own snapshot (WAL readers never wait for the writer)."""
        yield self._reads

    @contextmanager
    def write(self) -> Iterator[SqliteTransaction]:
        """One write transaction (joining an open one on this thread as a savepoint)."""
        with self._store.transaction() as conn:
            yield SqliteTransaction(conn)

    @contextmanager
    def consistent(self) -> Iterator[SqliteTransaction]:
        """Several reads of one moment: a transaction (it holds the write lock)."""
        with self._store.transaction() as conn:
            yield SqliteTransaction(conn)
