"""PgFleetRegistry: the fleet registry (robots, groups, self-improve toggles) on PostgreSQL.

The PostgreSQL adapter of :class:`robot_mcp_memory.ports.FleetPort`, with the rest of what
callers use of :class:`~robot_mcp_memory.fleet.FleetRegistry` (``resolve``, ``scope_of``,
``self_improve_for``...): the same answers, the same :class:`FleetError` s, the same
validation (:mod:`robot_mcp_memory.fleet.validation`), over the tables of
:mod:`robot_mcp_memory.postgres._fleet_tables`.

Several replicas write one database, so no rule is a read followed by a blind write:

- a write that may create or update is ONE statement (``INSERT ... ON CONFLICT DO
  UPDATE``): two replicas registering the same robot, or upserting the same group, both
  succeed and the row is the last one's;
- "does that group exist?" is the foreign key ``fleet_robots.group_id``, checked by the
  server as the row is written (a violation answers ``not_found``), never a prior SELECT;
- ``delete_group`` locks the group's row (``SELECT ... FOR UPDATE``) before it counts the
  members: a replica registering a robot into it waits for the delete (then finds no
  group), or the delete waits for it (then sees the robot and answers ``conflict``).

Every method is one transaction of :meth:`PgDatabase.connection`; a lost connection or a
statement timeout raises :class:`~robot_mcp_kit.store.StoreUnavailable` and nothing of
the call is written. Thread-safe (the pool is); blocking, like the port.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from robot_mcp_kit.log import get_logger
from robot_mcp_kit.models import format_ts, utc_now
from robot_mcp_memory._exceptions import FleetError
from robot_mcp_memory.fleet import (
    GLOBAL_SELF_IMPROVE,
    FleetRows,
    Group,
    Resolution,
    Robot,
    group_not_empty,
    group_not_found,
    meta_text,
    robot_not_found,
)
from robot_mcp_memory.fleet.validation import (
    check_bool,
    check_id,
    check_json_object,
    check_label,
)
from robot_mcp_memory.postgres._database import PgDatabase

__all__ = ["PgFleetRegistry"]

_log = get_logger("robot_mcp_memory.fleet")

_GROUP_SQL = (
    "SELECT g.group_id, g.name, g.customer, g.factory, g.self_improve, g.created, g.updated, "
    "coalesce((SELECT array_agg(r.robot_id ORDER BY r.robot_id) FROM fleet_robots AS r "
    "WHERE r.group_id = g.group_id), '{}') AS robots FROM fleet_groups AS g"
)

_Conn = psycopg.Connection[Any]


def _robot(row: dict[str, Any]) -> Robot:
    return Robot(
        robot_id=row["robot_id"],
        group_id=row["group_id"],
        name=row["name"],
        meta=json.loads(row["meta"]),
        registered=row["registered"],
        updated=row["updated"],
    )


def _group(row: dict[str, Any]) -> Group:
    return Group(
        group_id=row["group_id"],
        name=row["name"],
        customer=row["customer"],
        factory=row["factory"],
        self_improve=row["self_improve"],
        created=row["created"],
        updated=row["updated"],
        robots=tuple(row["robots"]),
    )


def _one(conn: _Conn, query: str, params: Any = ()) -> dict[str, Any] | None:
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(query.encode(), params)
        return cur.fetchone()


def _all(conn: _Conn, query: str, params: Any = ()) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(query.encode(), params)
        return cur.fetchall()


class PgFleetRegistry:
    """Robots, groups and self-improve toggles in PostgreSQL (see the module docstring).

    Args:
        db: the opened database (:data:`robot_mcp_memory.postgres.SCHEMA`). Not closed by
            this class.
        clock: the time source for ``registered``/``created``/``updated`` (tests inject it).
    """

    def __init__(self, db: PgDatabase, *, clock: Callable[[], datetime] = utc_now) -> None:
        self.db = db
        self._clock = clock

    def _now(self) -> str:
        return format_ts(self._clock())

    # --- reads ------------------------------------------------------------------------

    def get_robot(self, robot_id: str) -> Robot | None:
        """The robot, or None if it is not registered."""
        rid = check_id(robot_id, "robot_id")
        with self.db.connection() as conn:
            row = _one(conn, "SELECT * FROM fleet_robots WHERE robot_id = %s", (rid,))
        return None if row is None else _robot(row)

    def list_robots(self, group_id: str | None = None) -> list[Robot]:
        """Every robot by id; with ``group_id``, that group's (none for an unknown group)."""
        gid = None if group_id is None else check_id(group_id, "group_id")
        with self.db.connection() as conn:
            if gid is None:
                rows = _all(conn, "SELECT * FROM fleet_robots ORDER BY robot_id")
            else:
                rows = _all(
                    conn,
                    "SELECT * FROM fleet_robots WHERE group_id = %s ORDER BY robot_id",
                    (gid,),
                )
        return [_robot(r) for r in rows]

    def get_group(self, group_id: str) -> Group | None:
        """The group with its members, or None if it does not exist."""
        gid = check_id(group_id, "group_id")
        with self.db.connection() as conn:
            row = _one(conn, f"{_GROUP_SQL} WHERE g.group_id = %s", (gid,))
        return None if row is None else _group(row)

    def list_groups(self) -> list[Group]:
        """Every group by id, each with its members."""
        with self.db.connection() as conn:
            rows = _all(conn, f"{_GROUP_SQL} ORDER BY g.group_id")
        return [_group(r) for r in rows]

    def resolve(self, robot_id: str) -> Resolution:
        """The robot's group, scope and effective self-improve toggle, in one statement
        (see :meth:`FleetRegistry.resolve <robot_mcp_memory.fleet.FleetRegistry.resolve>`)."""
        rid = check_id(robot_id, "robot_id")
        with self.db.connection() as conn:
            row = _one(
                conn,
                "SELECT r.group_id AS group_id, g.self_improve AS group_si, "
                "(SELECT value FROM fleet_settings WHERE key = %s) AS global_si "
                "FROM (SELECT 1) AS one LEFT JOIN fleet_robots AS r ON r.robot_id = %s "
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
        with self.db.connection() as conn:
            row = _one(
                conn, "SELECT value FROM fleet_settings WHERE key = %s", (GLOBAL_SELF_IMPROVE,)
            )
        return row is not None and row["value"] == "1"

    def self_improve_for(self, robot_id: str) -> tuple[bool, str]:
        """``(enabled, where)``: the group's toggle if grouped and set, else the global one."""
        res = self.resolve(robot_id)
        return res.self_improve, res.where

    def scope_of(self, robot_id: str) -> str:
        """``group:<G>`` for a robot registered in group G, else ``solo:<robot_id>``."""
        return self.resolve(robot_id).scope

    def group_of(self, robot_id: str) -> str | None:
        """The robot's group id, or None (ungrouped or unregistered)."""
        return self.resolve(robot_id).group_id

    def visible_robots(self, robot_id: str) -> frozenset[str]:
        """Its group's members and itself; itself alone when ungrouped (read every call)."""
        rid = check_id(robot_id, "robot_id")
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT robot_id FROM fleet_robots WHERE group_id = "
                "(SELECT group_id FROM fleet_robots WHERE robot_id = %s)",
                (rid,),
            ).fetchall()
        return frozenset([rid, *(r[0] for r in rows)])

    # --- robots -----------------------------------------------------------------------

    def register_robot(
        self,
        robot_id: str,
        name: str | None = None,
        group_id: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Robot:
        """Register a robot, or update a registered one (bumping ``updated``); one
        ``INSERT ... ON CONFLICT`` statement. Arguments as :meth:`FleetRegistry.register_robot
        <robot_mcp_memory.fleet.FleetRegistry.register_robot>`.

        Raises:
            FleetError: ``invalid`` for a bad argument; ``not_found`` for an unknown group.
        """
        rid = check_id(robot_id, "robot_id")
        label = check_label(name, "name") if name is not None else None
        gid = check_id(group_id, "group_id") if group_id is not None else None
        meta_json = check_json_object(meta, "meta") if meta is not None else None
        now = self._now()
        try:
            with self.db.connection() as conn:
                row = _one(
                    conn,
                    "INSERT INTO fleet_robots AS r (robot_id, group_id, name, meta, registered, "
                    "updated) VALUES (%(rid)s, %(gid)s, %(label)s, coalesce(%(meta)s, '{}'), "
                    "%(now)s, %(now)s) ON CONFLICT (robot_id) DO UPDATE SET "
                    "group_id = coalesce(%(gid)s, r.group_id), "
                    "name = CASE WHEN %(named)s THEN %(label)s ELSE r.name END, "
                    "meta = coalesce(%(meta)s, r.meta), updated = %(now)s "
                    "RETURNING r.*, (r.xmax = 0) AS inserted",
                    {
                        "rid": rid,
                        "gid": gid,
                        "label": label,
                        "meta": meta_json,
                        "now": now,
                        "named": name is not None,
                    },
                )
        except psycopg.errors.ForeignKeyViolation:
            assert gid is not None  # only a group id can violate the key
            raise group_not_found(gid) from None
        assert row is not None
        robot = _robot(row)
        _log.info(
            "fleet_robot_registered", robot_id=rid, group_id=robot.group_id, new=row["inserted"]
        )
        return robot

    def set_robot_meta(self, robot_id: str, meta: dict[str, Any]) -> Robot:
        """Replace a registered robot's meta. Raises FleetError invalid / not_found."""
        rid = check_id(robot_id, "robot_id")
        meta_json = check_json_object(meta, "meta")
        now = self._now()
        with self.db.connection() as conn:
            row = _one(
                conn,
                "UPDATE fleet_robots SET meta = %s, updated = %s WHERE robot_id = %s RETURNING *",
                (meta_json, now, rid),
            )
        if row is None:
            raise robot_not_found(rid)
        return _robot(row)

    def set_group(self, robot_id: str, group_id: str | None) -> Robot:
        """Move a registered robot into ``group_id``, or ungroup it (None).

        Raises FleetError invalid, or not_found for an unknown robot (checked first) or group.
        """
        rid = check_id(robot_id, "robot_id")
        gid = check_id(group_id, "group_id") if group_id is not None else None
        now = self._now()
        try:
            with self.db.connection() as conn:
                old = _one(
                    conn,
                    "SELECT group_id FROM fleet_robots WHERE robot_id = %s FOR UPDATE",
                    (rid,),
                )
                if old is None:
                    raise robot_not_found(rid)
                row = _one(
                    conn,
                    "UPDATE fleet_robots SET group_id = %s, updated = %s WHERE robot_id = %s "
                    "RETURNING *",
                    (gid, now, rid),
                )
        except psycopg.errors.ForeignKeyViolation:
            assert gid is not None
            raise group_not_found(gid) from None
        assert row is not None
        _log.info("fleet_robot_regrouped", robot_id=rid, from_group=old["group_id"], to_group=gid)
        return _robot(row)

    # --- groups -----------------------------------------------------------------------

    def upsert_group(
        self,
        group_id: str,
        name: str | None = None,
        customer: str | None = None,
        factory: str | None = None,
    ) -> Group:
        """Create a group (self-improve inherited) or update one; None keeps a field, ``""``
        clears it. One ``INSERT ... ON CONFLICT`` statement. Raises FleetError invalid."""
        gid = check_id(group_id, "group_id")
        labels = {
            f: check_label(v, f) if v is not None else None
            for f, v in (("name", name), ("customer", customer), ("factory", factory))
        }
        now = self._now()
        with self.db.connection() as conn:
            conn.execute(
                "INSERT INTO fleet_groups AS g (group_id, name, customer, factory, self_improve, "
                "created, updated) VALUES (%(gid)s, %(name)s, %(customer)s, %(factory)s, NULL, "
                "%(now)s, %(now)s) ON CONFLICT (group_id) DO UPDATE SET "
                "name = CASE WHEN %(gn)s THEN %(name)s ELSE g.name END, "
                "customer = CASE WHEN %(gc)s THEN %(customer)s ELSE g.customer END, "
                "factory = CASE WHEN %(gf)s THEN %(factory)s ELSE g.factory END, "
                "updated = %(now)s",
                {
                    **labels,
                    "gn": name is not None,
                    "gc": customer is not None,
                    "gf": factory is not None,
                    "now": now,
                    "gid": gid,
                },
            )
            row = _one(conn, f"{_GROUP_SQL} WHERE g.group_id = %s", (gid,))
        assert row is not None
        _log.info("fleet_group_upserted", group_id=gid)
        return _group(row)

    def delete_group(self, group_id: str) -> Group:
        """Delete an EMPTY group; return it as it was.

        The group's row is locked first, so a replica registering a robot into it at the
        same moment either waits and then finds no group, or is seen as a member here.
        Raises FleetError invalid / not_found / conflict (naming the members).
        """
        gid = check_id(group_id, "group_id")
        try:
            with self.db.connection() as conn:
                locked = _one(
                    conn, "SELECT 1 FROM fleet_groups WHERE group_id = %s FOR UPDATE", (gid,)
                )
                if locked is None:
                    raise group_not_found(gid)
                row = _one(conn, f"{_GROUP_SQL} WHERE g.group_id = %s", (gid,))
                assert row is not None
                group = _group(row)
                if group.robots:
                    raise group_not_empty(gid, group.robots)
                conn.execute("DELETE FROM fleet_groups WHERE group_id = %s", (gid,))
        except psycopg.errors.ForeignKeyViolation:  # pragma: no cover - the lock prevents it
            raise FleetError(
                "conflict",
                f"group {gid!r} got a robot while it was being deleted; move its robots "
                "with set_group first (set_group(robot_id, None) ungroups a robot)",
            ) from None
        _log.info("fleet_group_deleted", group_id=gid)
        return group

    def set_self_improve(self, enabled: bool | None, group_id: str | None = None) -> dict[str, Any]:
        """Switch self-improvement on or off for a group, or globally (no group);
        ``enabled=None`` with a group returns it to inheriting. Returns ``{"group_id",
        "self_improve"}``. Raises FleetError invalid / not_found."""
        gid = check_id(group_id, "group_id") if group_id is not None else None
        if enabled is not None or gid is None:
            enabled = check_bool(enabled, "enabled")
        now = self._now()
        with self.db.connection() as conn:
            if gid is None:
                conn.execute(
                    "INSERT INTO fleet_settings (key, value) VALUES (%s, %s) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (GLOBAL_SELF_IMPROVE, "1" if enabled else "0"),
                )
                changed = 1
            else:
                changed = conn.execute(
                    "UPDATE fleet_groups SET self_improve = %s, updated = %s WHERE group_id = %s",
                    (enabled, now, gid),
                ).rowcount
        if not changed:
            assert gid is not None
            raise group_not_found(gid)
        _log.info("fleet_self_improve_set", group_id=gid, enabled=enabled)
        return {"group_id": gid, "self_improve": enabled}

    # --- one record exactly as given (load) ----------------------------------------------

    def import_group(self, group: Group) -> str:
        """Put ``group`` in exactly as given (timestamps and toggle included), for ``load``:
        ``"inserted"``; ``"skipped"`` when the same group is there (its robots aside);
        ``"conflict"`` when a group with this id differs (nothing written). One
        ``INSERT ... ON CONFLICT DO NOTHING``; a replica inserting the same id first makes
        this call compare with its row. Raises FleetError invalid for a bad id or label."""
        gid = check_id(group.group_id, "group_id")
        for field in ("name", "customer", "factory"):
            value = getattr(group, field)
            if value is not None:
                check_label(value, field)
        with self.db.connection() as conn:
            inserted = conn.execute(
                "INSERT INTO fleet_groups (group_id, name, customer, factory, self_improve, "
                "created, updated) VALUES (%s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (group_id) DO NOTHING RETURNING group_id",
                (
                    gid,
                    group.name,
                    group.customer,
                    group.factory,
                    group.self_improve,
                    group.created,
                    group.updated,
                ),
            ).fetchone()
            if inserted is not None:
                return "inserted"
            row = _one(conn, f"{_GROUP_SQL} WHERE g.group_id = %s", (gid,))
        assert row is not None  # a group is never deleted by an insert that lost
        same = replace(_group(row), robots=()) == replace(group, robots=())
        return "skipped" if same else "conflict"

    def import_robot(self, robot: Robot) -> str:
        """Put ``robot`` in exactly as given (timestamps included), for ``load``; its group
        must exist. ``"inserted"``, ``"skipped"`` (the same robot is there) or
        ``"conflict"`` (a robot with this id differs; nothing written).

        Raises:
            FleetError: ``invalid`` for a bad field, ``not_found`` for an unknown group.
        """
        rid = check_id(robot.robot_id, "robot_id")
        if robot.name is not None:
            check_label(robot.name, "name")
        meta_json = check_json_object(robot.meta, "meta")
        try:
            with self.db.connection() as conn:
                inserted = conn.execute(
                    "INSERT INTO fleet_robots (robot_id, group_id, name, meta, registered, "
                    "updated) VALUES (%s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (robot_id) DO NOTHING RETURNING robot_id",
                    (rid, robot.group_id, robot.name, meta_json, robot.registered, robot.updated),
                ).fetchone()
                if inserted is not None:
                    return "inserted"
                row = _one(conn, "SELECT * FROM fleet_robots WHERE robot_id = %s", (rid,))
        except psycopg.errors.ForeignKeyViolation:
            assert robot.group_id is not None  # only a group id can violate the key
            raise group_not_found(robot.group_id) from None
        assert row is not None
        return "skipped" if _robot(row) == robot else "conflict"

    # --- the whole registry (the copy command) --------------------------------------------

    def export_rows(self) -> FleetRows:
        """Every group, robot and setting as stored, read in one transaction."""
        with self.db.connection() as conn:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            groups = _all(conn, f"{_GROUP_SQL} ORDER BY g.group_id")
            robots = _all(conn, "SELECT * FROM fleet_robots ORDER BY robot_id")
            settings = conn.execute("SELECT key, value FROM fleet_settings ORDER BY key")
            pairs = tuple((str(k), v) for k, v in settings.fetchall())
        return FleetRows(
            tuple(replace(_group(g), robots=()) for g in groups),
            tuple(_robot(r) for r in robots),
            pairs,
        )

    def import_rows(self, rows: FleetRows) -> None:
        """Write ``rows`` exactly (timestamps included) in one transaction: groups, then
        robots, then settings. For an empty registry (the copy command checks); a row
        already there fails the whole transaction (``psycopg.errors.UniqueViolation``)."""
        with self.db.connection() as conn, conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO fleet_groups (group_id, name, customer, factory, self_improve, "
                "created, updated) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                [
                    (
                        g.group_id,
                        g.name,
                        g.customer,
                        g.factory,
                        g.self_improve,
                        g.created,
                        g.updated,
                    )
                    for g in rows.groups
                ],
            )
            cur.executemany(
                "INSERT INTO fleet_robots (robot_id, group_id, name, meta, registered, "
                "updated) VALUES (%s, %s, %s, %s, %s, %s)",
                [
                    (r.robot_id, r.group_id, r.name, meta_text(r.meta), r.registered, r.updated)
                    for r in rows.robots
                ],
            )
            cur.executemany(
                "INSERT INTO fleet_settings (key, value) VALUES (%s, %s)", list(rows.settings)
            )

    def __repr__(self) -> str:
        return f"<PgFleetRegistry {self.db.where!r}>"
