"""The process documents' tables on PostgreSQL (filled by the process adapter's work)."""

from __future__ import annotations

from robot_mcp_kit.store import Table

__all__ = ["NEEDS", "PROCESS_TABLES"]

PROCESS_TABLES: tuple[Table, ...] = ()
NEEDS: dict[str, str] = {}
"""Table name -> the extension it needs (``vector``): created only where it is installed."""
