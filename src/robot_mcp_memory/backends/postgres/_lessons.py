"""PgParamBackend: every scope's lessons in one PostgreSQL table.

The PostgreSQL implementation of the kit's :class:`robot_mcp_kit.params.ParamBackend`,
under :class:`~robot_mcp_memory.params.ScopedParams` exactly where the kit's
:class:`~robot_mcp_kit.params.SqliteBackend` sits for ``lessons.db``. The table is
:data:`~._tables.LESSONS` (created with the rest of the
schema, so unlike ``lessons.db`` it exists before the first lesson).

:meth:`PgParamBackend.update` is the one write, atomic across replicas: in one transaction
it locks the lesson's row (``SELECT ... FOR UPDATE``), hands it to the rule and writes the
result. When there is no row yet, two replicas may both find none: the insert is ``ON
CONFLICT DO NOTHING`` and the one that loses reads the winner's row, locked, and calls the
rule again (the kit's rule is pure and may be called more than once), so no outcome is
counted twice or lost. A lost connection or a statement timeout raises
:class:`~robot_mcp_kit.store.StoreUnavailable` with nothing written.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from psycopg.rows import dict_row

from robot_mcp_kit.params import Lesson, lesson_key
from robot_mcp_memory.backends.postgres._database import PgDatabase

__all__ = ["UPDATE_ATTEMPTS", "PgParamBackend"]

UPDATE_ATTEMPTS = 8
"""How often :meth:`PgParamBackend.update` reads again after losing the race to create a
lesson (each loss means another replica created it; a second loss needs it deleted in
between)."""

_SEP = "@"

_COLUMNS = (
    "scope, key, value_json, success_count, failure_count, place, robot, created, updated, note"
)


def _dump(params: dict[str, Any]) -> str:
    """The kit's ``value_json``: sorted keys, no NaN (the same text as ``lessons.db``)."""
    return json.dumps(params, sort_keys=True, allow_nan=False)


def _lesson(row: dict[str, Any]) -> Lesson:
    place = row["place"]
    key: str = row["key"]
    if place is not None and key.endswith(_SEP + place):
        key = key[: -len(_SEP + place)]
    return Lesson(
        scope=row["scope"],
        key=key,
        params=json.loads(row["value_json"]),
        success_count=int(row["success_count"]),
        failure_count=int(row["failure_count"]),
        place=place,
        robot=row["robot"],
        created=row["created"],
        updated=row["updated"],
        note=row["note"],
    )


def _values(scope: str, row_key: str, lesson: Lesson) -> tuple[Any, ...]:
    return (
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
    )


class PgParamBackend:
    """All scopes' lessons in the ``lessons`` table of one PostgreSQL database.

    Args:
        db: the opened database (:data:`~._schema.SCHEMA`). Not closed
            here: :meth:`close` is a no-op, the database's owner closes it.

    Thread-safe (the pool is).
    """

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def get(self, scope: str, key: str, place: str | None) -> Lesson | None:
        with self.db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute(
                f"SELECT {_COLUMNS} FROM lessons WHERE scope = %s AND key = %s",  # noqa: S608
                (scope, lesson_key(key, place)),
            )
            row = cur.fetchone()
        return None if row is None else _lesson(row)

    def lessons(self, scope: str | None = None, key: str | None = None) -> list[Lesson]:
        with self.db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute(
                f"SELECT {_COLUMNS} FROM lessons "  # noqa: S608
                "WHERE (%(scope)s::text IS NULL OR scope = %(scope)s) AND (%(key)s::text IS NULL "
                "OR key = %(key)s OR left(key, length(%(key)s) + 1) = %(key)s || '@') "
                "ORDER BY scope, key",
                {"scope": scope, "key": key},
            )
            rows = cur.fetchall()
        found = [_lesson(r) for r in rows]
        return found if key is None else [lesson for lesson in found if lesson.key == key]

    def update(
        self, scope: str, key: str, place: str | None, rule: Callable[[Lesson | None], Lesson]
    ) -> Lesson:
        row_key = lesson_key(key, place)
        with self.db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            for _ in range(UPDATE_ATTEMPTS):
                cur.execute(
                    f"SELECT {_COLUMNS} FROM lessons WHERE scope = %s AND key = %s "  # noqa: S608
                    "FOR UPDATE",
                    (scope, row_key),
                )
                row = cur.fetchone()
                if row is not None:
                    lesson = rule(_lesson(row))
                    cur.execute(
                        "UPDATE lessons SET value_json = %s, success_count = %s, "
                        "failure_count = %s, place = %s, robot = %s, created = %s, updated = %s, "
                        "note = %s WHERE scope = %s AND key = %s",
                        (*_values(scope, row_key, lesson)[2:], scope, row_key),
                    )
                    return lesson
                lesson = rule(None)
                cur.execute(
                    f"INSERT INTO lessons ({_COLUMNS}) "  # noqa: S608
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (scope, key) DO NOTHING",
                    _values(scope, row_key, lesson),
                )
                if cur.rowcount == 1:
                    return lesson
                # Another replica created it since our read: read it (locked) and redo.
        raise RuntimeError(  # pragma: no cover - needs a create/delete race 8 times over
            f"the lesson {row_key!r} in scope {scope!r} kept changing under "
            f"{UPDATE_ATTEMPTS} attempts; nothing was written"
        )

    def delete(self, scope: str, key: str, place: str | None) -> bool:
        with self.db.connection() as conn:
            n = conn.execute(
                "DELETE FROM lessons WHERE scope = %s AND key = %s",
                (scope, lesson_key(key, place)),
            ).rowcount
        return n > 0

    def scopes(self) -> list[str]:
        with self.db.connection() as conn:
            rows = conn.execute("SELECT DISTINCT scope FROM lessons ORDER BY scope").fetchall()
        return [str(r[0]) for r in rows]

    def count(self) -> int:
        """How many lessons are stored (every scope)."""
        with self.db.connection() as conn:
            row = conn.execute("SELECT count(*) FROM lessons").fetchone()
        return 0 if row is None else int(row[0])

    def import_lessons(self, lessons: list[Lesson]) -> None:
        """Write ``lessons`` exactly (counts, timestamps) in one transaction; for an empty
        table (the copy command checks): a lesson already there fails them all."""
        with self.db.connection() as conn, conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO lessons ({_COLUMNS}) "  # noqa: S608
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [_values(x.scope, lesson_key(x.key, x.place), x) for x in lessons],
            )

    def close(self) -> None:
        """Nothing to release: the database belongs to whoever opened it."""

    def __repr__(self) -> str:
        return f"<PgParamBackend {self.db.where!r}>"
