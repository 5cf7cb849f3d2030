"""FleetRegistry: the robots, their groups and the self-improve toggles (memory spec v0.2).

The registry is three DEFINITION tables of ``index.db`` (:mod:`robot_mcp_memory.db`):
``fleet_robots``, ``fleet_groups`` and ``fleet_settings``, written over the same kit
:class:`~robot_mcp_kit.store.SqliteStore` the process documents use. It is the one source
of truth every brain reads and writes over MCP, and the registry the rest of the server
resolves scopes through:

- ``scope_of(robot)`` is ``group:<G>`` for a robot registered in group G, else
  ``solo:<robot>`` (unregistered robots too): where its shared lessons live;
- ``visible_robots(robot)`` is its group's members plus itself: whose process documents
  it sees; resolved on every call, so regrouping takes effect at once;
- ``self_improve_for(robot)`` is its group's toggle when that is set, else the global one;
  everything is OFF until an operator switches it on.

Contract: every write is one cold transaction (``store.transaction()``: the caller's
thread, synchronous, never dropped); called inside an open ``store.transaction()`` on the
same thread, an operation joins it (a savepoint), so several operations can be made
atomic together. Every read is one SQL statement (one consistent snapshot). All methods
are thread-safe and synchronous (the server calls them from worker threads). Every
argument is validated; anything wrong raises :class:`FleetError` (code ``invalid``,
``not_found`` or ``conflict``) and nothing else — never a TypeError, OverflowError or
RecursionError text. See decision 0007.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

from robot_mcp_kit.log import get_logger
from robot_mcp_kit.models import format_ts, utc_now
from robot_mcp_kit.store import SqliteStore
from robot_mcp_memory.fleet._records import (
    GROUP_SQL,
    FleetRows,
    Group,
    Resolution,
    Robot,
    fetch_group,
    fetch_robot,
    group_exists,
    group_from_row,
    group_not_empty,
    group_not_found,
    meta_text,
    robot_from_row,
    robot_not_found,
)
from robot_mcp_memory.fleet.validation import (
    check_bool,
    check_id,
    check_json_object,
    check_label,
)

__all__ = ["GLOBAL_SELF_IMPROVE", "FleetRegistry"]

_log = get_logger("robot_mcp_memory.fleet")

GLOBAL_SELF_IMPROVE = "global_self_improve"
"""The ``fleet_settings`` key of the global self-improve toggle ('1' on, '0' off)."""


class FleetRegistry:
    """Robots, groups and self-improve toggles in ``index.db`` (see the module docstring).

    Args:
        store: the kit store opened on :data:`robot_mcp_memory.db.SCHEMA` — the same one
            the :class:`~robot_mcp_memory.store.ProcessStore` uses. Not closed by this class.
        clock: the time source for ``registered``/``created``/``updated`` (tests inject it).
    """

    def __init__(self, store: SqliteStore, *, clock: Callable[[], datetime] = utc_now) -> None:
        self.store = store
        self._clock = clock

    def _now(self) -> str:
        return format_ts(self._clock())

    # --- reads ------------------------------------------------------------------------

    def get_robot(self, robot_id: str) -> Robot | None:
        """The robot, or None if it is not registered."""
        rid = check_id(robot_id, "robot_id")
        row = self.store.query_one("SELECT * FROM fleet_robots WHERE robot_id = ?", (rid,))
        return None if row is None else robot_from_row(row)

    def list_robots(self, group_id: str | None = None) -> list[Robot]:
        """Every robot by id; with ``group_id``, that group's (none for an unknown group)."""
        if group_id is None:
            rows = self.store.query("SELECT * FROM fleet_robots ORDER BY robot_id")
        else:
            gid = check_id(group_id, "group_id")
            rows = self.store.query(
                "SELECT * FROM fleet_robots WHERE group_id = ? ORDER BY robot_id", (gid,)
            )
        return [robot_from_row(r) for r in rows]

    def get_group(self, group_id: str) -> Group | None:
        """The group with its members, or None if it does not exist."""
        gid = check_id(group_id, "group_id")
        row = self.store.query_one(f"{GROUP_SQL} WHERE g.group_id = ?", (gid,))
        return None if row is None else group_from_row(row)

    def list_groups(self) -> list[Group]:
        """Every group by id, each with its members."""
        return [group_from_row(r) for r in self.store.query(f"{GROUP_SQL} ORDER BY g.group_id")]

    def resolve(self, robot_id: str) -> Resolution:
        """The robot's group, scope and effective self-improve toggle, in one snapshot.

        A robot need not be registered: an unknown one is ungrouped (``solo:<id>``) and
        follows the global toggle. ``where`` names the toggle that decided:
        ``group:<G>`` when the group's own toggle is set, else ``global``.
        """
        rid = check_id(robot_id, "robot_id")
        row = self.store.query_one(
            "SELECT r.group_id AS group_id, g.self_improve AS group_si, "
            "(SELECT value FROM fleet_settings WHERE key = ?) AS global_si "
            "FROM (SELECT 1) LEFT JOIN fleet_robots AS r ON r.robot_id = ? "
            "LEFT JOIN fleet_groups AS g ON g.group_id = r.group_id",
            (GLOBAL_SELF_IMPROVE, rid),
        )
        assert row is not None  # one row, always
        gid: str | None = row["group_id"]
        scope = f"group:{gid}" if gid is not None else f"solo:{rid}"
        if gid is not None and row["group_si"] is not None:
            return Resolution(rid, gid, scope, bool(row["group_si"]), f"group:{gid}")
        return Resolution(rid, gid, scope, row["global_si"] == "1", "global")

    def global_self_improve(self) -> bool:
        """The global self-improve toggle (off until an operator switches it on)."""
        row = self.store.query_one(
            "SELECT value FROM fleet_settings WHERE key = ?", (GLOBAL_SELF_IMPROVE,)
        )
        return row is not None and row["value"] == "1"

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
        rows = self.store.query(
            "SELECT robot_id FROM fleet_robots WHERE group_id = "
            "(SELECT group_id FROM fleet_robots WHERE robot_id = ?)",
            (rid,),
        )
        return frozenset([rid, *(r[0] for r in rows)])

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
        now = self._now()
        with self.store.transaction() as conn:
            if gid is not None and not group_exists(conn, gid):
                raise group_not_found(gid)
            exists = conn.execute(
                "SELECT 1 FROM fleet_robots WHERE robot_id = ?", (rid,)
            ).fetchone()
            if exists is None:
                conn.execute(
                    "INSERT INTO fleet_robots (robot_id, group_id, name, meta, registered, "
                    "updated) VALUES (?, ?, ?, ?, ?, ?)",
                    (rid, gid, label, meta_json or "{}", now, now),
                )
            else:
                conn.execute(
                    "UPDATE fleet_robots SET group_id = coalesce(?, group_id), "
                    "name = CASE WHEN ? THEN ? ELSE name END, meta = coalesce(?, meta), "
                    "updated = ? WHERE robot_id = ?",
                    (gid, name is not None, label, meta_json, now, rid),
                )
            robot = robot_from_row(fetch_robot(conn, rid))
        _log.info(
            "fleet_robot_registered", robot_id=rid, group_id=robot.group_id, new=exists is None
        )
        return robot

    def set_robot_meta(self, robot_id: str, meta: dict[str, Any]) -> Robot:
        """Replace a registered robot's meta. Raises FleetError invalid / not_found."""
        rid = check_id(robot_id, "robot_id")
        meta_json = check_json_object(meta, "meta")
        now = self._now()
        with self.store.transaction() as conn:
            changed = conn.execute(
                "UPDATE fleet_robots SET meta = ?, updated = ? WHERE robot_id = ?",
                (meta_json, now, rid),
            ).rowcount
            if not changed:
                raise robot_not_found(rid)
            return robot_from_row(fetch_robot(conn, rid))

    def set_group(self, robot_id: str, group_id: str | None) -> Robot:
        """Move a registered robot into ``group_id``, or ungroup it (None).

        Its shared scope and what it sees change at once. Raises FleetError invalid, or
        not_found for an unknown robot or group.
        """
        rid = check_id(robot_id, "robot_id")
        gid = check_id(group_id, "group_id") if group_id is not None else None
        now = self._now()
        with self.store.transaction() as conn:
            row = conn.execute(
                "SELECT group_id FROM fleet_robots WHERE robot_id = ?", (rid,)
            ).fetchone()
            if row is None:
                raise robot_not_found(rid)
            if gid is not None and not group_exists(conn, gid):
                raise group_not_found(gid)
            conn.execute(
                "UPDATE fleet_robots SET group_id = ?, updated = ? WHERE robot_id = ?",
                (gid, now, rid),
            )
            robot = robot_from_row(fetch_robot(conn, rid))
        _log.info("fleet_robot_regrouped", robot_id=rid, from_group=row["group_id"], to_group=gid)
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
        labels = {
            f: check_label(v, f) if v is not None else None
            for f, v in (("name", name), ("customer", customer), ("factory", factory))
        }
        given = {"name": name is not None, "customer": customer is not None}
        given["factory"] = factory is not None
        now = self._now()
        with self.store.transaction() as conn:
            if group_exists(conn, gid):
                conn.execute(
                    "UPDATE fleet_groups SET "
                    "name = CASE WHEN :gn THEN :name ELSE name END, "
                    "customer = CASE WHEN :gc THEN :customer ELSE customer END, "
                    "factory = CASE WHEN :gf THEN :factory ELSE factory END, "
                    "updated = :now WHERE group_id = :gid",
                    {
                        **labels,
                        "gn": given["name"],
                        "gc": given["customer"],
                        "gf": given["factory"],
                        "now": now,
                        "gid": gid,
                    },
                )
            else:
                conn.execute(
                    "INSERT INTO fleet_groups (group_id, name, customer, factory, self_improve, "
                    "created, updated) VALUES (?, ?, ?, ?, NULL, ?, ?)",
                    (gid, labels["name"], labels["customer"], labels["factory"], now, now),
                )
            group = group_from_row(fetch_group(conn, gid))
        _log.info("fleet_group_upserted", group_id=gid)
        return group

    def delete_group(self, group_id: str) -> Group:
        """Delete an EMPTY group; return it as it was.

        A group that still has robots is refused (``conflict``, naming them): ungrouping
        them silently would move their documents and lessons to solo scopes (decision
        0007). Raises FleetError invalid / not_found / conflict.
        """
        gid = check_id(group_id, "group_id")
        with self.store.transaction() as conn:
            row = conn.execute(f"{GROUP_SQL} WHERE g.group_id = ?", (gid,)).fetchone()
            if row is None:
                raise group_not_found(gid)
            group = group_from_row(row)
            if group.robots:
                raise group_not_empty(gid, group.robots)
            conn.execute("DELETE FROM fleet_groups WHERE group_id = ?", (gid,))
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
        now = self._now()
        with self.store.transaction() as conn:
            if gid is None:
                conn.execute(
                    "INSERT INTO fleet_settings (key, value) VALUES (?, ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (GLOBAL_SELF_IMPROVE, "1" if enabled else "0"),
                )
            else:
                flag = None if enabled is None else int(enabled)
                changed = conn.execute(
                    "UPDATE fleet_groups SET self_improve = ?, updated = ? WHERE group_id = ?",
                    (flag, now, gid),
                ).rowcount
                if not changed:
                    raise group_not_found(gid)
        _log.info("fleet_self_improve_set", group_id=gid, enabled=enabled)
        return {"group_id": gid, "self_improve": enabled}

    # --- the whole registry (the copy command) --------------------------------------------

    def export_rows(self) -> FleetRows:
        """Every group, robot and setting as stored, read in one transaction."""
        with self.store.transaction() as conn:
            groups = [group_from_row(r) for r in conn.execute(f"{GROUP_SQL} ORDER BY g.group_id")]
            robots = [
                robot_from_row(r)
                for r in conn.execute("SELECT * FROM fleet_robots ORDER BY robot_id")
            ]
            settings = [
                (r["key"], r["value"])
                for r in conn.execute("SELECT key, value FROM fleet_settings ORDER BY key")
            ]
        return FleetRows(
            tuple(replace(g, robots=()) for g in groups), tuple(robots), tuple(settings)
        )

    def import_rows(self, rows: FleetRows) -> None:
        """Write ``rows`` exactly (timestamps included) in one transaction: groups, then
        robots, then settings. For an empty registry (the copy command checks); a row that
        is already there fails the whole transaction (``sqlite3.IntegrityError``)."""
        with self.store.transaction() as conn:
            conn.executemany(
                "INSERT INTO fleet_groups (group_id, name, customer, factory, self_improve, "
                "created, updated) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        g.group_id,
                        g.name,
                        g.customer,
                        g.factory,
                        None if g.self_improve is None else int(g.self_improve),
                        g.created,
                        g.updated,
                    )
                    for g in rows.groups
                ],
            )
            conn.executemany(
                "INSERT INTO fleet_robots (robot_id, group_id, name, meta, registered, "
                "updated) VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (r.robot_id, r.group_id, r.name, meta_text(r.meta), r.registered, r.updated)
                    for r in rows.robots
                ],
            )
            conn.executemany(
                "INSERT INTO fleet_settings (key, value) VALUES (?, ?)", list(rows.settings)
            )

    # --- load (robot-mcp-memory load) ------------------------------------------------

    def import_group(self, group: Group) -> str:
        """Put ``group`` in exactly as given (timestamps and toggle included), for ``load``.

        Returns ``"inserted"``; ``"skipped"`` when the same group is already there (its
        robots aside); ``"conflict"`` when a group with this id differs (nothing written).
        Raises FleetError invalid for a bad id or label.
        """
        gid = check_id(group.group_id, "group_id")
        for field in ("name", "customer", "factory"):
            value = getattr(group, field)
            if value is not None:
                check_label(value, field)
        with self.store.transaction() as conn:
            if group_exists(conn, gid):
                same = group_from_row(fetch_group(conn, gid))
                return "skipped" if _same_group(same, group) else "conflict"
            conn.execute(
                "INSERT INTO fleet_groups (group_id, name, customer, factory, self_improve, "
                "created, updated) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    gid,
                    group.name,
                    group.customer,
                    group.factory,
                    None if group.self_improve is None else int(group.self_improve),
                    group.created,
                    group.updated,
                ),
            )
        return "inserted"

    def import_robot(self, robot: Robot) -> str:
        """Put ``robot`` in exactly as given (timestamps included), for ``load``; its group
        must exist. Returns ``"inserted"``, ``"skipped"`` (the same robot is there) or
        ``"conflict"`` (a robot with this id differs; nothing written).

        Raises:
            FleetError: ``invalid`` for a bad field, ``not_found`` for an unknown group.
        """
        rid = check_id(robot.robot_id, "robot_id")
        if robot.name is not None:
            check_label(robot.name, "name")
        meta_json = check_json_object(robot.meta, "meta")
        with self.store.transaction() as conn:
            if robot.group_id is not None and not group_exists(conn, robot.group_id):
                raise group_not_found(robot.group_id)
            row = conn.execute("SELECT 1 FROM fleet_robots WHERE robot_id = ?", (rid,)).fetchone()
            if row is not None:
                return "skipped" if robot_from_row(fetch_robot(conn, rid)) == robot else "conflict"
            conn.execute(
                "INSERT INTO fleet_robots (robot_id, group_id, name, meta, registered, "
                "updated) VALUES (?, ?, ?, ?, ?, ?)",
                (rid, robot.group_id, robot.name, meta_json, robot.registered, robot.updated),
            )
        return "inserted"

    def __repr__(self) -> str:
        return f"<FleetRegistry {str(self.store.path)!r}>"


def _same_group(a: Group, b: Group) -> bool:
    """Equal but for the robots (a load adds those one by one)."""
    return replace(a, robots=()) == replace(b, robots=())
