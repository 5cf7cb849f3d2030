"""The copy command: move a whole memory store between backends, verified.

``robot-mcp-memory copy --from SRC --to DST``, where each side is a data directory
(SQLite: ``index.db`` and ``lessons.db`` in it) or a ``postgresql://`` URL. It copies the
process documents (ids, counters, timestamps, bodies, revision numbers and recent outcomes
exactly) with their revision history, the fleet registry (groups, robots, settings and
toggles) and the lessons, then proves it: every table is read back from the destination
through its adapters, and the row count and a sha256 over a canonical serialization
(:func:`table_sums`) must equal the source's.

How each side is read and written (:class:`Endpoint`): the registry through its adapter's
``export_rows``/``import_rows``, the lessons through the kit's
:class:`~robot_mcp_kit.params.ParamBackend` (``lessons()``) and a bulk import, the
documents and their revisions through the narrow :class:`ProcessRows` interface (the rows
of :data:`PROCESS_TABLES` out and in, then ``reindex``). Those two tables are read with
every column they have (a column a later schema adds is copied and verified without being
named here); the two sides must have the same columns, else the copy is refused before
anything is written. What is DERIVED is never copied: the destination recomputes its search
index from the rows it received (a vector signal is computed by the server that opens it
with an embedder). Each table is written in one transaction.

Refusals (one line, :class:`CopyRefused`): a source that does not exist, a destination
that is not empty, the same store on both sides, a database that cannot be reached, a
table whose columns differ between the sides. The
source is opened as the server opens it (an older schema is migrated forward); stop the
servers writing to it first, so the copy is of a store at rest.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol, TextIO

from robot_mcp_kit.params import PARAMS_SCHEMA, Lesson, SqliteBackend, lesson_key
from robot_mcp_kit.store import SqliteStore, StoreUnavailable
from robot_mcp_memory.db import INDEX_FILENAME, open_index
from robot_mcp_memory.fleet import FleetRegistry, FleetRows
from robot_mcp_memory.services import LESSONS_FILENAME
from robot_mcp_memory.store import ProcessStore

__all__ = [
    "EXIT_MISMATCH",
    "PROCESS_TABLES",
    "TABLES",
    "CopyRefused",
    "Endpoint",
    "LessonRows",
    "ProcessRows",
    "RegistryRows",
    "Snapshot",
    "TableSum",
    "copy_store",
    "is_url",
    "table_sums",
]

EXIT_MISMATCH = 3
"""The exit status when the destination does not match the source after the copy."""

PROCESS_TABLES = ("processes", "processes_revisions")
"""The stored tables of the process documents (the documents, the versions they replaced),
copied whole with every column; everything else about a document is derived from them."""

TABLES = (*PROCESS_TABLES, "fleet_groups", "fleet_robots", "fleet_settings", "lessons")
"""What is copied and verified, in the order it is written."""


class CopyRefused(Exception):
    """The copy cannot start (or could not finish); the message says why and what to do."""


class ProcessRows(Protocol):
    """What the copy needs of a process store beyond its port: the rows of each table of
    :data:`PROCESS_TABLES` with every column the table has (``columns``; a boolean as
    SQLite stores it, 0 or 1) out, and in, into an empty store in one transaction, after
    which the store recomputes what is derived (its ``reindex``) and returns how many
    documents it indexed (None: there is nothing derived to recompute)."""

    def count_process_rows(self) -> int: ...

    def columns(self, table: str) -> tuple[str, ...]: ...

    def export_table(self, table: str) -> list[dict[str, Any]]: ...

    def import_tables(self, tables: Mapping[str, Sequence[dict[str, Any]]]) -> int | None: ...


class RegistryRows(Protocol):
    """The whole fleet registry out and in (both registries have these)."""

    def export_rows(self) -> FleetRows: ...

    def import_rows(self, rows: FleetRows) -> None: ...


class LessonRows(Protocol):
    """Every lesson out (the kit's ``ParamBackend.lessons``) and in, in one transaction."""

    def lessons(self, scope: str | None = None, key: str | None = None) -> list[Lesson]: ...

    def import_lessons(self, lessons: list[Lesson]) -> None: ...


# --- the SQLite side ------------------------------------------------------------------


def _process_table(table: str) -> str:
    """``table`` quoted for SQL, once it is known to be one of :data:`PROCESS_TABLES`.

    Raises:
        ValueError: any other name.
    """
    if table not in PROCESS_TABLES:
        raise ValueError(f"{table!r} is not one of {PROCESS_TABLES}")
    return f'"{table}"'


class SqliteProcessRows:
    """:class:`ProcessRows` over ``index.db``: the raw rows of ``processes`` and
    ``processes_revisions``, then the process store's ``reindex`` (its full-text index and
    term statistics; vectors are computed when a server with an embedder opens the file)."""

    def __init__(self, store: SqliteStore, processes: ProcessStore) -> None:
        self.store = store
        self.processes = processes

    def count_process_rows(self) -> int:
        return self.store.counts()["processes"]

    def columns(self, table: str) -> tuple[str, ...]:
        rows = self.store.query(f"PRAGMA table_info({_process_table(table)})")
        return tuple(str(r["name"]) for r in rows)

    def export_table(self, table: str) -> list[dict[str, Any]]:
        self.store.flush()  # the outcome counters are hot writes
        names = ", ".join(f'"{c}"' for c in self.columns(table))
        rows = self.store.query(f"SELECT {names} FROM {_process_table(table)}")  # noqa: S608
        return [dict(r) for r in rows]

    def import_tables(self, tables: Mapping[str, Sequence[dict[str, Any]]]) -> int:
        with self.store.transaction() as conn:
            for table, rows in tables.items():
                if not rows:
                    continue
                columns = list(rows[0])
                names = ", ".join(f'"{c}"' for c in columns)
                marks = ", ".join("?" for _ in columns)
                conn.executemany(
                    f"INSERT INTO {_process_table(table)} ({names}) VALUES ({marks})",  # noqa: S608
                    [tuple(r[c] for c in columns) for r in rows],
                )
        return self.processes.reindex()


class SqliteLessonRows:
    """:class:`LessonRows` over ``lessons.db``: read through the kit's backend (a missing
    file is no lessons), written as the kit's rows in one transaction — the file is
    created only when there is a lesson to write."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._backend = SqliteBackend(path)

    def lessons(self, scope: str | None = None, key: str | None = None) -> list[Lesson]:
        return self._backend.lessons(scope, key)

    def import_lessons(self, lessons: list[Lesson]) -> None:
        if not lessons:
            return
        self._backend.close()
        with SqliteStore(self.path, PARAMS_SCHEMA) as store, store.transaction() as conn:
            conn.executemany(
                "INSERT INTO params (scope, key, value_json, success_count, failure_count, "
                "place, robot, created, updated, note) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        x.scope,
                        lesson_key(x.key, x.place),
                        json.dumps(x.params, sort_keys=True, allow_nan=False),
                        x.success_count,
                        x.failure_count,
                        x.place,
                        x.robot,
                        x.created,
                        x.updated,
                        x.note,
                    )
                    for x in lessons
                ],
            )

    def close(self) -> None:
        self._backend.close()


# --- what is compared -----------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """A whole store as its adapters read it."""

    processes: list[dict[str, Any]]
    revisions: list[dict[str, Any]]
    fleet: FleetRows
    lessons: list[Lesson]

    def rows(self) -> dict[str, list[dict[str, Any]]]:
        """Each table's rows as plain JSON values (the canonical form :func:`table_sums`
        hashes): documents and revisions as stored, groups without their members (those are the
        robots' ``group_id``), robots with ``meta`` as an object, lessons without the
        derived ``reliability``."""
        lessons = []
        for lesson in self.lessons:
            data = lesson.to_dict()
            data.pop("reliability")
            lessons.append(data)
        groups = []
        for group in self.fleet.groups:
            data = asdict(group)
            data.pop("robots")
            groups.append(data)
        return {
            "processes": self.processes,
            "processes_revisions": self.revisions,
            "fleet_groups": groups,
            "fleet_robots": [r.to_dict() for r in self.fleet.robots],
            "fleet_settings": [{"key": k, "value": v} for k, v in self.fleet.settings],
            "lessons": lessons,
        }


@dataclass(frozen=True)
class TableSum:
    """One table's row count and sha256."""

    table: str
    rows: int
    sha256: str


def table_sums(snapshot: Snapshot) -> dict[str, TableSum]:
    """Per table: the row count and the sha256 of its canonical serialization — each row
    as compact JSON with sorted keys (UTF-8), the lines sorted, joined by newlines."""
    sums = {}
    for table, rows in snapshot.rows().items():
        lines = sorted(
            json.dumps(r, sort_keys=True, ensure_ascii=False, separators=(",", ":")) for r in rows
        )
        digest = hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()
        sums[table] = TableSum(table, len(rows), digest)
    return sums


# --- the two sides --------------------------------------------------------------------


def is_url(where: str) -> bool:
    """True for a PostgreSQL URL (``postgresql://`` or ``postgres://``)."""
    return where.startswith(("postgresql://", "postgres://"))


class Endpoint:
    """One side of a copy, opened: a data directory (SQLite) or a PostgreSQL database.

    Args:
        where: a data directory path or a ``postgresql://`` URL.
        source: True for the side read from (a directory must already hold ``index.db``).

    Raises:
        CopyRefused: a source directory without ``index.db``, or the psycopg extra
            missing for a URL.
        robot_mcp_kit.store.StoreError: the store cannot be opened (unreachable database,
            newer schema, not ours...).
    """

    def __init__(self, where: str, *, source: bool) -> None:
        self.where = where
        self._closers: list[Callable[[], None]] = []
        self.registry: RegistryRows
        self.lessons: LessonRows
        self.processes: ProcessRows
        if is_url(where):
            self._open_postgres(where, source=source)
        else:
            self._open_sqlite(Path(where), source=source)

    def _open_sqlite(self, directory: Path, *, source: bool) -> None:
        if source and not (directory / INDEX_FILENAME).is_file():
            raise CopyRefused(
                f"{str(directory)!r} holds no {INDEX_FILENAME}: give --from the "
                "MEMORY_DATA_DIR of the server to copy, or a postgresql:// URL"
            )
        if directory.exists() and not directory.is_dir():
            raise CopyRefused(f"{str(directory)!r} is not a directory")
        index = open_index(directory)
        processes = ProcessStore(index)
        self._closers.append(processes.close)
        lesson_rows = SqliteLessonRows(directory / LESSONS_FILENAME)
        self._closers.append(lesson_rows.close)
        self.registry = FleetRegistry(index)
        self.lessons = lesson_rows
        self.processes = SqliteProcessRows(index, processes)
        self.described = f"{directory} (SQLite)"

    def _open_postgres(self, url: str, *, source: bool) -> None:
        try:
            from robot_mcp_memory.postgres import META_TABLE, SCHEMA, PgDatabase
            from robot_mcp_memory.postgres.fleet import PgFleetRegistry
            from robot_mcp_memory.postgres.lessons import PgParamBackend
            from robot_mcp_memory.postgres.process_rows import PgProcessRows
            from robot_mcp_memory.postgres.processes import PgProcessStore
        except ImportError:
            raise CopyRefused(
                "a postgresql:// URL needs the 'postgres' extra; install it with: "
                "pip install 'robot-mcp-kit[memory,postgres]'"
            ) from None
        db = PgDatabase(url)
        if source and not _holds_store(url, META_TABLE):
            db.close()
            raise CopyRefused(
                f"the PostgreSQL database {db.where} holds no memory store: give --from the "
                "MEMORY_DATABASE_URL of the server to copy, or a data directory"
            )
        db.open(schema=SCHEMA)  # by keyword: a positional .open() argument reads as a file mode
        self._closers.append(db.close)
        self.registry = PgFleetRegistry(db)
        self.lessons = PgParamBackend(db)
        self.processes = PgProcessRows(db, reindex=PgProcessStore(db).reindex)
        self.described = f"{db.where} (PostgreSQL)"

    def snapshot(self) -> Snapshot:
        """Everything, read through the adapters."""
        return Snapshot(
            processes=self.processes.export_table("processes"),
            revisions=self.processes.export_table("processes_revisions"),
            fleet=self.registry.export_rows(),
            lessons=self.lessons.lessons(),
        )

    def counts(self) -> dict[str, int]:
        """Rows per table (what the emptiness check reads)."""
        return {t: s.rows for t, s in table_sums(self.snapshot()).items()}

    def load(self, snapshot: Snapshot) -> int | None:
        """Write ``snapshot`` (one transaction per table); the documents the search index
        was rebuilt for (None: the destination derives nothing from them)."""
        indexed = self.processes.import_tables(
            {"processes": snapshot.processes, "processes_revisions": snapshot.revisions}
        )
        self.registry.import_rows(snapshot.fleet)
        self.lessons.import_lessons(snapshot.lessons)
        return indexed

    def close(self) -> None:
        """Close what was opened (flushing SQLite's queued writes). Idempotent."""
        while self._closers:
            self._closers.pop()()


def _holds_store(url: str, meta_table: str) -> bool:
    """Whether the database has our ``store_meta`` table (read without creating anything).

    Raises:
        StoreUnavailable: the server cannot be reached.
    """
    import psycopg

    from robot_mcp_memory.postgres import describe_url

    try:
        with psycopg.connect(url, connect_timeout=5) as conn:
            row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (meta_table,)).fetchone()
    except psycopg.OperationalError:
        where = describe_url(url)
        raise StoreUnavailable(
            f"cannot connect to the PostgreSQL database {where}; check the URL and that "
            "PostgreSQL is running and accepts connections from this host",
            path=where,
        ) from None
    return bool(row and row[0])


