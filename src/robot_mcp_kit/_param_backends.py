"""Where lessons live: :class:`SqliteBackend` (one table, every scope) and :class:`MemoryBackend`.

The storage contract — the one ``params`` table keyed ``(scope, key)``, the lazy file, cold
writes, schema versions 1 and 2 (``note``) — is described once, in :mod:`robot_mcp_kit.params`,
the public module that re-exports these classes.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robot_mcp_kit._exceptions import InvalidLessonParams, LessonNotFound
from robot_mcp_kit._param_store import PLACE_SEP, Lesson, lesson_key
from robot_mcp_kit.store import Kind, Schema, SqliteStore, Table

__all__ = ["PARAMS_SCHEMA", "MemoryBackend", "SqliteBackend"]


def _add_note(conn: sqlite3.Connection) -> None:
    """Migration step 1 -> 2: the lesson's last note."""
    conn.execute("ALTER TABLE params ADD COLUMN note TEXT")


PARAMS_SCHEMA = Schema(
    version=2,
    tables=(
        Table(
            "params",
            # A lesson was earned, not logged: like a process document it is a definition,
            # and its counters are records about it that sit on its row.
            Kind.DEFINITION,
            """CREATE TABLE params (
                scope         TEXT NOT NULL,
                key           TEXT NOT NULL,
                value_json    TEXT NOT NULL,
                success_count INTEGER NOT NULL DEFAULT 0,
                failure_count INTEGER NOT NULL DEFAULT 0,
                place         TEXT,
                robot         TEXT,
                created       TEXT NOT NULL,
                updated       TEXT NOT NULL,
                note          TEXT,
                PRIMARY KEY (scope, key)
            )""",
        ),
    ),
    migrations={2: _add_note},
)


