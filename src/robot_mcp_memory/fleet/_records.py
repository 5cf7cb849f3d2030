"""The fleet registry's records (robots, groups, a robot's resolution) and their SQL.

Read from ``fleet_robots`` / ``fleet_groups`` rows by :class:`~robot_mcp_memory.fleet.FleetRegistry`
(re-exported there). Frozen dataclasses; ``to_dict()`` is what the tools answer.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict, dataclass
from typing import Any

from robot_mcp_memory._exceptions import FleetError

__all__ = [
    "GROUP_SQL",
    "FleetRows",
    "Group",
    "Resolution",
    "Robot",
    "fetch_group",
    "fetch_robot",
    "group_exists",
    "group_from_row",
    "group_not_empty",
    "group_not_found",
    "meta_text",
    "robot_from_row",
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
class Resolution:
    """A robot's place in the fleet, read in one statement (see :meth:`FleetRegistry.resolve`)."""

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


GROUP_SQL = (
    "SELECT g.group_id, g.name, g.customer, g.factory, g.self_improve, g.created, g.updated, "
    "(SELECT group_concat(r.robot_id, ',') FROM fleet_robots AS r "
    " WHERE r.group_id = g.group_id) AS robots FROM fleet_groups AS g"
)


def robot_from_row(row: sqlite3.Row) -> Robot:
    return Robot(
        robot_id=row["robot_id"],
        group_id=row["group_id"],
        name=row["name"],
        meta=json.loads(row["meta"]),
        registered=row["registered"],
        updated=row["updated"],
    )


def group_from_row(row: sqlite3.Row) -> Group:
    si = row["self_improve"]
    return Group(
        group_id=row["group_id"],
        name=row["name"],
        customer=row["customer"],
        factory=row["factory"],
        self_improve=None if si is None else bool(si),
        created=row["created"],
        updated=row["updated"],
        robots=tuple(sorted(row["robots"].split(","))) if row["robots"] else (),
    )


def meta_text(meta: dict[str, Any]) -> str:
    """A robot's meta as stored: the compact UTF-8 JSON text the validation writes."""
    return json.dumps(meta, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def robot_not_found(robot_id: str) -> FleetError:
    return FleetError(
        "not_found",
        f"robot {robot_id!r} is not registered; register it with register_robot first",
    )


def group_not_found(group_id: str) -> FleetError:
    return FleetError(
        "not_found", f"group {group_id!r} does not exist; create it with upsert_group first"
    )


def group_not_empty(group_id: str, robots: tuple[str, ...]) -> FleetError:
    shown = list(robots[:20])
    if len(robots) > 20:
        shown.append(f"and {len(robots) - 20} more")
    return FleetError(
        "conflict",
        f"group {group_id!r} still has robots {', '.join(shown)}; move them with "
        "set_group first (set_group(robot_id, None) ungroups a robot)",
    )


def group_exists(conn: sqlite3.Connection, group_id: str) -> bool:
    row = conn.execute("SELECT 1 FROM fleet_groups WHERE group_id = ?", (group_id,)).fetchone()
    return row is not None


def fetch_robot(conn: sqlite3.Connection, robot_id: str) -> sqlite3.Row:
    row: sqlite3.Row = conn.execute(
        "SELECT * FROM fleet_robots WHERE robot_id = ?", (robot_id,)
    ).fetchone()
    return row


def fetch_group(conn: sqlite3.Connection, group_id: str) -> sqlite3.Row:
    row: sqlite3.Row = conn.execute(f"{GROUP_SQL} WHERE g.group_id = ?", (group_id,)).fetchone()
    return row
