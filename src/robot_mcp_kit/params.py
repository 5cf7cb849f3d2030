"""The lesson store: learned parameters per scope.

A *lesson* is a JSON object of parameters (a grasp offset, an LLM correction) plus how it
fared — success and failure counts — the place it was learned at, the robot that taught
it, and when it was created and last updated. :class:`ParamStore` is one scope's view
(``group:<G>``, ``solo:<robot>``, ``robot:<id>`` in the memory server); the backend holds
every scope.

Who owns what:

- :class:`ParamStore` owns the *rule* of a write (:meth:`ParamStore.record`: what a new
  lesson needs, how counts, robot, note and timestamps carry over). It is the only place
  that rule is written.
- A :class:`ParamBackend` owns *where* lessons live. Its one write, :meth:`ParamBackend.update`,
  reads the current lesson, hands it to the rule and stores the result atomically, so the
  rule never has to be written twice (in SQL and in Python).

:class:`SqliteBackend` keeps all scopes in ONE table keyed ``(scope, key)``::

    params(scope, key, value_json, success_count, failure_count, place, robot,
           created, updated, note)

and opens its file lazily: reads of a missing file answer "nothing" and create nothing; the
first write creates it (a write the rule refuses creates nothing either). So a service where
nobody records a lesson leaves no file behind. Lesson writes are cold (synchronous, never
dropped): they are rare and their caller wants the stored result back.
:class:`MemoryBackend` is the same contract in a dict, for tests.

Schema versions: 1 as above without ``note``; 2 adds ``note``, the last free-text note
recorded with the lesson — a version-1 file migrates on open, its lessons kept.

Keys: one lesson per ``(scope, key, place)``. The row's ``key`` column is
``lesson_key(key, place)`` — ``key`` alone for a place-less lesson, ``key@place``
otherwise — so the ``(scope, key)`` primary key holds one lesson per place.

This module is one file on purpose: the lesson, its store, its rule and its two backends
are one concept, read together (well under the soft ceiling of about 800 lines).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from robot_mcp_kit._exceptions import (
    ConfigurationError,
    InvalidLessonParams,
    LessonError,
    LessonNotFound,
)
from robot_mcp_kit.models import format_ts, reliability, utc_now
from robot_mcp_kit.store import Kind, Schema, SqliteStore, Table

__all__ = [
    "PARAMS_SCHEMA",
    "ConfigurationError",
    "InvalidLessonParams",
    "Lesson",
    "LessonError",
    "LessonNotFound",
    "MemoryBackend",
    "ParamBackend",
    "ParamStore",
    "SqliteBackend",
    "lesson_key",
]

_PLACE_SEP = "@"


def lesson_key(key: str, place: str | None = None) -> str:
    """The row key of the lesson ``key`` learned at ``place`` (``key`` if place-less)."""
    return key if place is None else f"{key}{_PLACE_SEP}{place}"


@dataclass(frozen=True)
class Lesson:
    """One stored lesson. ``key`` is the caller's key (e.g. a skill), without the place.

    ``note`` is the last note recorded with it (a free-text remark; None if never given).
    """

    scope: str
    key: str
    params: dict[str, Any]
    success_count: int = 0
    failure_count: int = 0
    place: str | None = None
    robot: str | None = None
    created: str = ""
    updated: str = ""
    note: str | None = None

    @property
    def reliability(self) -> float:
        """Laplace-smoothed success rate, :func:`robot_mcp_kit.reliability`; 0.5 with none."""
        return reliability(self.success_count, self.failure_count)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field plus ``reliability``."""
        return {
            "scope": self.scope,
            "key": self.key,
            "params": self.params,
            "success_count": self.success_count,
            "failure_count": self.failure_count,
            "place": self.place,
            "robot": self.robot,
            "created": self.created,
            "updated": self.updated,
            "note": self.note,
            "reliability": self.reliability,
        }


class ParamBackend(Protocol):
    """Where lessons live, for every scope. Implementations are thread-safe."""

    def get(self, scope: str, key: str, place: str | None) -> Lesson | None:
        """The lesson at ``(scope, key, place)``, or None. Never creates storage."""
        ...

    def lessons(self, scope: str | None = None, key: str | None = None) -> list[Lesson]:
        """Every lesson (of ``scope``; of ``key`` at every place), by scope then row key."""
        ...

    def update(
        self, scope: str, key: str, place: str | None, rule: Callable[[Lesson | None], Lesson]
    ) -> Lesson:
        """Atomically store ``rule(current)`` at ``(scope, key, place)`` and return it.

        ``rule`` maps the current lesson (None if there is none) to the one to store. It
        may be called more than once (it is pure); if it raises, nothing is stored and the
        error propagates.
        """
        ...

    def delete(self, scope: str, key: str, place: str | None) -> bool:
        """Remove one lesson; True if it existed."""
        ...

    def scopes(self) -> list[str]:
        """Every scope holding a lesson, sorted."""
        ...

    def close(self) -> None:
        """Release what the backend holds. Idempotent."""
        ...