def _same(src: str, dst: str) -> bool:
    if is_url(src) or is_url(dst):
        return src == dst
    return Path(src).resolve() == Path(dst).resolve()


def copy_store(src: str, dst: str, out: TextIO) -> int:
    """Copy ``src`` into the empty ``dst``, verify, print the table; the exit status.

    Returns 0 when every table's count and sha256 match, :data:`EXIT_MISMATCH` when one
    does not (the destination is left as written, for inspection).

    Raises:
        CopyRefused: the copy cannot start (see the module docstring).
        robot_mcp_kit.store.StoreError: a side cannot be opened or became unavailable.
    """
    if _same(src, dst):
        raise CopyRefused("--from and --to name the same store; give an empty destination")
    source = Endpoint(src, source=True)
    try:
        destination = Endpoint(dst, source=False)
        try:
            return _copy(source, destination, out)
        finally:
            destination.close()
    finally:
        source.close()


def _copy(source: Endpoint, destination: Endpoint, out: TextIO) -> int:
    held = {t: n for t, n in destination.counts().items() if n}
    if held:
        what = ", ".join(f"{n} rows in {t}" for t, n in held.items())
        raise CopyRefused(
            f"the destination {destination.described} is not empty ({what}); copy into a "
            "new data directory or an empty database (CREATE DATABASE ...), or empty this "
            "one first"
        )
    for table in PROCESS_TABLES:
        ours = set(source.processes.columns(table))
        theirs = set(destination.processes.columns(table))
        if ours != theirs:
            raise CopyRefused(
                f"the {table} table has other columns in {destination.described} than in "
                f"{source.described} (only in the source: {sorted(ours - theirs)}; only in "
                f"the destination: {sorted(theirs - ours)}); nothing was written. Open both "
                "with the same version of robot-mcp-memory"
            )
    snapshot = source.snapshot()
    before = table_sums(snapshot)
    indexed = destination.load(snapshot)
    after = table_sums(destination.snapshot())
    print(f"copy {source.described} -> {destination.described}", file=out)
    print(f"{'table':<15} {'source':>7} {'copied':>7}  sha256 (source = copied)", file=out)
    bad = []
    for table in TABLES:
        a, b = before[table], after[table]
        ok = (a.rows, a.sha256) == (b.rows, b.sha256)
        if not ok:
            bad.append(table)
        shown = a.sha256 if a.sha256 == b.sha256 else f"{a.sha256} != {b.sha256}"
        mark = "ok" if ok else "MISMATCH"
        print(f"{table:<15} {a.rows:>7} {b.rows:>7}  {shown}  {mark}", file=out)
    if bad:
        print(
            f"the copy does not match the source in {', '.join(bad)}; the destination is "
            "left as written: inspect it, empty it and copy again",
            file=out,
        )
        return EXIT_MISMATCH
    total = sum(s.rows for s in before.values())
    rebuilt = (
        "no search index to rebuild"
        if indexed is None
        else f"search index rebuilt for {indexed} documents"
    )
    print(f"copied and verified: {total} rows in {len(TABLES)} tables; {rebuilt}", file=out)
    return 0
