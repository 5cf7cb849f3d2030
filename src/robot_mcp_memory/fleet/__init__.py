"""The fleet registry: robots, groups and self-improve toggles in ``index.db``.

:class:`FleetRegistry` is the SQLite adapter of :class:`robot_mcp_memory.ports.FleetPort`;
:mod:`.validation` holds the argument checks it and the lessons share.
"""

from __future__ import annotations

from robot_mcp_memory.fleet._records import (
    FleetRows,
    Group,
    Resolution,
    Robot,
    group_not_empty,
    group_not_found,
    meta_text,
    robot_not_found,
)
from robot_mcp_memory.fleet._registry import (
    GLOBAL_SELF_IMPROVE,
    FleetRegistry,
)

__all__ = [
    "GLOBAL_SELF_IMPROVE",
    "FleetRegistry",
    "FleetRows",
    "Group",
    "Resolution",
    "Robot",
    "group_not_empty",
    "group_not_found",
    "meta_text",
    "robot_not_found",
]
