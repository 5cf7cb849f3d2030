"""FleetService: the robots, their groups and the self-improve toggles,
every rule written once over a :class:`~robot_mcp_memory.fleet._repo.FleetRepo`.

The registry is the one source of truth every brain reads and writes over MCP, and the
registry the rest of the server resolves scopes through:

- ``scope_of(robot)`` is ``group:<G>`` for a robot registered in group G, else
  ``solo:<robot>`` (unregistered robots too): where its shared lessons live;
- ``visible_robots(robot)`` is its group's members plus itself: whose process documents
  it sees; resolved on every call, so regrouping takes effect at once;
- ``self_improve_for(robot)`` is its group's toggle when that is set, else the global one;
  everything is OFF until an operator switches it on.

Every argument is validated (:mod:`.validation`); anything wrong raises
:class:`~robot_mcp_memory.FleetError` (code ``invalid``, ``not_found`` or ``conflict``)
and nothing else — never a TypeError, OverflowError or RecursionError text, never a
storage error's. Each call is one transaction of the repository; all methods are
thread-safe and blocking (the server calls them from worker threads). See decision 0007.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

from robot_mcp_kit.log import get_logger
from robot_mcp_kit.models import format_ts, utc_now
from robot_mcp_memory._exceptions import MissingReference
from robot_mcp_memory.fleet._model import (
    Group,
    Resolution,
    Robot,
    group_not_empty,
    group_not_found,
    robot_not_found,
)
from robot_mcp_memory.fleet._repo import FleetRepo
from robot_mcp_memory.fleet.validation import (
    check_bool,
    check_id,
    check_json_object,
    check_label,
)

__all__ = ["GLOBAL_SELF_IMPROVE", "FleetService"]

_log = get_logger("robot_mcp_memory.fleet")

GLOBAL_SELF_IMPROVE = "global_self_improve"
"""The ``fleet_settings`` key of the global self-improve toggle ('1' on, '0' off)."""

_LABELS = ("name", "customer", "factory")


class FleetService:
    """Robots, groups and self-improve toggles (see the module docstring).

    Args:
        repo: where the registry is stored.
        clock: the time source for ``registered``/``created``/``updated`` (tests inject it).
    """

    def __init__(self, repo: FleetRepo, *, clock: Callable[[], datetime] = utc_now) -> None:
        self.repo = repo
        self._clock = clock

    def _now(self) -> str:
        return format_ts(self._clock())

    # --- reads ------------------------------------------------------------------------

    def get_robot(self, robot_id: str) -> Robot | None:
        """The robot, or None if it is not registered."""
        return self.repo.robot(check_id(robot_id, "robot_id"))

    def list_robots(self, group_id: str | None = None) -> list[Robot]:
        """Every robot by id; with ``group_id``, that group's (none for an unknown group)."""
        gid = None if group_id is None else check_id(group_id, "group_id")
        return self.repo.robots(gid)

    def get_group(self, group_id: str) -> Group | None:
        """The group with its members, or None if it does not exist."""
        return self.repo.group(check_id(group_id, "group_id"))

    def list_groups(self) -> list[Group]:
        """Every group by id, each with its members."""
        return self.repo.groups()

    def resolve(self, robot_id: str) -> Resolution:
        """The robot's group, scope and effective self-improve toggle, in one snapshot.

        A robot need not be registered: an unknown one is ungrouped (``solo:<id>``) and
        follows the global toggle. ``where`` names the toggle that decided:
        ``group:<G>`` when the group's own toggle is set, else ``global``.
        """
        rid = check_id(robot_id, "robot_id")
        placed = self.repo.placement(rid, GLOBAL_SELF_IMPROVE)
        gid = placed.group_id
        scope = f"group:{gid}" if gid is not None else f"solo:{rid}"
        if gid is not None and placed.group_self_improve is not None:
            return Resolution(rid, gid, scope, placed.group_self_improve, f"group:{gid}")
        return Resolution(rid, gid, scope, placed.global_self_improve == "1", "global")

    def global_self_improve(self) -> bool:
        """The global self-improve toggle (off until an operator switches it on)."""
        return self.repo.setting(GLOBAL_SELF_IMPROVE) == "1"

    def self_improve_for(self, robot_id: str) -> tuple[bool, str]:
        """``(enabled, where)``: the group's toggle if grouped and set, else the global one
        (``where`` is ``group:<G>`` or ``global``). Off until an operator switches it on."""
        res = self.resolve(robot_id)
        return res.self_improve, res.where

    def scope_of(self, robot_id: str) -> str:
        """``group:<G>`` for a robot registered in group G, else ``solo:<robot_id>``."""
        return self.resolve(robot_id).scope

    def group_of(self, robot_id: str) -> str | None:
        """The robot's group id, or None (ungrouped or unregistered)."""
        return self.resolve(robot_id).group_id

    def visible_robots(self, robot_id: str) -> frozenset[str]:
        """The robots whose (non-shared) documents this robot sees: its group's members and
        itself; itself alone when ungrouped. Read from the registry on every call."""
        rid = check_id(robot_id, "robot_id")
        return frozenset([rid, *self.repo.group_members_of(rid)])

    # --- robots -----------------------------------------------------------------------

    def register_robot(
        self,
        robot_id: str,
        name: str | None = None,
        group_id: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Robot:
        """Register a robot, or update a registered one (bumping ``updated``).

        On an update, an argument left None keeps that field (``meta=None`` keeps the meta;
        ungroup with :meth:`set_group`); ``name=""`` clears the name. A new robot's meta
        defaults to ``{}``.

        Raises:
            FleetError: ``invalid`` for a bad argument; ``not_found`` for an unknown group.
        """
        rid = check_id(robot_id, "robot_id")
        label = check_label(name, "name") if name is not None else None
        gid = check_id(group_id, "group_id") if group_id is not None else None
        meta_json = check_json_object(meta, "meta") if meta is not None else None
        try:
            robot, new = self.repo.save_robot(
                rid,
                name=label,
                rename=name is not None,
                group_id=gid,
                meta=meta_json,
                now=self._now(),
            )
        except MissingReference:
            assert gid is not None  # only a group id can name a missing record
            raise group_not_found(gid) from None
        _log.info("fleet_robot_registered", robot_id=rid, group_id=robot.group_id, new=new)
        return robot

    def set_robot_meta(self, robot_id: str, meta: dict[str, Any]) -> Robot:
        """Replace a registered robot's meta. Raises FleetError invalid / not_found."""
        rid = check_id(robot_id, "robot_id")
        meta_json = check_json_object(meta, "meta")
        robot = self.repo.set_meta(rid, meta_json, self._now())
        if robot is None:
            raise robot_not_found(rid)
        return robot

    def set_group(self, robot_id: str, group_id: str | None) -> Robot:
        """Move a registered robot into ``group_id``, or ungroup it (None).

        Its shared scope and what it sees change at once. Raises FleetError invalid, or
        not_found for an unknown robot (checked first) or group.
        """
        rid = check_id(robot_id, "robot_id")
        gid = check_id(group_id, "group_id") if group_id is not None else None
        try:
            moved = self.repo.move_robot(rid, gid, self._now())
        except MissingReference:
            assert gid is not None
            raise group_not_found(gid) from None
        if moved is None:
            raise robot_not_found(rid)
        before, robot = moved
        _log.info("fleet_robot_regrouped", robot_id=rid, from_group=before, to_group=gid)
        return robot

    # --- groups -----------------------------------------------------------------------

    def upsert_group(
        self,
        group_id: str,
        name: str | None = None,
        customer: str | None = None,
        factory: str | None = None,
    ) -> Group:
        """Create a group (self-improve inherited from the global toggle) or update one.

        On an update an argument left None keeps that field; ``""`` clears it.
        Raises FleetError invalid.
        """
        gid = check_id(group_id, "group_id")
        given = {"name": name, "customer": customer, "factory": factory}
        labels = {f: check_label(v, f) for f, v in given.items() if v is not None}
        group = self.repo.save_group(gid, labels, self._now())
        _log.info("fleet_group_upserted", group_id=gid)
        return group

    def delete_group(self, group_id: str) -> Group:
        """Delete an EMPTY group; return it as it was.

        A group that still has robots is refused (``conflict``, naming them): ungrouping
        them silently would move their documents and lessons to solo scopes (decision
        0007). A robot registered into it at the same moment either waits and finds no
        group, or is named here. Raises FleetError invalid / not_found / conflict.
        """
        gid = check_id(group_id, "group_id")

        def must_be_empty(group: Group) -> None:
            if group.robots:
                raise group_not_empty(gid, group.robots)

        group = self.repo.delete_group(gid, must_be_empty)
        if group is None:
            raise group_not_found(gid)
        _log.info("fleet_group_deleted", group_id=gid)
        return group

    def set_self_improve(self, enabled: bool | None, group_id: str | None = None) -> dict[str, Any]:
        """Switch self-improvement on or off for a group, or globally (no group).

        ``enabled=None`` with a group returns that group to inheriting the global toggle.
        Returns ``{"group_id": <id or None>, "self_improve": <bool or None>}``.

        Raises:
            FleetError: ``invalid`` (``enabled`` not a bool, or None without a group),
                ``not_found`` for an unknown group.
        """
        gid = check_id(group_id, "group_id") if group_id is not None else None
        if enabled is not None or gid is None:
            enabled = check_bool(enabled, "enabled")
        if gid is None:
            self.repo.put_setting(GLOBAL_SELF_IMPROVE, "1" if enabled else "0")
        elif not self.repo.set_group_self_improve(gid, enabled, self._now()):
            raise group_not_found(gid)
        _log.info("fleet_self_improve_set", group_id=gid, enabled=enabled)
        return {"group_id": gid, "self_improve": enabled}

    # --- load (robot-mcp-memory load) ------------------------------------------------

    def import_group(self, group: Group) -> str:
        """Put ``group`` in exactly as given (timestamps and toggle included), for ``load``.

        Returns ``"inserted"``; ``"skipped"`` when the same group is already there (its
        robots aside); ``"conflict"`` when a group with this id differs (nothing written).
        Raises FleetError invalid for a bad id or label.
        """
        check_id(group.group_id, "group_id")
        for field in _LABELS:
            value = getattr(group, field)
            if value is not None:
                check_label(value, field)
        stored = self.repo.insert_group(group)
        if stored is None:
            return "inserted"
        same = replace(stored, robots=()) == replace(group, robots=())
        return "skipped" if same else "conflict"

    def import_robot(self, robot: Robot) -> str:
        """Put ``robot`` in exactly as given (timestamps included), for ``load``; its group
        must exist. Returns ``"inserted"``, ``"skipped"`` (the same robot is there) or
        ``"conflict"`` (a robot with this id differs; nothing written).

        Raises:
            FleetError: ``invalid`` for a bad field, ``not_found`` for an unknown group.
        """
        check_id(robot.robot_id, "robot_id")
        if robot.name is not None:
            check_label(robot.name, "name")
        meta_json = check_json_object(robot.meta, "meta")
        try:
            stored = self.repo.insert_robot(robot, meta_json)
        except MissingReference:
            assert robot.group_id is not None  # only a group id can name a missing record
            raise group_not_found(robot.group_id) from None
        if stored is None:
            return "inserted"
        return "skipped" if stored == robot else "conflict"

    def __repr__(self) -> str:
        return f"<FleetService {self.repo!r}>"
