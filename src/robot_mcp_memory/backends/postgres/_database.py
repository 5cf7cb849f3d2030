"""One PostgreSQL database: its connection pool, its schema check and its migrations.

:class:`PgDatabase` is what every PostgreSQL adapter holds. It owns a
``psycopg_pool.ConnectionPool`` (each connection with the statement timeout set), turns
every way of not reaching the server into :class:`~robot_mcp_kit.store.StoreUnavailable`
(the tool runner answers it ``unavailable``), and opens the schema the way
:class:`~robot_mcp_kit.store.SqliteStore` opens a file: a fresh database gets every
declared table, an older version is migrated forward, a newer one is refused
(``SchemaTooNew``) and a database holding tables that are not ours is refused
(``SchemaMismatch``). The check and the migration run in one transaction under a
transaction-level advisory lock, so replicas starting together migrate once.

Blocking, like the ports: adapters call it from the tool runner's worker threads. The
pool is thread-safe.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg
import psycopg_pool
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from robot_mcp_kit.log import get_logger
from robot_mcp_kit.store import (
    MigrationFailed,
    SchemaMismatch,
    SchemaTooNew,
    StoreClosed,
    StoreUnavailable,
    Table,
)

__all__ = [
    "META_TABLE",
    "MIGRATION_LOCK_KEY",
    "PgDatabase",
    "PgMigrationStep",
    "PgSchema",
    "describe_url",
]

_log = get_logger("robot_mcp_memory.postgres")

META_TABLE = "store_meta"
"""Our identity in the database: one row per key (``identity``, ``schema_version``)."""

MIGRATION_LOCK_KEY = 0x726F626F746D6370  # "robotmcp"
"""The advisory-lock key every replica takes while it checks and migrates the schema."""

_REMEDY = (
    "check MEMORY_DATABASE_URL (host, port, database, user) and that PostgreSQL is running "
    "and accepts connections from this host"
)

PgMigrationStep = Callable[[psycopg.Connection[Any]], None]
"""Moves a database from version ``n - 1`` to ``n`` inside the open transaction."""


@dataclass(frozen=True)
class PgSchema:
    """What a :class:`PgDatabase` opens: our identity, the version this code writes, every
    table (the kit's :class:`~robot_mcp_kit.store.Table`, with PostgreSQL DDL) and the
    forward steps ``{n: step from n - 1 to n}``.

    ``extensions`` are created when the database offers them (``CREATE EXTENSION IF NOT
    EXISTS``); a table whose name is in ``needs[ext]`` is created only where ``ext`` is.
    """

    identity: str
    version: int
    tables: tuple[Table, ...]
    migrations: Mapping[int, PgMigrationStep] = field(default_factory=dict)
    extensions: tuple[str, ...] = ()
    needs: Mapping[str, str] = field(default_factory=dict)

    def table_names(self) -> frozenset[str]:
        """Every table name this schema may create, ``store_meta`` included."""
        return frozenset(t.name for t in self.tables) | {META_TABLE}


@contextmanager
def _quiet_pool_log() -> Iterator[None]:
    pool_log = logging.getLogger("psycopg.pool")
    level = pool_log.level
    pool_log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        pool_log.setLevel(level)


def describe_url(url: str) -> str:
    """``user@host:port/dbname`` of a libpq URL, never its password (for messages and logs)."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "an unparsable MEMORY_DATABASE_URL"
    host = str(parts.get("host") or "localhost")
    port = str(parts.get("port") or "5432")
    user = str(parts.get("user") or "")
    db = str(parts.get("dbname") or user or "postgres")
    return f"{user + '@' if user else ''}{host}:{port}/{db}"


class PgDatabase:
    """A pool of connections to one database, opened against a :class:`PgSchema`.

    Args:
        url: a libpq URL (``postgresql://user:pass@host:5432/db``; unix sockets as
            ``postgresql:///db?host=/run/postgresql``).
        pool_size: most connections held.
        statement_timeout_s: the server cancels a statement that runs longer.
        connect_timeout_s: how long :meth:`open` and each :meth:`connection` wait for a
            connection before :class:`StoreUnavailable`.
    """

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 10,
        statement_timeout_s: float = 15.0,
        connect_timeout_s: float = 5.0,
    ) -> None:
        self.where = describe_url(url)
        self.connect_timeout_s = connect_timeout_s
        self.statement_timeout_s = statement_timeout_s
        self.extensions: frozenset[str] = frozenset()
        self._closed = False
        self._snapshot: str | None = None
        self._lock = threading.Lock()
        self._pool: psycopg_pool.ConnectionPool[psycopg.Connection[Any]] = (
            psycopg_pool.ConnectionPool(
                url,
                min_size=1,
                max_size=pool_size,
                open=False,
                timeout=connect_timeout_s,
                reconnect_timeout=max(30.0, connect_timeout_s),
                check=psycopg_pool.ConnectionPool.check_connection,
                name="robot-mcp-memory",
                kwargs={
                    "connect_timeout": max(1, round(connect_timeout_s)),
                    "options": f"-c statement_timeout={round(statement_timeout_s * 1000)}",
                    "application_name": "robot-mcp-memory",
                },
            )
        )

    # --- lifetime ---------------------------------------------------------------------

    def open(self, schema: PgSchema) -> None:
        """Connect and check (or create, or migrate) ``schema``.

        Raises:
            StoreUnavailable: the server cannot be reached in ``connect_timeout_s``.
            SchemaTooNew: the database was written by a newer release; nothing changed.
            SchemaMismatch: the database holds tables that are not ours; nothing changed.
            MigrationFailed: a forward step failed; rolled back, the version is unchanged.
        """
        try:
            with _quiet_pool_log():  # a refusal is our one line, not the pool's retries too
                self._pool.open(wait=True, timeout=self.connect_timeout_s)
        except psycopg_pool.PoolTimeout:
            self._pool.close()
            raise StoreUnavailable(
                f"cannot connect to the PostgreSQL database {self.where} within "
                f"{self.connect_timeout_s:g} s; {_REMEDY}",
                path=self.where,
                remedy=_REMEDY,
            ) from None
        try:
            with self.connection() as conn:
                self._open_schema(conn, schema)
        except BaseException:
            self._pool.close()
            raise

    def close(self) -> None:
        """Close every connection. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._pool.close()

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._closed

    # --- connections ------------------------------------------------------------------

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection inside one transaction: committed when the block ends,
        rolled back when it raises.

        Raises:
            StoreUnavailable: no connection within ``connect_timeout_s``, or the connection
                was lost during the block (the transaction did not commit).
            StoreClosed: after :meth:`close`.
        """
        if self._closed:
            raise StoreClosed(f"the database {self.where} was closed", path=self.where)
        try:
            with self._pool.connection(timeout=self.connect_timeout_s) as conn:
                if self._snapshot is not None:
                    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    conn.execute(
                        sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(self._snapshot))
                    )
                yield conn
        except psycopg_pool.PoolTimeout:
            raise self._unavailable("no connection became free or could be made") from None
        except psycopg.OperationalError as exc:
            if isinstance(exc, psycopg.errors.QueryCanceled):
                raise StoreUnavailable(
                    f"a statement on {self.where} ran longer than "
                    f"MEMORY_DATABASE_STATEMENT_TIMEOUT_S={self.statement_timeout_s:g} s and "
                    "was cancelled; nothing was written",
                    path=self.where,
                    remedy="retry; if it recurs, raise MEMORY_DATABASE_STATEMENT_TIMEOUT_S",
                ) from None
            raise self._unavailable("the connection failed or was lost") from None

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Inside the block, every :meth:`connection` is a ``REPEATABLE READ READ ONLY``
        transaction on ONE snapshot of the database (exported by a transaction this
        method holds open): what several calls read is the database as of one moment,
        whatever other replicas commit meanwhile, and nothing can be written.

        For a database opened for one reader (``dump``, ``backup``), not one a server
        shares: it changes every connection of this pool. Needs a ``pool_size`` of at
        least 2 (the holder and a reader; ``MEMORY_DATABASE_POOL_SIZE`` is at least 2).

        Raises:
            StoreUnavailable: as :meth:`connection`.
        """
        with self.connection() as holder:
            holder.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            row = holder.execute("SELECT pg_export_snapshot()").fetchone()
            assert row is not None
            self._snapshot = str(row[0])
            try:
                yield
            finally:
                self._snapshot = None

    def _unavailable(self, what: str) -> StoreUnavailable:
        _log.warning("database_unavailable", where=self.where, what=what)
        return StoreUnavailable(
            f"the PostgreSQL database {self.where} is unavailable ({what}); nothing was "
            f"written; {_REMEDY}",
            path=self.where,
            remedy=_REMEDY,
        )

    def ping(self) -> bool:
        """True when a ``SELECT 1`` answers (``/healthz``)."""
        try:
            with self.connection() as conn:
                conn.execute("SELECT 1")
        except (StoreUnavailable, StoreClosed):
            return False
        return True

    # --- schema -----------------------------------------------------------------------

    def _open_schema(self, conn: psycopg.Connection[Any], schema: PgSchema) -> None:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))
        available = {
            row[0]
            for row in conn.execute(
                "SELECT name FROM pg_available_extensions WHERE name = ANY(%s)",
                (list(schema.extensions),),
            )
        }
        for ext in schema.extensions:
            if ext in available:
                conn.execute(
                    sql.SQL("CREATE EXTENSION IF NOT EXISTS {}").format(sql.Identifier(ext))
                )
        self.extensions = frozenset(
            row[0]
            for row in conn.execute(
                "SELECT extname FROM pg_extension WHERE extname = ANY(%s)",
                (list(schema.extensions),),
            )
        )
        present = {
            row[0]
            for row in conn.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema()"
            )
        }
        if META_TABLE not in present:
            strangers = sorted(present)
            if strangers:
                raise SchemaMismatch(
                    f"the PostgreSQL database {self.where} holds tables that are not a "
                    f"{schema.identity} store ({', '.join(strangers[:5])}); point "
                    "MEMORY_DATABASE_URL at an empty database of its own",
                    path=self.where,
                )
            self._create(conn, schema)
            _log.info("database_created", where=self.where, version=schema.version)
            return
        meta = dict(conn.execute(f"SELECT key, value FROM {META_TABLE}").fetchall())  # noqa: S608
        if meta.get("identity") != schema.identity:
            raise SchemaMismatch(
                f"the PostgreSQL database {self.where} belongs to "
                f"{meta.get('identity')!r}, not {schema.identity!r}; point "
                "MEMORY_DATABASE_URL at a database of its own",
                path=self.where,
            )
        version = int(meta.get("schema_version", "0"))
        if version > schema.version:
            raise SchemaTooNew(
                f"the PostgreSQL database {self.where} is at schema version {version}, newer "
                f"than this release's {schema.version}; run the release that wrote it (or "
                "newer), or restore a backup taken before the upgrade",
                path=self.where,
            )
        for target in range(version + 1, schema.version + 1):
            step = schema.migrations.get(target)
            if step is None:
                raise MigrationFailed(
                    f"no migration from version {target - 1} to {target} of {schema.identity}",
                    path=self.where,
                )
            try:
                with conn.transaction():
                    step(conn)
            except psycopg.Error as exc:
                raise MigrationFailed(
                    f"migrating {self.where} to version {target} failed "
                    f"({type(exc).__name__}); nothing was changed",
                    path=self.where,
                ) from exc
            conn.execute(
                f"UPDATE {META_TABLE} SET value = %s WHERE key = 'schema_version'",  # noqa: S608
                (str(target),),
            )
            _log.info("database_migrated", where=self.where, version=target)
        missing = self._wanted(schema) - present
        if version == schema.version and missing:
            for table in schema.tables:  # an extension installed since: its tables now
                if table.name in missing:
                    self._create_table(conn, table)

    def _wanted(self, schema: PgSchema) -> set[str]:
        return {
            t.name
            for t in schema.tables
            if schema.needs.get(t.name) is None or schema.needs[t.name] in self.extensions
        }

    def _create(self, conn: psycopg.Connection[Any], schema: PgSchema) -> None:
        conn.execute(f"CREATE TABLE {META_TABLE} (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute(
            f"INSERT INTO {META_TABLE} (key, value) VALUES ('identity', %s), "  # noqa: S608
            "('schema_version', %s)",
            (schema.identity, str(schema.version)),
        )
        wanted = self._wanted(schema)
        for table in schema.tables:
            if table.name in wanted:
                self._create_table(conn, table)

    @staticmethod
    def _create_table(conn: psycopg.Connection[Any], table: Table) -> None:
        conn.execute(table.ddl.encode())
        for index in table.indexes:
            conn.execute(index.encode())
