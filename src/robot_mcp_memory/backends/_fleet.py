"""The fleet registry's storage, written once for both SQL backends: :class:`SqlFleetRepo`.

The registry is three DEFINITION tables — ``fleet_robots``, ``fleet_groups`` (a robot's
``group_id`` references one), ``fleet_settings`` — with the same columns on both
backends. Several replicas may write one database, so no write is a read followed by a
blind write: a write that may create or update is ONE statement (``INSERT ... ON
CONFLICT``); "does that group exist?" is the foreign key, checked by the store as the
row is written (:class:`~robot_mcp_memory.MissingReference`); a write that must read first
locks what it reads (:attr:`Dialect.for_update <._sql.Dialect.for_update>`; SQLite's write
transaction holds the whole file). What the two backends spell differently is their
:class:`~._sql.Dialect`'s.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from robot_mcp_memory.backends._sql import Row, Session, Sessions
from robot_mcp_memory.fleet import FleetRows, Group, GroupLabels, Placement, Robot, meta_text

__all__ = ["SqlFleetRepo"]

_LABELS = ("name", "customer", "factory")
_GROUP_COLUMNS = "group_id, name, customer, factory, self_improve, created, updated"
_ROBOT_COLUMNS = "robot_id, group_id, name, meta, registered, updated"


def _robot(row: Row) -> Robot:
    return Robot(
        robot_id=row["robot_id"],
        group_id=row["group_id"],
        name=row["name"],
        meta=json.loads(row["meta"]),
        registered=row["registered"],
        updated=row["updated"],
    )


def _group(row: Row, session: Session) -> Group:
    flag = row["self_improve"]
    return Group(
        group_id=row["group_id"],
        name=row["name"],
        customer=row["customer"],
        factory=row["factory"],
        self_improve=None if flag is None else bool(flag),
        created=row["created"],
        updated=row["updated"],
        robots=session.dialect.ids(row["robots"]),
    )


def _group_sql(session: Session) -> str:
    """Every group with its members' ids (``robots``)."""
    return (
        "SELECT g.group_id, g.name, g.customer, g.factory, g.self_improve, g.created, "  # noqa: S608
        f"g.updated, (SELECT {session.dialect.id_list} FROM fleet_robots AS r "
        "WHERE r.group_id = g.group_id) AS robots FROM fleet_groups AS g"
    )


