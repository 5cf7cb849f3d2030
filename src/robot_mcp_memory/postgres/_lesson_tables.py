"""The lessons' table on PostgreSQL, written only by
:class:`~robot_mcp_memory.postgres.lessons.PgParamBackend`.

``lessons`` is the kit's SQLite ``params`` table (:data:`robot_mcp_kit.params.PARAMS_SCHEMA`)
with the same columns and the same key: one row per ``(scope, key)``, ``key`` being
:func:`~robot_mcp_kit.params.lesson_key` (``skill`` or ``skill@place``). A lesson was
earned, not logged: a DEFINITION, its counters records about it on its row. Scope and key
are ``COLLATE "C"`` so lessons list in SQLite's byte order; timestamps are
:func:`~robot_mcp_kit.models.format_ts` text; ``value_json`` the kit's sorted-key JSON.
"""

from __future__ import annotations

from robot_mcp_kit.store import Kind, Table

__all__ = ["LESSONS", "LESSON_TABLES"]

LESSONS = Table(
    "lessons",
    Kind.DEFINITION,
    """
    CREATE TABLE lessons (
      scope TEXT COLLATE "C" NOT NULL,
      key TEXT COLLATE "C" NOT NULL,
      value_json TEXT NOT NULL,
      success_count BIGINT NOT NULL DEFAULT 0,
      failure_count BIGINT NOT NULL DEFAULT 0,
      place TEXT,
      robot TEXT,
      created TEXT NOT NULL,
      updated TEXT NOT NULL,
      note TEXT,
      PRIMARY KEY (scope, key)
    )
    """,
)

LESSON_TABLES: tuple[Table, ...] = (LESSONS,)
