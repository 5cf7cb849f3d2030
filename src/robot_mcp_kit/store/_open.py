"""Opening a store's file: inspect it read-only, create it, migrate it, check its tables.

Opening never writes through a file it refuses: the file is inspected on a read-only
connection first (header, size, ``quick_check`` or ``integrity_check``, version), and only
then opened for writing. The size check catches what sqlite's own checks let through: a
file cut short (or grown) by a part of a page, or shorter than its header says, reads as
zeros where the cut was, which ``quick_check`` does not look at. It runs when no ``-wal``
holds committed pages beside the file (with one, sqlite reads the newest pages from it).
A missing file is created at a temporary name and renamed into place, so the path holds
either nothing or a complete database — an empty (zero-byte) file at the path is
therefore not something this store ever leaves, and is refused as ``StoreUnreadable``.

Each step is a module-level function taking what it needs (the habit of sqlite-utils'
``migrations.py``); :class:`~robot_mcp_kit.store.SqliteStore` calls them in order:
:func:`prepare_file`, :func:`connect`, :func:`migrate`, :func:`check_tables`,
:func:`count_rows`.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Mapping
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

__all__ = [
    "check_tables",
    "connect",
    "count_rows",
    "create_file",
    "migrate",
    "prepare_file",
    "quote",
    "read_version",
]

_log = get_logger("robot_mcp_kit.store")

_HEADER = b"SQLite format 3\x00"
_HEADER_BYTES = 100  # the database header on page 1
_WAL_HEADER_BYTES = 32
_VERSION_KEY = "schema_version"


def quote(name: str) -> str:
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


def prepare_file(
    path: Path, schema: Schema, *, busy_timeout_ms: int, full_check: bool = False
) -> tuple[bool, int]:
    """Inspect ``path`` read-only, or create it; return ``(created, file_version)``.

    A missing file, or an existing database with no tables at all, gets ``schema``
    created in it: ``(True, 0)``. Otherwise nothing is written and the file's version
    comes back as ``(False, version)``; the caller migrates it. ``full_check`` runs
    ``PRAGMA integrity_check`` (indexes against their tables too) instead of
    ``quick_check``: for small files whose every row matters.

    Raises:
        StoreUnreadable: not a regular file, empty, no SQLite header, a size that is not
            the pages its header describes, the integrity check fails, or no valid
            version row.
        SchemaTooNew: the file's version is above ``schema.version``.
        SchemaMismatch: the file holds tables but no ``store_meta``.
    """
    if not path.exists():
        create_file(path, schema)
        return True, 0
    if not path.is_file():
        raise _unreadable(path, "it is not a regular file")
    with path.open("rb") as f:
        header = f.read(_HEADER_BYTES)
    if not header:
        raise _unreadable(path, "the file is empty (0 bytes)")
    if header[: len(_HEADER)] != _HEADER:
        raise _unreadable(path, "it does not start with the SQLite header")
    # With no -wal beside it, everything committed is in the main file: read it as
    # immutable, so the inspection creates no -wal/-shm beside a file it may refuse.
    # With a -wal (a crash, or another process has it open), read through it.
    wal = _sidecars(path)[0]
    if not _has_frames(wal):
        _check_size(path, header)
    flags = "mode=ro" if wal.exists() else "mode=ro&immutable=1"
    try:
        ro = sqlite3.connect(f"{path.as_uri()}?{flags}", uri=True)
    except sqlite3.Error as exc:
        raise _unreadable(path, f"sqlite could not open it ({exc})") from exc
    try:
        ro.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        pragma = "integrity_check" if full_check else "quick_check"
        check = ro.execute(f"PRAGMA {pragma}").fetchall()
        if [tuple(r) for r in check] != [("ok",)]:
            raise _unreadable(path, f"{pragma} reports {check[0][0]!r}")
        version = read_version(ro, path)
    except sqlite3.DatabaseError as exc:
        raise _unreadable(path, f"sqlite reports {exc}") from exc
    finally:
        ro.close()
    if version > schema.version:
        raise SchemaTooNew(
            f"{path} has schema version {version}, newer than this code's "
            f"{schema.version}; it was left untouched. Run the newer release, or "
            "restore a backup made by this one.",
            path=str(path),
        )
    if version == 0:
        # An empty database (no tables at all): create the schema in it.
        _create_schema(path, schema)
        return True, 0
    return False, version


def _check_size(path: Path, header: bytes) -> None:
    """Refuse a file whose size is not the whole pages its header describes.

    Only meaningful with no committed frames in a ``-wal`` beside it: then every page
    is in the file, sqlite only ever writes whole pages, and the header's page count is
    the file's when its "version-valid-for" matches the change counter.
    """
    if len(header) < _HEADER_BYTES:
        raise _unreadable(path, f"it is {len(header)} bytes, shorter than a SQLite header")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    size = path.stat().st_size
    if page_size < 512 or page_size & (page_size - 1):
        raise _unreadable(path, f"its header names no valid page size ({page_size})")
    if size % page_size:
        raise _unreadable(
            path,
            f"its size ({size} bytes) is not a whole number of {page_size}-byte pages, "
            "so it was cut short or written past its end",
        )
    change_counter, header_pages, valid_for = (
        int.from_bytes(header[24:28], "big"),
        int.from_bytes(header[28:32], "big"),
        int.from_bytes(header[92:96], "big"),
    )
    if header_pages and change_counter == valid_for and size < header_pages * page_size:
        raise _unreadable(
            path,
            f"it holds {size // page_size} of the {header_pages} pages its header counts, "
            "so it was cut short",
        )


def _has_frames(wal: Path) -> bool:
    """True when ``wal`` exists and is longer than its 32-byte header (it may hold pages)."""
    try:
        return wal.stat().st_size > _WAL_HEADER_BYTES
    except FileNotFoundError:
        return False


def read_version(conn: sqlite3.Connection, path: Path) -> int:
    """The schema version recorded in the file behind ``conn``; 0 for a file with no tables.

    Read-only. ``path`` only names the file in error messages.

    Raises:
        SchemaMismatch: tables but no ``store_meta``.
        StoreUnreadable: ``store_meta`` without a valid (>= 1) ``schema_version``.
    """
    names = _table_names(conn)
    if META_TABLE.name not in names:
        if not {n for n in names if not n.startswith("sqlite_")}:
            return 0
        raise SchemaMismatch(
            f"{path} holds tables ({sorted(names)}) but no store_meta table, so its "
            "schema version is unknown; it was left untouched.",
            path=str(path),
        )
    row = conn.execute("SELECT value FROM store_meta WHERE key = ?", (_VERSION_KEY,)).fetchone()
    try:
        version = int(row[0]) if row is not None else -1
    except (TypeError, ValueError):
        version = -1
    if version < 1:
        raise _unreadable(path, f"store_meta holds no valid schema_version ({row and row[0]!r})")
    return version


def create_file(path: Path, schema: Schema) -> None:
    """Create ``path`` holding ``schema``: built at a temporary name, renamed into place.

    The parent directory is created if missing. A stale ``-wal``/``-shm`` beside the
    missing file is removed first, so sqlite cannot replay it into the new one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.creating")
    for leftover in (tmp, *_sidecars(tmp)):
        leftover.unlink(missing_ok=True)
    _create_schema(tmp, schema)
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


