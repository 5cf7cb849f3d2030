"""The copy command: move a whole memory store between backends, verified.

``robot-mcp-memory copy --from SRC --to DST``, where each side is a data directory
(SQLite: ``index.db`` and ``lessons.db`` in it) or a ``postgresql://`` URL. It copies the
process documents (ids, counters, timestamps, bodies, revision numbers and recent outcomes
exactly) with their revision history, the fleet registry (groups, robots, settings and
toggles) and the lessons, then proves it: every table is read back from the destination
through its adapters, and the row count and a sha256 over a canonical serialization
(:func:`table_sums`) must equal the source's.

How each side is read and written (:class:`Endpoint`): through the rows its backend offers
the copy (:class:`~robot_mcp_memory.backends._ports.CopyRows`): the registry's
``export_rows``/``import_rows``, the lessons' ``lessons()`` and a bulk import, the
documents and their revisions: the rows of :data:`PROCESS_TABLES` out and in, then
``reindex``. Those two tables are read with every column they have (a column a later
schema adds is copied and verified without being named here); the two sides must have the
same columns, else the copy is refused before anything is written. What is DERIVED is
never copied: the destination recomputes its search index from the rows it received (a
vector signal is computed by the server that opens it with an embedder). Each table is
written in one transaction.

Refusals (one line, :class:`CopyRefused`): a source that does not exist, a destination
that is not empty, the same store on both sides, a database that cannot be reached, a
table whose columns differ between the sides. The source is opened as the server opens it
(an older schema is migrated forward); stop the servers writing to it first, so the copy
is of a store at rest.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any, TextIO

from robot_mcp_kit.params import Lesson
from robot_mcp_memory.backends import (
    LessonRows,
    ProcessRows,
    RegistryRows,
    storage_at,
)
from robot_mcp_memory.fleet import FleetRows

__all__ = [
    "EXIT_MISMATCH",
    "PROCESS_TABLES",
    "TABLES",
    "CopyRefused",
    "Endpoint",
    "Snapshot",
    "TableSum",
    "copy_store",
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
        hashes): documents and revisions as stored, groups without their members (those
        are the robots' ``group_id``), robots with ``meta`` as an object, lessons without the
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


class Endpoint:
    """One side of a copy, opened: any storage :func:`~robot_mcp_memory.backends.storage_at`
    names (a data directory, a ``postgresql://`` URL).

    Args:
        where: a data directory path or a ``postgresql://`` URL.
        source: True for the side read from (it must already hold a store).

    Raises:
        CopyRefused: a source that holds no store, a path that is not a directory, or the
            psycopg extra missing for a URL.
        robot_mcp_kit.store.StoreError: the store cannot be opened (unreachable database,
            newer schema, not ours...).
    """

    def __init__(self, where: str, *, source: bool) -> None:
        self.where = where
        try:
            storage = storage_at(where)
        except ImportError:
            raise CopyRefused(
                "a postgresql:// URL needs the 'postgres' extra; install it with: "
                "pip install 'robot-mcp-kit[memory,postgres]'"
            ) from None
        problem = storage.unusable(source=source)
        if problem is not None:
            raise CopyRefused(problem)
        self._backend = storage.open()
        rows = self._backend.copy_rows()
        self.processes: ProcessRows = rows.processes
        self.registry: RegistryRows = rows.registry
        self.lessons: LessonRows = rows.lessons
        self.described = storage.described

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
        self._backend.close()


def _same(src: str, dst: str) -> bool:
    try:
        return storage_at(src).identity == storage_at(dst).identity
    except ImportError:
        return src == dst


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
