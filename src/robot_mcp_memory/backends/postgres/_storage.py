"""The PostgreSQL storage: one database, shared by every replica.

:class:`PgStorage` is the database before anything is opened: no lock (replicas share it,
and no directory holds it), no files to copy (its ``backup`` is the dump format), and
the snapshot ``dump`` reads is one exported ``REPEATABLE READ READ ONLY`` snapshot
(:meth:`PgDatabase.snapshot <._database.PgDatabase.snapshot>`).
:class:`PgBackend` is the opened store: the pool and the adapters over it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import psycopg

from robot_mcp_kit.store import StoreUnavailable
from robot_mcp_memory.backends._fleet import SqlFleetRepo
from robot_mcp_memory.backends._ports import CopyRows
from robot_mcp_memory.backends._tokens import Tokenizer
from robot_mcp_memory.backends.postgres._database import META_TABLE, PgDatabase, describe_url
from robot_mcp_memory.backends.postgres._lessons import PgParamBackend
from robot_mcp_memory.backends.postgres._processes import PgProcessRepo
from robot_mcp_memory.backends.postgres._rows import PgProcessRows
from robot_mcp_memory.backends.postgres._schema import SCHEMA
from robot_mcp_memory.backends.postgres._sessions import PgSessions

__all__ = ["PgBackend", "PgStorage"]

Progress = Callable[[str], None]


class PgBackend:
    """An opened database: its pool and the adapters over it.

    Args:
        db: the opened database; the backend owns it from here.
    """

    def __init__(self, db: PgDatabase) -> None:
        self.db = db
        self.processes = PgProcessRepo(db, Tokenizer())
        self.fleet = SqlFleetRepo(PgSessions(db), db.where)
        self.lessons = PgParamBackend(db)
        self.ping: Callable[[], bool] | None = db.ping

    @property
    def where(self) -> str:
        """``user@host:port/db``, for messages."""
        return self.db.where

    def copy_rows(self) -> CopyRows:
        """The rows the copy command reads and writes."""
        return CopyRows(
            PgProcessRows(self.db, reindex=self.processes.rebuild_index),
            self.fleet,
            self.lessons,
        )

    def close(self) -> None:
        """Close the pool. Idempotent."""
        self.db.close()

    def __repr__(self) -> str:
        return f"<PgBackend {self.where!r}>"


class PgStorage:
    """A PostgreSQL database, before anything is opened.

    Args:
        url: a libpq URL (never shown: messages name ``user@host:port/db``).
        pool_size, statement_timeout_s, connect_timeout_s: as :class:`PgDatabase` takes
            them.
    """

    files = None

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 10,
        statement_timeout_s: float = 15.0,
        connect_timeout_s: float = 5.0,
    ) -> None:
        self._url = url
        self._pool_size = pool_size
        self._statement_timeout_s = statement_timeout_s
        self._connect_timeout_s = connect_timeout_s
        self.where = describe_url(url)
        self.described = f"{self.where} (PostgreSQL)"
        self.named = f"the PostgreSQL database {self.where}"
        self.identity = url  # two URLs naming one database differently are two storages

    def log_fields(self) -> dict[str, str | None]:
        """What the startup line says of the storage."""
        return {"data_dir": None, "database": self.where}

    def unusable(self, *, source: bool) -> str | None:
        """Why the database cannot be a copy's source (it holds no memory store); None
        when it can. Creates nothing.

        Raises:
            StoreUnavailable: the server cannot be reached.
        """
        if source and not self._holds_store():
            return (
                f"the PostgreSQL database {self.where} holds no memory store: give --from "
                "the MEMORY_DATABASE_URL of the server to copy, or a data directory"
            )
        return None

    def _holds_store(self) -> bool:
        """Whether the database has our ``store_meta`` table (read without creating
        anything)."""
        try:
            with psycopg.connect(self._url, connect_timeout=5) as conn:
                row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (META_TABLE,)).fetchone()
        except psycopg.OperationalError:
            raise StoreUnavailable(
                f"cannot connect to the PostgreSQL database {self.where}; check the URL and "
                "that PostgreSQL is running and accepts connections from this host",
                path=self.where,
            ) from None
        return bool(row and row[0])

    def open(self) -> PgBackend:
        """Connect and open (create, migrate) the schema.

        Raises:
            robot_mcp_kit.store.StoreError: unreachable, newer, or not ours.
        """
        db = PgDatabase(
            self._url,
            pool_size=self._pool_size,
            statement_timeout_s=self._statement_timeout_s,
            connect_timeout_s=self._connect_timeout_s,
        )
        db.open(schema=SCHEMA)  # by keyword: a positional argument reads as a file mode
        return PgBackend(db)

    def lock(self, remedy: str) -> contextlib.nullcontext[None]:
        """Nothing to hold: replicas share the database."""
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def snapshot(self, *, progress: Progress) -> Iterator[PgBackend]:
        """The database as of one moment, read only: every connection of the backend
        reads one exported snapshot while replicas keep writing. Closed at exit."""
        progress("reading one snapshot of the PostgreSQL database (REPEATABLE READ, READ ONLY)")
        backend = self.open()
        try:
            with backend.db.snapshot():
                yield backend
        finally:
            backend.close()

    def __repr__(self) -> str:
        return f"<PgStorage {self.where!r}>"
