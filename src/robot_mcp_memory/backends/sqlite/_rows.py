"""The copy command's rows of a SQLite store: documents and lessons read and written whole.

:class:`SqliteProcessRows` reads the definition rows of ``processes`` and writes rows into
an empty ``index.db`` in one transaction, then rebuilds what is derived from them (the
full-text index and the term statistics; vectors are computed when a server with an
embedder opens the file). :class:`SqliteLessonRows` reads
``lessons.db`` through the kit's backend (a missing file is no lessons) and writes the
kit's rows in one transaction, creating the file only when there is a lesson to write.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from robot_mcp_kit.params import PARAMS_SCHEMA, Lesson, SqliteBackend, lesson_key
from robot_mcp_kit.store import SqliteStore
from robot_mcp_memory.backends.sqlite._processes import SqliteProcessRepo
from robot_mcp_memory.processes import COLUMNS

__all__ = ["SqliteLessonRows", "SqliteProcessRows"]

PROCESS_COLUMNS = COLUMNS.split(", ")
_COLS = COLUMNS
_MARKS = ", ".join("?" for _ in PROCESS_COLUMNS)
_SELECT_PROCESSES = f"SELECT {_COLS} FROM processes ORDER BY id"  # noqa: S608 - constants
_INSERT_PROCESSES = f"INSERT INTO processes ({_COLS}) VALUES ({_MARKS})"  # noqa: S608


class SqliteProcessRows:
    """The definition rows of ``processes`` in one ``index.db``.

    Args:
        store: the kit store of ``index.db``.
        processes: the process repository over it (it rebuilds the index).
    """

    def __init__(self, store: SqliteStore, processes: SqliteProcessRepo) -> None:
        self.store = store
        self.processes = processes

    def count_process_rows(self) -> int:
        """How many documents are stored."""
        return self.store.counts()["processes"]

    def export_process_rows(self) -> list[dict[str, Any]]:
        """Every document's row (``PROCESS_COLUMNS``), by id; ``shared`` a bool."""
        self.store.flush()
        rows = self.store.query(_SELECT_PROCESSES)
        return [{**dict(r), "shared": bool(r["shared"])} for r in rows]

    def import_process_rows(self, rows: Sequence[dict[str, Any]]) -> int:
        """Insert ``rows`` exactly in one transaction, then reindex; how many documents the
        reindex counted."""
        with self.store.transaction() as conn:
            conn.executemany(
                _INSERT_PROCESSES,
                [
                    tuple(int(r[c]) if c == "shared" else r[c] for c in PROCESS_COLUMNS)
                    for r in rows
                ],
            )
        return self.processes.rebuild_index()


class SqliteLessonRows:
    """Every lesson of one ``lessons.db``.

    Args:
        path: the lessons file (it need not exist).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._backend = SqliteBackend(path)

    def lessons(self, scope: str | None = None, key: str | None = None) -> list[Lesson]:
        """Every lesson (of ``scope``, of ``key``), as the kit's backend reads them."""
        return self._backend.lessons(scope, key)

    def import_lessons(self, lessons: list[Lesson]) -> None:
        """Write ``lessons`` exactly in one transaction (nothing, not even the file, when
        there are none)."""
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
        """Close the kit's backend. Idempotent."""
        self._backend.close()
