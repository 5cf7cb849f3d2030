"""``SqliteStore``: a versioned SQLite file whose writes follow the kind of what they write.

Connections and threads (the contract callers rely on):

- One WRITE connection, guarded by one re-entrant lock. Cold writes (``transaction``,
  ``execute``, ``prune``) run on it synchronously, on the caller's thread. The writer
  thread runs hot writes (``enqueue``) on it, one bounded batch per transaction.
- READS (``query``, ``query_one``, ``counts``) use a read-only connection per calling
  thread, so a reader never waits for the writer's lock (WAL lets readers and the writer
  run at once). A read made inside ``transaction()`` on the same thread goes through the
  write connection instead, so it sees that transaction's own uncommitted writes.
- The file is in WAL mode with ``synchronous=NORMAL``: a commit survives the process being
  killed (SIGKILL, OOM) — a test proves it — but the last commits before an OS crash or
  power loss may roll back; the file is never left corrupt.

Opening (read-only inspection, creation, migration, the table check) is the functions
of ``_open.py``, which ``__init__`` calls in order; this module is the open store: reads,
transactions, hot writes, pruning and closing.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path

from robot_mcp_kit._exceptions import (
    InvalidArgument,
    PruneRefused,
    StoreClosed,
)
from robot_mcp_kit.log import get_logger
from robot_mcp_kit.models import format_ts
from robot_mcp_kit.store import _open
from robot_mcp_kit.store._kinds import Kind, Table
from robot_mcp_kit.store._open import quote as _q
from robot_mcp_kit.store._schema import MigrationStep, Schema
from robot_mcp_kit.store._writer import HotWriter, Params, StoreStats
from robot_mcp_kit.telemetry import observe

__all__ = ["SqliteStore"]

_log = get_logger("robot_mcp_kit.store")


class SqliteStore:
    """A SQLite file declared by a :class:`Schema`.

    Opens at construction: creates a missing file at ``schema.version``; migrates an older
    one forward, each step in one transaction with its version bump; refuses a newer file
    (``SchemaTooNew``) and a file that is not a database (``StoreUnreadable``, naming the
    path and the remedy) without touching either; refuses a file holding a table that is
    neither declared nor sqlite's own (``SchemaMismatch``). Logs one ``store_ready`` line.

    Args:
        path: the database file; its directory is created if missing.
        schema: what the file holds.
        migrations: overrides ``schema.migrations`` (tests inject steps here).
        hot_queue_max: bound of the hot-write queue; ``enqueue`` drops beyond it.
        batch_max: most hot records written per transaction (bounds how long the writer
            holds the write lock, and so how long a cold write can wait for it).
        busy_timeout_ms: how long a statement waits for another process's lock.
        write_cache_kib: the page cache of the write connection (None: sqlite's ~2 MiB). A
            table whose writes touch many pages (an inverted index) needs its pages cached.
        checkpoint_pages: the WAL size, in pages, at which a commit checkpoints (None:
            sqlite's 1 000). Larger means fewer, bigger checkpoints: a page written by many
            commits is copied back once.
        full_check: inspect an existing file with ``PRAGMA integrity_check`` (every index
            against its table) rather than ``quick_check``; for small files whose every
            row matters (the durable outbox).
        check_rows: called with the open write connection after the table check and
            before the store is ready (and logged so); whatever it raises refuses the file
            (closed, nothing written). For a check of the rows themselves.

    Raises:
        StoreUnreadable, SchemaTooNew, SchemaMismatch, MigrationFailed: see above.

    All methods are thread-safe. After ``close()`` every method raises ``StoreClosed``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        schema: Schema,
        *,
        migrations: Mapping[int, MigrationStep] | None = None,
        hot_queue_max: int = 10_000,
        batch_max: int = 512,
        busy_timeout_ms: int = 5_000,
        write_cache_kib: int | None = None,
        checkpoint_pages: int | None = None,
        full_check: bool = False,
        check_rows: Callable[[sqlite3.Connection], None] | None = None,
    ) -> None:
        self.path = Path(path).absolute()
        self.schema = schema
        self._busy_timeout_ms = busy_timeout_ms
        self._tables = schema.all_tables()
        self._closed = False
        self._close_lock = threading.Lock()
        self._lock = threading.RLock()
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()

        started = time.monotonic()
        created, from_version = _open.prepare_file(
            self.path, schema, busy_timeout_ms=busy_timeout_ms, full_check=full_check
        )
        self._conn = _open.connect(
            self.path,
            busy_timeout_ms=busy_timeout_ms,
            cache_kib=write_cache_kib,
            checkpoint_pages=checkpoint_pages,
        )
        try:
            if from_version < schema.version and not created:
                _open.migrate(
                    self._conn,
                    self.path,
                    from_version=from_version,
                    to_version=schema.version,
                    steps=schema.migrations if migrations is None else migrations,
                )
            _open.check_tables(self._conn, self.path, schema)
            if check_rows is not None:
                check_rows(self._conn)
            counts = _open.count_rows(self._conn, self._tables)
        except BaseException:
            self._conn.close()
            raise
        self._writer = HotWriter(
            self._conn,
            self._lock,
            queue_max=hot_queue_max,
            batch_max=batch_max,
            name=f"store-writer:{self.path.name}",
        )
        name = {"robot_mcp.store": self.path.name}
        observe("robot_mcp.store.hot_queue", self, lambda s: [(s.stats.queued, name)])
        observe("robot_mcp.store.hot_dropped", self, lambda s: [(s.stats.dropped, name)])
        _log.info(
            "store_ready",
            path=str(self.path),
            from_version=from_version,
            to_version=schema.version,
            new_file=created,
            counts=counts,
            ms=int((time.monotonic() - started) * 1000),
        )

    # --- plumbing --------------------------------------------------------------------

    def _ensure_open(self) -> None:
        if self._closed:
            raise StoreClosed(f"the store at {self.path} is closed", path=str(self.path))

    def _reader(self) -> sqlite3.Connection:
        if getattr(self._local, "depth", 0):
            return self._conn  # inside transaction(): see our own uncommitted writes
        conn: sqlite3.Connection | None = getattr(self._local, "reader", None)
        if conn is None:
            conn = sqlite3.connect(
                f"{self.path.as_uri()}?mode=ro",
                uri=True,
                isolation_level=None,
                check_same_thread=False,  # so close() may close it from another thread
            )
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout={int(self._busy_timeout_ms)}")
            with self._readers_lock:
                self._readers.append(conn)
            self._local.reader = conn
        return conn

    def set_trace_callback(self, callback: Callable[[str], object] | None) -> None:
        """Install sqlite's statement trace on the write connection (None removes it).

        The callback runs on the thread that executes each statement — which is how a test
        tells the writer thread's hot writes from a caller's cold ones.
        """
        self._ensure_open()
        with self._lock:
            self._conn.set_trace_callback(callback)

    # --- reads -----------------------------------------------------------------------

    def query(self, sql: str, params: Params = ()) -> list[sqlite3.Row]:
        """Run a read and return all rows. Any thread; read-only (a write raises)."""
        self._ensure_open()
        conn = self._reader()
        if conn is self._conn:
            with self._lock:
                return conn.execute(sql, params).fetchall()
        return conn.execute(sql, params).fetchall()

    def query_one(self, sql: str, params: Params = ()) -> sqlite3.Row | None:
        """Run a read and return its first row, or None."""
        rows = self.query(sql, params)
        return rows[0] if rows else None

    # --- cold writes -----------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A cold write on the caller's thread: ``BEGIN IMMEDIATE`` … ``COMMIT``.

        Rolls back and re-raises on an exception. Nested use on the same thread becomes a
        savepoint. Use the yielded connection's ``execute``; do not commit on it. It waits
        for the write lock (at most one hot batch) and holds it until the block ends.
        """
        self._ensure_open()
        with self._lock:
            self._ensure_open()
            depth: int = getattr(self._local, "depth", 0)
            conn = self._conn
            if depth == 0:
                conn.execute("BEGIN IMMEDIATE")
            else:
                conn.execute(f"SAVEPOINT sp{depth}")
            self._local.depth = depth + 1
            try:
                yield conn
            except BaseException:
                self._local.depth = depth
                if depth == 0:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                else:
                    conn.execute(f"ROLLBACK TO sp{depth}")
                    conn.execute(f"RELEASE sp{depth}")
                raise
            self._local.depth = depth
            if depth == 0:
                conn.execute("COMMIT")
            else:
                conn.execute(f"RELEASE sp{depth}")

    def execute(self, sql: str, params: Params = ()) -> int:
        """Run one cold write in its own transaction; return its rowcount."""
        with self.transaction() as conn:
            return conn.execute(sql, params).rowcount

    # --- hot writes ------------------------------------------------------------------

    def enqueue(self, sql: str, params: Params = ()) -> bool:
        """Queue a hot write for the writer thread. Never blocks.

        Returns False — and counts one drop — when the queue is full. A queued write that
        fails when executed is logged and counted in ``stats.failed``.
        """
        self._ensure_open()
        return self._writer.enqueue(sql, params)

    def flush(self, timeout_s: float | None = None) -> None:
        """Block until every write enqueued before this call is written (or failed).

        Raises:
            FlushTimeout: if ``timeout_s`` elapses first (a ``TimeoutError``).
        """
        self._ensure_open()
        self._writer.flush(timeout_s)

    async def aflush(self, timeout_s: float | None = None) -> None:
        """``flush`` without blocking the event loop (runs it in a worker thread)."""
        self._ensure_open()
        await asyncio.to_thread(self._writer.flush, timeout_s)

    @property
    def stats(self) -> StoreStats:
        """The hot path's counters (readable after close, too)."""
        return self._writer.stats()

    # --- retention -------------------------------------------------------------------

    def prune(
        self,
        table: str,
        *,
        older_than_s: float | None = None,
        keep_last: int | None = None,
        spare: Mapping[str, str | int] | None = None,
        spare_where: str | None = None,
        within: Mapping[str, str | int] | None = None,
    ) -> int:
        """Delete old rows from a declared RECORD table; return how many were deleted.

        The one chokepoint that deletes by age or count. ``older_than_s`` deletes rows whose
        ``time_column`` is older than that many seconds; ``keep_last`` keeps only the N
        newest rows (by ``time_column``, else rowid). Both may be given. Rows whose columns
        hold every value in ``spare`` (e.g. ``{"state": "pending"}``), and rows matching
        the SQL condition ``spare_where`` (the caller's own SQL, never user input), are
        never deleted and do not count towards ``keep_last``. ``within`` (e.g.
        ``{"doc_id": id}``) confines the prune to the rows whose columns hold every value
        in it, bound as parameters: a per-owner bound (``keep_last`` per document) that an
        index on those columns serves without scanning the table. A cold write.

        Raises:
            PruneRefused: before deleting anything, unless ``table`` is a declared RECORD.
            InvalidArgument: neither bound given, a negative bound, or ``older_than_s`` on
                a table without a ``time_column`` (a ``ValueError``).
        """
        self._ensure_open()
        declared = self._declared(table)
        if declared is None or declared.kind is not Kind.RECORD:
            what = "not a declared table" if declared is None else f"a {declared.kind.value}"
            raise PruneRefused(
                f"prune refused for {table!r}: it is {what}; only a declared RECORD table "
                "may be pruned. Nothing was deleted.",
                path=str(self.path),
            )
        if older_than_s is None and keep_last is None:
            raise InvalidArgument("prune needs older_than_s, keep_last, or both")
        if (older_than_s is not None and older_than_s < 0) or (
            keep_last is not None and keep_last < 0
        ):
            raise InvalidArgument(
                f"prune bounds must be >= 0 (older_than_s={older_than_s}, keep_last={keep_last})"
            )
        name = _q(declared.name)
        spared = " AND ".join(f"{_q(column)} = ?" for column in spare or {})
        if spare_where:
            spared = f"({spared}) OR ({spare_where})" if spared else f"({spare_where})"
        unspared = f"NOT ({spared}) AND " if spared else ""
        spare_values = tuple((spare or {}).values())
        inside = "".join(f"{_q(column)} = ? AND " for column in within or {})
        unspared = inside + unspared
        spare_values = tuple((within or {}).values()) + spare_values
        deleted = 0
        with self.transaction() as conn:
            if older_than_s is not None:
                if declared.time_column is None:
                    raise InvalidArgument(
                        f"table {declared.name!r} has no time_column; prune it with keep_last"
                    )
                col = _q(declared.time_column)
                cutoff = time.time() - older_than_s
                cutoff_iso = format_ts(datetime.fromtimestamp(cutoff, UTC))
                deleted += conn.execute(
                    f"DELETE FROM {name} WHERE {unspared}("  # noqa: S608 - quoted
                    f"(typeof({col}) IN ('integer', 'real') AND {col} < ?) OR "
                    f"(typeof({col}) = 'text' AND {col} < ?))",
                    (*spare_values, cutoff, cutoff_iso),
                ).rowcount
            if keep_last is not None:
                order = (
                    f"{_q(declared.time_column)} DESC, rowid DESC"
                    if declared.time_column
                    else "rowid DESC"
                )
                deleted += conn.execute(
                    f"DELETE FROM {name} WHERE {unspared}rowid NOT IN "  # noqa: S608 - quoted
                    f"(SELECT rowid FROM {name} WHERE {unspared}1 ORDER BY {order} LIMIT ?)",
                    (*spare_values, *spare_values, keep_last),
                ).rowcount
        return deleted

    def _declared(self, name: str) -> Table | None:
        try:
            return self.schema.table(name)
        except KeyError:
            return None

    def counts(self) -> dict[str, int]:
        """Rows per declared non-virtual table (committed rows only)."""
        self._ensure_open()
        return _open.count_rows(self._reader(), self._tables)

    # --- closing ---------------------------------------------------------------------

    def close(self, timeout_s: float = 30.0) -> None:
        """Write what is queued, stop the writer thread, close the connections. Idempotent.

        Waits up to ``timeout_s`` for the queue to drain; if the writer has not stopped by
        then, logs an ERROR with the count left unwritten. Call it after in-flight calls on
        other threads have returned. Afterwards every method raises ``StoreClosed``.
        """
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        if not self._writer.stop(timeout_s):
            _log.error(
                "store_close_timeout", path=str(self.path), unwritten=self._writer.stats().queued
            )
            return
        with self._readers_lock:
            readers, self._readers = self._readers, []
        for conn in readers:
            conn.close()
        with self._lock:
            self._conn.close()

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        s = self._writer.stats()
        state = "closed" if self._closed else "open"
        return (
            f"<SqliteStore {str(self.path)!r} v{self.schema.version} {state} "
            f"queued={s.queued} written={s.written} dropped={s.dropped} failed={s.failed}>"
        )
