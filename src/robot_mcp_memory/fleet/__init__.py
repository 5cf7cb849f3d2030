"""The fleet registry: robots, groups and self-improve toggles.

:class:`FleetService` holds every rule of the registry over a :class:`FleetRepo` (the
storage port each backend implements); :mod:`.validation` holds the argument checks it and
the lessons share.
"""

from __future__ import annotations

from robot_mcp_memory.fleet._model import (
    FleetRows,
    Group,
    Placement,
    Resolution,
    Robot,
    meta_text,
)
from robot_mcp_memory.fleet._repo import FleetRepo, GroupLabels
from robot_mcp_memory.fleet._service import FleetService

__all__ = [
    "FleetRepo",
    "FleetRows",
    "FleetService",
    "Group",
    "GroupLabels",
    "Placement",
    "Resolution",
    "Robot",
    "meta_text",
]
