"""The lessons' tables on PostgreSQL (filled by the lesson adapter's work)."""

from __future__ import annotations

from robot_mcp_kit.store import Table

__all__ = ["LESSON_TABLES"]

LESSON_TABLES: tuple[Table, ...] = ()