def _check_params(params: Mapping[str, Any] | None) -> str | None:
    if params is None:
        return None
    if not isinstance(params, Mapping):
        raise InvalidLessonParams(
            f"lesson params must be a JSON object (a mapping), got {params!r}"
        )
    try:
        return json.dumps(dict(params), sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidLessonParams(f"lesson params are not JSON-serialisable: {exc}") from exc


def _missing(scope: str, key: str, place: str | None) -> LessonNotFound:
    return LessonNotFound(
        f"no lesson {key!r} at place {place!r} in scope {scope!r}; record it with params first"
    )


class SqliteBackend:
    """All scopes' lessons in one SQLite table; the file is created on the first write.

    Args:
        path: the database file (e.g. ``MEMORY_DATA_DIR/lessons.db``).

    Thread-safe. ``close()`` is idempotent; the backend reopens lazily if used again.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._store: SqliteStore | None = None
        self._lock = threading.Lock()

    def _open(self, *, create: bool) -> SqliteStore | None:
        with self._lock:
            if self._store is None:
                if not create and not self.path.exists():
                    return None
                self._store = SqliteStore(self.path, PARAMS_SCHEMA)
            return self._store

    @staticmethod
    def _lesson(row: Any) -> Lesson:
        place = row["place"]
        key: str = row["key"]
        if place is not None and key.endswith(PLACE_SEP + place):
            key = key[: -len(PLACE_SEP + place)]
        return Lesson(
            scope=row["scope"],
            key=key,
            params=json.loads(row["value_json"]),
            success_count=row["success_count"],
            failure_count=row["failure_count"],
            place=place,
            robot=row["robot"],
            created=row["created"],
            updated=row["updated"],
            note=row["note"],
        )

    def get(self, scope: str, key: str, place: str | None) -> Lesson | None:
        store = self._open(create=False)
        if store is None:
            return None
        row = store.query_one(
            "SELECT * FROM params WHERE scope = ? AND key = ?", (scope, lesson_key(key, place))
        )
        return None if row is None else self._lesson(row)

    def lessons(self, scope: str | None = None, key: str | None = None) -> list[Lesson]:
        store = self._open(create=False)
        if store is None:
            return []
        rows = store.query(
            "SELECT * FROM params WHERE (:scope IS NULL OR scope = :scope) ORDER BY scope, key",
            {"scope": scope},
        )
        found = [self._lesson(r) for r in rows]
        return found if key is None else [lesson for lesson in found if lesson.key == key]

    def record(
        self,
        scope: str,
        key: str,
        *,
        params: Mapping[str, Any] | None,
        place: str | None,
        robot: str | None,
        success: bool | None,
        now: str,
        note: str | None = None,
    ) -> Lesson:
        value_json = _check_params(params)
        store = self._open(create=value_json is not None)
        if store is None:
            raise _missing(scope, key, place)
        row_key = lesson_key(key, place)
        ok = 1 if success is True else 0
        bad = 1 if success is False else 0
        with store.transaction() as conn:
            exists = conn.execute(
                "SELECT 1 FROM params WHERE scope = ? AND key = ?", (scope, row_key)
            ).fetchone()
            if exists is None:
                if value_json is None:
                    raise _missing(scope, key, place)
                conn.execute(
                    "INSERT INTO params (scope, key, value_json, success_count, failure_count, "
                    "place, robot, created, updated, note) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (scope, row_key, value_json, ok, bad, place, robot, now, now, note),
                )
            else:
                conn.execute(
                    "UPDATE params SET value_json = coalesce(?, value_json), "
                    "success_count = success_count + ?, failure_count = failure_count + ?, "
                    "robot = coalesce(?, robot), note = coalesce(?, note), updated = ? "
                    "WHERE scope = ? AND key = ?",
                    (value_json, ok, bad, robot, note, now, scope, row_key),
                )
            row = conn.execute(
                "SELECT * FROM params WHERE scope = ? AND key = ?", (scope, row_key)
            ).fetchone()
        return self._lesson(row)

    def delete(self, scope: str, key: str, place: str | None) -> bool:
        store = self._open(create=False)
        if store is None:
            return False
        return (
            store.execute(
                "DELETE FROM params WHERE scope = ? AND key = ?", (scope, lesson_key(key, place))
            )
            > 0
        )

    def scopes(self) -> list[str]:
        store = self._open(create=False)
        if store is None:
            return []
        return [r[0] for r in store.query("SELECT DISTINCT scope FROM params ORDER BY scope")]

    def close(self) -> None:
        with self._lock:
            store, self._store = self._store, None
        if store is not None:
            store.close()


@dataclass
class MemoryBackend:
    """The :class:`ParamBackend` contract in a dict: for tests and throwaway runs."""

    _rows: dict[tuple[str, str], Lesson] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, scope: str, key: str, place: str | None) -> Lesson | None:
        with self._lock:
            return self._rows.get((scope, lesson_key(key, place)))

    def lessons(self, scope: str | None = None, key: str | None = None) -> list[Lesson]:
        with self._lock:
            return [
                lesson
                for (s, _), lesson in sorted(self._rows.items())
                if (scope is None or s == scope) and (key is None or lesson.key == key)
            ]

    def record(
        self,
        scope: str,
        key: str,
        *,
        params: Mapping[str, Any] | None,
        place: str | None,
        robot: str | None,
        success: bool | None,
        now: str,
        note: str | None = None,
    ) -> Lesson:
        value_json = _check_params(params)
        with self._lock:
            old = self._rows.get((scope, lesson_key(key, place)))
            if old is None and value_json is None:
                raise _missing(scope, key, place)
            lesson = Lesson(
                scope=scope,
                key=key,
                params=json.loads(value_json) if value_json is not None else old.params,  # type: ignore[union-attr]
                success_count=(old.success_count if old else 0) + (success is True),
                failure_count=(old.failure_count if old else 0) + (success is False),
                place=place,
                robot=robot if robot is not None else (old.robot if old else None),
                created=old.created if old else now,
                updated=now,
                note=note if note is not None else (old.note if old else None),
            )
            self._rows[(scope, lesson_key(key, place))] = lesson
            return lesson

    def delete(self, scope: str, key: str, place: str | None) -> bool:
        with self._lock:
            return self._rows.pop((scope, lesson_key(key, place)), None) is not None

    def scopes(self) -> list[str]:
        with self._lock:
            return sorted({s for s, _ in self._rows})

    def close(self) -> None:
        """Nothing to release."""