class SqlFleetRepo:
    """The registry in the tables of one SQL store (a :class:`~robot_mcp_memory.fleet.
    FleetRepo`).

    Args:
        sessions: the backend's sessions (each call is one of them).
        where: the store, for ``repr``.
    """

    def __init__(self, sessions: Sessions, where: str) -> None:
        self._sessions = sessions
        self._where = where

    # --- reads ------------------------------------------------------------------------

    def robot(self, robot_id: str) -> Robot | None:
        with self._sessions.read() as s:
            row = s.one(f"SELECT {_ROBOT_COLUMNS} FROM fleet_robots WHERE robot_id = ?", [robot_id])  # noqa: S608
        return None if row is None else _robot(row)

    def robots(self, group_id: str | None = None) -> list[Robot]:
        with self._sessions.read() as s:
            if group_id is None:
                rows = s.all(f"SELECT {_ROBOT_COLUMNS} FROM fleet_robots ORDER BY robot_id")  # noqa: S608
            else:
                rows = s.all(
                    f"SELECT {_ROBOT_COLUMNS} FROM fleet_robots WHERE group_id = ? "  # noqa: S608
                    "ORDER BY robot_id",
                    [group_id],
                )
        return [_robot(r) for r in rows]

    def group(self, group_id: str) -> Group | None:
        with self._sessions.read() as s:
            row = s.one(f"{_group_sql(s)} WHERE g.group_id = ?", [group_id])
            return None if row is None else _group(row, s)

    def groups(self) -> list[Group]:
        with self._sessions.read() as s:
            return [_group(r, s) for r in s.all(f"{_group_sql(s)} ORDER BY g.group_id")]

    def placement(self, robot_id: str, toggle: str) -> Placement:
        with self._sessions.read() as s:
            row = s.one(
                "SELECT r.group_id AS group_id, g.self_improve AS group_si, "
                "(SELECT value FROM fleet_settings WHERE key = ?) AS global_si "
                "FROM (SELECT 1) AS one LEFT JOIN fleet_robots AS r ON r.robot_id = ? "
                "LEFT JOIN fleet_groups AS g ON g.group_id = r.group_id",
                [toggle, robot_id],
            )
        assert row is not None  # one row, always
        flag = row["group_si"]
        return Placement(row["group_id"], None if flag is None else bool(flag), row["global_si"])

    def group_members_of(self, robot_id: str) -> list[str]:
        with self._sessions.read() as s:
            rows = s.all(
                "SELECT robot_id FROM fleet_robots WHERE group_id = "
                "(SELECT group_id FROM fleet_robots WHERE robot_id = ?)",
                [robot_id],
            )
        return [str(r["robot_id"]) for r in rows]

    def setting(self, key: str) -> str | None:
        with self._sessions.read() as s:
            row = s.one("SELECT value FROM fleet_settings WHERE key = ?", [key])
        return None if row is None else row["value"]

    # --- writes -----------------------------------------------------------------------

    def put_setting(self, key: str, value: str) -> None:
        with self._sessions.write() as s:
            s.run(
                "INSERT INTO fleet_settings (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [key, value],
            )

    def save_robot(
        self,
        robot_id: str,
        *,
        name: str | None,
        rename: bool,
        group_id: str | None,
        meta: str | None,
        now: str,
    ) -> tuple[Robot, bool]:
        with self._sessions.write() as s:
            known = s.one("SELECT 1 AS known FROM fleet_robots WHERE robot_id = ?", [robot_id])
            row = s.one(
                f"INSERT INTO fleet_robots AS r ({_ROBOT_COLUMNS}) "  # noqa: S608
                "VALUES (?, ?, ?, coalesce(?, '{}'), ?, ?) ON CONFLICT (robot_id) DO UPDATE SET "
                "group_id = coalesce(excluded.group_id, r.group_id), "
                "name = CASE WHEN ? THEN excluded.name ELSE r.name END, "
                "meta = CASE WHEN ? THEN excluded.meta ELSE r.meta END, "
                "updated = excluded.updated RETURNING *",
                [robot_id, group_id, name, meta, now, now, rename, meta is not None],
            )
        assert row is not None
        return _robot(row), known is None

    def set_meta(self, robot_id: str, meta: str, now: str) -> Robot | None:
        with self._sessions.write() as s:
            row = s.one(
                "UPDATE fleet_robots SET meta = ?, updated = ? WHERE robot_id = ? RETURNING *",
                [meta, now, robot_id],
            )
        return None if row is None else _robot(row)

    def move_robot(
        self, robot_id: str, group_id: str | None, now: str
    ) -> tuple[str | None, Robot] | None:
        with self._sessions.write() as s:
            old = s.one(
                "SELECT group_id FROM fleet_robots WHERE robot_id = ?"  # noqa: S608
                f"{s.dialect.for_update}",
                [robot_id],
            )
            if old is None:
                return None
            row = s.one(
                "UPDATE fleet_robots SET group_id = ?, updated = ? WHERE robot_id = ? RETURNING *",
                [group_id, now, robot_id],
            )
        assert row is not None
        return old["group_id"], _robot(row)

    def save_group(self, group_id: str, labels: GroupLabels, now: str) -> Group:
        given = [label in labels for label in _LABELS]
        values = [labels.get(label) for label in _LABELS]
        with self._sessions.write() as s:
            s.run(
                f"INSERT INTO fleet_groups AS g ({_GROUP_COLUMNS}) "  # noqa: S608
                "VALUES (?, ?, ?, ?, NULL, ?, ?) ON CONFLICT (group_id) DO UPDATE SET "
                "name = CASE WHEN ? THEN excluded.name ELSE g.name END, "
                "customer = CASE WHEN ? THEN excluded.customer ELSE g.customer END, "
                "factory = CASE WHEN ? THEN excluded.factory ELSE g.factory END, "
                "updated = excluded.updated",
                [group_id, *values, now, now, *given],
            )
            row = s.one(f"{_group_sql(s)} WHERE g.group_id = ?", [group_id])
            assert row is not None
            return _group(row, s)

    def delete_group(self, group_id: str, check: Callable[[Group], None]) -> Group | None:
        with self._sessions.write() as s:
            locked = s.one(
                f"SELECT 1 AS locked FROM fleet_groups WHERE group_id = ?{s.dialect.for_update}",  # noqa: S608
                [group_id],
            )
            if locked is None:
                return None
            row = s.one(f"{_group_sql(s)} WHERE g.group_id = ?", [group_id])
            assert row is not None
            group = _group(row, s)
            check(group)
            s.run("DELETE FROM fleet_groups WHERE group_id = ?", [group_id])
        return group

    def set_group_self_improve(self, group_id: str, enabled: bool | None, now: str) -> bool:
        with self._sessions.write() as s:
            changed = s.run(
                "UPDATE fleet_groups SET self_improve = ?, updated = ? WHERE group_id = ?",
                [enabled, now, group_id],
            )
        return changed > 0

    def insert_group(self, group: Group) -> Group | None:
        with self._sessions.write() as s:
            inserted = s.one(
                f"INSERT INTO fleet_groups ({_GROUP_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?) "  # noqa: S608
                "ON CONFLICT (group_id) DO NOTHING RETURNING group_id",
                _group_values(group),
            )
            if inserted is not None:
                return None
            row = s.one(f"{_group_sql(s)} WHERE g.group_id = ?", [group.group_id])
            assert row is not None  # an insert that lost never loses the winner's row
            return _group(row, s)

    def insert_robot(self, robot: Robot, meta: str) -> Robot | None:
        with self._sessions.write() as s:
            inserted = s.one(
                f"INSERT INTO fleet_robots ({_ROBOT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?) "  # noqa: S608
                "ON CONFLICT (robot_id) DO NOTHING RETURNING robot_id",
                [robot.robot_id, robot.group_id, robot.name, meta, robot.registered, robot.updated],
            )
            if inserted is not None:
                return None
            row = s.one(
                f"SELECT {_ROBOT_COLUMNS} FROM fleet_robots WHERE robot_id = ?",  # noqa: S608
                [robot.robot_id],
            )
        assert row is not None
        return _robot(row)

    # --- the whole registry (the copy command) --------------------------------------------

    def export_rows(self) -> FleetRows:
        with self._sessions.consistent() as s:
            groups = [_group(r, s) for r in s.all(f"{_group_sql(s)} ORDER BY g.group_id")]
            robots = [
                _robot(r)
                for r in s.all(f"SELECT {_ROBOT_COLUMNS} FROM fleet_robots ORDER BY robot_id")  # noqa: S608
            ]
            settings = [
                (str(r["key"]), r["value"])
                for r in s.all("SELECT key, value FROM fleet_settings ORDER BY key")
            ]
        return FleetRows(
            tuple(replace(g, robots=()) for g in groups), tuple(robots), tuple(settings)
        )

    def import_rows(self, rows: FleetRows) -> None:
        with self._sessions.write() as s:
            s.many(
                f"INSERT INTO fleet_groups ({_GROUP_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",  # noqa: S608
                [_group_values(g) for g in rows.groups],
            )
            s.many(
                f"INSERT INTO fleet_robots ({_ROBOT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",  # noqa: S608
                [
                    [r.robot_id, r.group_id, r.name, meta_text(r.meta), r.registered, r.updated]
                    for r in rows.robots
                ],
            )
            s.many("INSERT INTO fleet_settings (key, value) VALUES (?, ?)", rows.settings)

    def __repr__(self) -> str:
        return f"<SqlFleetRepo {self._where!r}>"


def _group_values(group: Group) -> list[Any]:
    return [
        group.group_id,
        group.name,
        group.customer,
        group.factory,
        group.self_improve,
        group.created,
        group.updated,
    ]
