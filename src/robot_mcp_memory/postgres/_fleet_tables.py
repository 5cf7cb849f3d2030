"""The fleet registry's tables on PostgreSQL (filled by the fleet adapter's work)."""

from __future__ import annotations

from robot_mcp_kit.store import Table

__all__ = ["FLEET_TABLES"]

FLEET_TABLES: tuple[Table, ...] = ()