class ParamStore:
    """One scope's lessons over a :class:`ParamBackend`.

    Args:
        backend: where lessons live (shared by every scope's ``ParamStore``).
        scope: this store's scope, e.g. ``group:line-3``.
    """

    def __init__(self, backend: ParamBackend, scope: str) -> None:
        if not scope:
            raise ConfigurationError("a ParamStore needs a non-empty scope")
        self.backend = backend
        self.scope = scope

    def get(self, key: str, *, place: str | None = None) -> Lesson | None:
        """The lesson ``key`` learned at ``place`` (None: the place-less one), or None."""
        return self.backend.get(self.scope, key, place)

    def lessons(self, key: str | None = None) -> list[Lesson]:
        """Every lesson in this scope, or every place's lesson for ``key``."""
        return self.backend.lessons(self.scope, key)

    def record(
        self,
        key: str,
        params: Mapping[str, Any] | None = None,
        *,
        place: str | None = None,
        robot: str | None = None,
        success: bool | None = None,
        note: str | None = None,
    ) -> Lesson:
        """Store ``params`` for ``(key, place)`` and/or count an outcome; return the lesson.

        New lesson: needs ``params``; counts start at the given outcome. Existing lesson:
        ``params`` (if given) replace the old ones, counts are kept and bumped by
        ``success``, ``robot`` and ``note`` are replaced if given (the last note is kept),
        ``created`` is kept, ``updated`` bumped.

        Raises:
            LessonNotFound: ``params`` is None and there is no such lesson (a ``KeyError``).
            InvalidLessonParams: ``params`` is not a JSON object (a ``ValueError`` and a
                ``TypeError``).
        """
        new_params = _checked_params(params)
        now = format_ts(utc_now())
        scope = self.scope

        def rule(old: Lesson | None) -> Lesson:
            if old is None:
                if new_params is None:
                    raise LessonNotFound(
                        f"no lesson {key!r} at place {place!r} in scope {scope!r}; "
                        "record it with params first"
                    )
                return Lesson(
                    scope=scope,
                    key=key,
                    params=new_params,
                    success_count=int(success is True),
                    failure_count=int(success is False),
                    place=place,
                    robot=robot,
                    created=now,
                    updated=now,
                    note=note,
                )
            return Lesson(
                scope=scope,
                key=key,
                params=old.params if new_params is None else new_params,
                success_count=old.success_count + (success is True),
                failure_count=old.failure_count + (success is False),
                place=place,
                robot=old.robot if robot is None else robot,
                created=old.created,
                updated=now,
                note=old.note if note is None else note,
            )

        return self.backend.update(scope, key, place, rule)

    def delete(self, key: str, *, place: str | None = None) -> bool:
        """Remove one lesson; True if it existed."""
        return self.backend.delete(self.scope, key, place)

    def __repr__(self) -> str:
        return f"<ParamStore scope={self.scope!r} backend={type(self.backend).__name__}>"


def _checked_params(params: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A JSON round trip of ``params`` (a fresh, JSON-only dict), or None."""
    if params is None:
        return None
    if not isinstance(params, Mapping):
        raise InvalidLessonParams(
            f"lesson params must be a JSON object (a mapping), got {params!r}"
        )
    try:
        loaded: dict[str, Any] = json.loads(_dump(params))
    except (TypeError, ValueError) as exc:
        raise InvalidLessonParams(f"lesson params are not JSON-serialisable: {exc}") from exc
    return loaded


def _dump(params: Mapping[str, Any]) -> str:
    return json.dumps(dict(params), sort_keys=True, allow_nan=False)


# --- SQLite -----------------------------------------------------------------------------


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
        if place is not None and key.endswith(_PLACE_SEP + place):
            key = key[: -len(_PLACE_SEP + place)]
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

    def update(
        self, scope: str, key: str, place: str | None, rule: Callable[[Lesson | None], Lesson]
    ) -> Lesson:
        store = self._open(create=False)
        if store is None:
            rule(None)  # a write the rule refuses must not create the file
            store = self._open(create=True)
            assert store is not None
        row_key = lesson_key(key, place)
        with store.transaction() as conn:
            row = conn.execute(
                "SELECT * FROM params WHERE scope = ? AND key = ?", (scope, row_key)
            ).fetchone()
            lesson = rule(None if row is None else self._lesson(row))
            conn.execute(
                "INSERT OR REPLACE INTO params (scope, key, value_json, success_count, "
                "failure_count, place, robot, created, updated, note) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    scope,
                    row_key,
                    _dump(lesson.params),
                    lesson.success_count,
                    lesson.failure_count,
                    lesson.place,
                    lesson.robot,
                    lesson.created,
                    lesson.updated,
                    lesson.note,
                ),
            )
        return lesson

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


# --- in memory --------------------------------------------------------------------------


class MemoryBackend:
    """The :class:`ParamBackend` contract in a dict: for tests and throwaway runs."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], Lesson] = {}
        self._lock = threading.Lock()

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

    def update(
        self, scope: str, key: str, place: str | None, rule: Callable[[Lesson | None], Lesson]
    ) -> Lesson:
        row_key = (scope, lesson_key(key, place))
        with self._lock:
            lesson = rule(self._rows.get(row_key))
            self._rows[row_key] = lesson
            return lesson

    def delete(self, scope: str, key: str, place: str | None) -> bool:
        with self._lock:
            return self._rows.pop((scope, lesson_key(key, place)), None) is not None

    def scopes(self) -> list[str]:
        with self._lock:
            return sorted({s for s, _ in self._rows})

    def close(self) -> None:
        """Nothing to release."""
