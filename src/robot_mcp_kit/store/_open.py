"""Opening a store's file: inspect it read-only, create it, migrate it, check its tables.

Opening never writes through a file it refuses: the file is inspected on a read-only
connection first (header, ``quick_check``, version), and only then opened for writing.
A missing file is created at a temporary name and renamed into place, so the path holds
either nothing or a complete database — an empty (zero-byte) file at the path is
therefore not something this store ever leaves, and is refused as ``StoreUnreadable``.

:class:`VersionedFile` holds these steps as methods :class:`~robot_mcp_kit.store.SqliteStore`
inherits; ``SqliteStore.__init__`` sets the attributes they read and calls them in order.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

from robot_mcp_kit._exceptions import (
    MigrationFailed,
    SchemaMismatch,
    SchemaTooNew,
    StoreUnreadable,
)
from robot_mcp_kit.log import get_logger
from robot_mcp_kit.store._kinds import Table
from robot_mcp_kit.store._schema import META_TABLE, MigrationStep, Schema

__all__ = ["VersionedFile"]

_log = get_logger("robot_mcp_kit.store")

_HEADER = b"SQLite format 3\x00"
_VERSION_KEY = "schema_version"


def _q(name: str) -> str:
    """Quote an identifier for SQL."""
    return '"' + name.replace('"', '""') + '"'


def _remedy(path: Path) -> str:
    return (
        f"Restore {path.name} from a backup, or move it aside (e.g. to {path.name}.broken); "
        "the service creates a fresh, empty one at that path on its next start."
    )


def _unreadable(path: Path, reason: str) -> StoreUnreadable:
    return StoreUnreadable(
        f"{path} is not a database this store can open: {reason}. {_remedy(path)}",
        path=str(path),
        remedy=_remedy(path),
    )


class VersionedFile:
    """The opening steps of a :class:`~robot_mcp_kit.store.SqliteStore`, as a base class."""

    path: Path
    schema: Schema
    _migrations: dict[int, MigrationStep]
    _busy_timeout_ms: int
    _tables: tuple[Table, ...]
    _conn: sqlite3.Connection

    def _prepare_file(self) -> tuple[bool, int]:
        """Inspect (read-only) or create the file; return (created, file version)."""
        path = self.path
        if not path.exists():
            self._create()
            return True, 0
        if not path.is_file():
            raise _unreadable(path, "it is not a regular file")
        with path.open("rb") as f:
            header = f.read(len(_HEADER))
        if not header:
            raise _unreadable(path, "the file is empty (0 bytes)")
        if header != _HEADER:
            raise _unreadable(path, "it does not start with the SQLite header")
        # With no -wal beside it, everything committed is in the main file: read it as
        # immutable, so the inspection creates no -wal/-shm beside a file it may refuse.
        # With a -wal (a crash, or another process has it open), read through it.
        wal = _sidecars(path)[0]
        flags = "mode=ro" if wal.exists() else "mode=ro&immutable=1"
        try:
            ro = sqlite3.connect(f"{path.as_uri()}?{flags}", uri=True)
        except sqlite3.Error as exc:
            raise _unreadable(path, f"sqlite could not open it ({exc})") from exc
        try:
            ro.execute(f"PRAGMA busy_timeout={int(self._busy_timeout_ms)}")
            check = ro.execute("PRAGMA quick_check").fetchall()
            if [tuple(r) for r in check] != [("ok",)]:
                raise _unreadable(path, f"quick_check reports {check[0][0]!r}")
            names = {
                r[0].lower()
                for r in ro.execute("SELECT name FROM sqlite_schema WHERE type='table'")
            }
            version = self._read_version(ro, names)
        except sqlite3.DatabaseError as exc:
            raise _unreadable(path, f"sqlite reports {exc}") from exc
        finally:
            ro.close()
        if version > self.schema.version:
            raise SchemaTooNew(
                f"{path} has schema version {version}, newer than this code's "
                f"{self.schema.version}; it was left untouched. Run the newer release, or "
                "restore a backup made by this one.",
                path=str(path),
            )
        if version == 0:
            # An empty database (no tables at all): create the schema in it.
            self._create_in(path)
            return True, 0
        return False, version

    def _read_version(self, conn: sqlite3.Connection, names: set[str]) -> int:
        if META_TABLE.name not in names:
            if not {n for n in names if not n.startswith("sqlite_")}:
                return 0
            raise SchemaMismatch(
                f"{self.path} holds tables ({sorted(names)}) but no store_meta table, so its "
                "schema version is unknown; it was left untouched.",
                path=str(self.path),
            )
        row = conn.execute("SELECT value FROM store_meta WHERE key = ?", (_VERSION_KEY,)).fetchone()
        try:
            version = int(row[0]) if row is not None else -1
        except (TypeError, ValueError):
            version = -1
        if version < 1:
            raise _unreadable(
                self.path, f"store_meta holds no valid schema_version ({row and row[0]!r})"
            )
        return version

    def _create(self) -> None:
        """Create the file at a temporary name and rename it into place."""
        path = self.path
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.creating")
        for leftover in (tmp, *_sidecars(tmp)):
            leftover.unlink(missing_ok=True)
        self._create_in(tmp)
        # A -wal/-shm left beside a missing database belongs to no database any more;
        # sqlite would replay it into the new file, so it goes before the rename.
        for stale in _sidecars(path):
            stale.unlink(missing_ok=True)
        os.replace(tmp, path)
        with contextlib.suppress(OSError):  # best effort: make the rename itself durable
            fd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def _create_in(self, path: Path) -> None:
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("BEGIN IMMEDIATE")
            try:
                for table in self._tables:
                    conn.execute(table.ddl)
                    for index in table.indexes:
                        conn.execute(index)
                conn.execute(
                    "INSERT INTO store_meta (key, value) VALUES (?, ?)",
                    (_VERSION_KEY, str(self.schema.version)),
                )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        finally:
            conn.close()

    def _connect_rw(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout={int(self._busy_timeout_ms)}")
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            conn.close()
            raise _unreadable(self.path, f"it cannot be put in WAL mode (journal_mode={mode})")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    def _migrate(self, from_version: int) -> None:
        conn = self._conn
        for target in range(from_version + 1, self.schema.version + 1):
            step = self._migrations.get(target)
            if step is None:
                raise MigrationFailed(
                    f"{self.path} is at schema version {target - 1} and there is no migration "
                    f"step to version {target}; the file was left at version {target - 1}.",
                    path=str(self.path),
                )
            conn.execute("BEGIN IMMEDIATE")
            try:
                step(conn)
                if not conn.in_transaction:
                    raise RuntimeError(
                        "the step committed on its own (conn.commit() or executescript); "
                        "steps must only conn.execute"
                    )
                conn.execute(
                    "UPDATE store_meta SET value = ? WHERE key = ?", (str(target), _VERSION_KEY)
                )
                conn.execute("COMMIT")
            except Exception as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise MigrationFailed(
                    f"migrating {self.path} from schema version {target - 1} to {target} "
                    f"failed ({type(exc).__name__}: {exc}); the transaction was rolled back "
                    f"and the file is still at version {target - 1}.",
                    path=str(self.path),
                ) from exc
            _log.info(
                "store_migrated", path=str(self.path), from_version=target - 1, to_version=target
            )

    def _check_tables(self, conn: sqlite3.Connection) -> None:
        """Every table in the file is declared or sqlite's own; every declared one exists."""
        in_file = {
            r[0].lower() for r in conn.execute("SELECT name FROM sqlite_schema WHERE type='table'")
        }
        declared = {t.name.lower() for t in self._tables}
        not_ours = self.schema.not_ours()
        unknown = sorted(n for n in in_file - declared - not_ours if not n.startswith("sqlite_"))
        if unknown:
            raise SchemaMismatch(
                f"{self.path} holds table(s) {unknown} that the schema neither declares nor "
                f"derives (declared: {sorted(declared)}). Declare each with its Kind, or drop "
                "it in a migration step.",
                path=str(self.path),
            )
        missing = sorted(declared - in_file)
        if missing:
            raise SchemaMismatch(
                f"{self.path} is at schema version {self.schema.version} but lacks declared "
                f"table(s) {missing}; a migration step should have created them.",
                path=str(self.path),
            )
        for table in self._tables:
            for column in (table.time_column, table.epoch_column):
                if column is None:
                    continue
                cols = {r[1].lower() for r in conn.execute(f"PRAGMA table_info({_q(table.name)})")}
                if column.lower() not in cols:
                    raise SchemaMismatch(
                        f"table {table.name!r} declares column {column!r}, which it does not "
                        f"have (columns: {sorted(cols)})",
                        path=str(self.path),
                    )

    def _count(self, conn: sqlite3.Connection) -> dict[str, int]:
        return {
            t.name: int(conn.execute(f"SELECT count(*) FROM {_q(t.name)}").fetchone()[0])  # noqa: S608
            for t in self._tables
            if not t.is_virtual
        }


def _sidecars(path: Path) -> tuple[Path, Path]:
    return path.with_name(f"{path.name}-wal"), path.with_name(f"{path.name}-shm")
