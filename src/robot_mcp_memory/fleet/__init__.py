"""The fleet registry: robots, groups and self-improve toggles.

:class:`FleetService` holds every rule of the registry over a :class:`FleetRepo` (the
storage port each backend implements); :mod:`.validation` holds the argument checks it and
the lessons share.
"""

from __future__ import annotations

from robot_mcp_memory.fleet.model import (
    FleetRows,
    Group,
    Placement,
    Resolution,
    Robot,
    meta_text,
)
from robot_mcp_memory.fleet.repo import FleetRepo, GroupLabels
from robot_mcp_memory.fleet.service import GLOBAL_SELF_IMPROVE, FleetService

__all__ = [
    "GLOBAL_SELF_IMPROVE",
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
