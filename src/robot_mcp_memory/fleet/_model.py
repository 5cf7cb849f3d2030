"""The fleet registry's records: robots, groups, a robot's place in the fleet, and the
sentences of the registry's refusals.

Frozen dataclasses; ``to_dict()`` is what the tools answer.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from robot_mcp_memory._exceptions import FleetError

__all__ = [
    "FleetRows",
    "Group",
    "Placement",
    "Resolution",
    "Robot",
    "group_not_empty",
    "group_not_found",
    "meta_text",
    "robot_not_found",
]


@dataclass(frozen=True)
class Robot:
    """One registered robot. ``meta`` is a JSON object; timestamps are ISO-8601 UTC."""

    robot_id: str
    group_id: str | None
    name: str | None
    meta: dict[str, Any]
    registered: str
    updated: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        return asdict(self)


@dataclass(frozen=True)
class Group:
    """One group. ``self_improve`` None inherits the global toggle; ``robots`` sorted ids."""

    group_id: str
    name: str | None
    customer: str | None
    factory: str | None
    self_improve: bool | None
    created: str
    updated: str
    robots: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (``robots`` as a list)."""
        return {**asdict(self), "robots": list(self.robots)}


@dataclass(frozen=True)
class Placement:
    """What the registry stores about where a robot stands, read in one statement: its
    group (None: ungrouped or unregistered), that group's self-improve toggle (None:
    inherit) and the global toggle's stored value (None: never set)."""

    group_id: str | None
    group_self_improve: bool | None
    global_self_improve: str | None


@dataclass(frozen=True)
class Resolution:
    """A robot's place in the fleet as the rules read it (see :meth:`FleetService.resolve
    <robot_mcp_memory.fleet.FleetService.resolve>`)."""

    robot_id: str
    group_id: str | None
    scope: str
    self_improve: bool
    where: str


@dataclass(frozen=True)
class FleetRows:
    """A whole registry as it is stored (what the copy command moves between backends):
    every group (without members), every robot and every ``fleet_settings`` row."""

    groups: tuple[Group, ...]
    robots: tuple[Robot, ...]
    settings: tuple[tuple[str, str | None], ...]


def meta_text(meta: dict[str, Any]) -> str:
    """A robot's meta as stored: the compact UTF-8 JSON text the validation writes."""
    return json.dumps(meta, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def robot_not_found(robot_id: str) -> FleetError:
    """The refusal of a call naming an unregistered robot."""
    return FleetError(
        "not_found",
        f"robot {robot_id!r} is not registered; register it with register_robot first",
    )


def group_not_found(group_id: str) -> FleetError:
    """The refusal of a call naming a group that does not exist."""
    return FleetError(
        "not_found", f"group {group_id!r} does not exist; create it with upsert_group first"
    )


def group_not_empty(group_id: str, robots: tuple[str, ...]) -> FleetError:
    """The refusal to delete a group that still has ``robots`` (the first 20 named)."""
    shown = list(robots[:20])
    if len(robots) > 20:
        shown.append(f"and {len(robots) - 20} more")
    return FleetError(
        "conflict",
        f"group {group_id!r} still has robots {', '.join(shown)}; move them with "
        "set_group first (set_group(robot_id, None) ungroups a robot)",
    )
