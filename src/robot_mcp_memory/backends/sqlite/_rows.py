"""The copy command's rows of a SQLite store: documents and lessons read and written whole.

:class:`SqliteProcessRows` reads the rows of ``processes`` and ``processes_revisions``
(every column) and writes rows into an empty ``index.db`` in one transaction, then
rebuilds what is derived from them (the full-text index and the term statistics; vectors
are computed when a server with an embedder opens the file). :class:`SqliteLessonRows`
reads ``lessons.db`` through the kit's backend (a missing file is no lessons) and writes
the kit's rows in one transaction, creating the file only when there is a lesson to
write.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from robot_mcp_kit.params import PARAMS_SCHEMA, Lesson, SqliteBackend, lesson_key
from robot_mcp_kit.store import SqliteStore
from robot_mcp_memory.backends.sqlite._processes import SqliteProcessRepo

__all__ = ["SqliteLessonRows", "SqliteProcessRows"]

_TABLES = ("processes", "processes_revisions")


def _table(table: str) -> str:
    """``table`` quoted for SQL, once it is known to be one of the process tables.

    Raises:
        ValueError: any other name.
    """
    if table not in _TABLES:
        raise ValueError(f"{table!r} is not one of {_TABLES}")
    return f'"{table}"'


class SqliteProcessRows:
    """The raw rows of ``processes`` and ``processes_revisions`` in one ``index.db``.

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

    def columns(self, table: str) -> tuple[str, ...]:
        """Every column of ``table``, in order."""
        rows = self.store.query(f"PRAGMA table_info({_table(table)})")
        return tuple(str(r["name"]) for r in rows)

    def export_table(self, table: str) -> list[dict[str, Any]]:
        """Every row of ``table`` with every column, as stored."""
        self.store.flush()  # the outcome counters are hot writes
        names = ", ".join(f'"{c}"' for c in self.columns(table))
        rows = self.store.query(f"SELECT {names} FROM {_table(table)}")  # noqa: S608
        return [dict(r) for r in rows]

    def import_tables(self, tables: Mapping[str, Sequence[dict[str, Any]]]) -> int:
        """Insert each table's rows exactly, all in one transaction, then reindex; how many
        documents the reindex counted."""
        with self.store.transaction() as conn:
            for table, rows in tables.items():
                if not rows:
                    continue
                columns = list(rows[0])
                names = ", ".join(f'"{c}"' for c in columns)
                marks = ", ".join("?" for _ in columns)
                conn.executemany(
                    f"INSERT INTO {_table(table)} ({names}) VALUES ({marks})",  # noqa: S608
                    [tuple(r[c] for c in columns) for r in rows],
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