def _create_schema(path: Path, schema: Schema) -> None:
    """Create every table of ``schema`` and its version row in one transaction."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("BEGIN IMMEDIATE")
        try:
            for table in schema.all_tables():
                conn.execute(table.ddl)
                for index in table.indexes:
                    conn.execute(index)
            conn.execute(
                "INSERT INTO store_meta (key, value) VALUES (?, ?)",
                (_VERSION_KEY, str(schema.version)),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    finally:
        conn.close()


def connect(
    path: Path,
    *,
    busy_timeout_ms: int,
    cache_kib: int | None = None,
    checkpoint_pages: int | None = None,
) -> sqlite3.Connection:
    """Open the write connection: WAL, ``synchronous=NORMAL``, foreign keys, ``Row`` rows.

    Autocommit (``isolation_level=None``) and usable from any thread; the caller
    serialises its use. ``cache_kib`` sets its page cache, ``checkpoint_pages`` the WAL
    size (in pages) at which a commit checkpoints; None keeps sqlite's defaults (about
    2 MiB, 1 000 pages).

    Raises:
        StoreUnreadable: the file cannot be put in WAL mode (the connection is closed).
    """
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
    mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        conn.close()
        raise _unreadable(path, f"it cannot be put in WAL mode (journal_mode={mode})")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    if cache_kib is not None:
        conn.execute(f"PRAGMA cache_size={-int(cache_kib)}")
    if checkpoint_pages is not None:
        conn.execute(f"PRAGMA wal_autocheckpoint={int(checkpoint_pages)}")
    return conn


def migrate(
    conn: sqlite3.Connection,
    path: Path,
    *,
    from_version: int,
    to_version: int,
    steps: Mapping[int, MigrationStep],
) -> None:
    """Run ``steps[from_version + 1]`` … ``steps[to_version]`` on ``conn``, in order.

    Each step runs in its own ``BEGIN IMMEDIATE`` transaction together with its version
    bump, and logs one ``store_migrated`` line. A step must only ``conn.execute``.

    Raises:
        MigrationFailed: a step is missing, raises, or commits on its own; its transaction
            is rolled back and the file stays at the version before that step.
    """
    for target in range(from_version + 1, to_version + 1):
        step = steps.get(target)
        if step is None:
            raise MigrationFailed(
                f"{path} is at schema version {target - 1} and there is no migration "
                f"step to version {target}; the file was left at version {target - 1}.",
                path=str(path),
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
                f"migrating {path} from schema version {target - 1} to {target} "
                f"failed ({type(exc).__name__}: {exc}); the transaction was rolled back "
                f"and the file is still at version {target - 1}.",
                path=str(path),
            ) from exc
        _log.info("store_migrated", path=str(path), from_version=target - 1, to_version=target)


def check_tables(conn: sqlite3.Connection, path: Path, schema: Schema) -> None:
    """Every table in the file is declared or sqlite's own; every declared one exists.

    Also checks that each declared ``time_column``/``epoch_column`` exists. Read-only.

    Raises:
        SchemaMismatch: naming the unknown or missing table or column.
    """
    tables = schema.all_tables()
    in_file = _table_names(conn)
    declared = {t.name.lower() for t in tables}
    not_ours = schema.not_ours()
    unknown = sorted(n for n in in_file - declared - not_ours if not n.startswith("sqlite_"))
    if unknown:
        raise SchemaMismatch(
            f"{path} holds table(s) {unknown} that the schema neither declares nor "
            f"derives (declared: {sorted(declared)}). Declare each with its Kind, or drop "
            "it in a migration step.",
            path=str(path),
        )
    missing = sorted(declared - in_file)
    if missing:
        raise SchemaMismatch(
            f"{path} is at schema version {schema.version} but lacks declared "
            f"table(s) {missing}; a migration step should have created them.",
            path=str(path),
        )
    for table in tables:
        for column in (table.time_column, table.epoch_column):
            if column is None:
                continue
            cols = {r[1].lower() for r in conn.execute(f"PRAGMA table_info({quote(table.name)})")}
            if column.lower() not in cols:
                raise SchemaMismatch(
                    f"table {table.name!r} declares column {column!r}, which it does not "
                    f"have (columns: {sorted(cols)})",
                    path=str(path),
                )


def count_rows(conn: sqlite3.Connection, tables: tuple[Table, ...]) -> dict[str, int]:
    """Rows per non-virtual table of ``tables`` (what ``conn`` sees). Read-only."""
    return {
        t.name: int(conn.execute(f"SELECT count(*) FROM {quote(t.name)}").fetchone()[0])  # noqa: S608
        for t in tables
        if not t.is_virtual
    }


def _table_names(conn: sqlite3.Connection) -> set[str]:
    return {r[0].lower() for r in conn.execute("SELECT name FROM sqlite_schema WHERE type='table'")}


def _sidecars(path: Path) -> tuple[Path, Path]:
    return path.with_name(f"{path.name}-wal"), path.with_name(f"{path.name}-shm")
