"""FleetService: robots, groups, self-improve toggles and scope resolution (the rules, on
SQLite; ``backends/contract.py`` holds PostgreSQL's repository to the same answers)."""

from __future__ import annotations

import json
import math
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robot_mcp_memory._exceptions import FleetError
from robot_mcp_memory._limits import (
    ID_PATTERN,
    MAX_JSON_BYTES,
)
from robot_mcp_memory.fleet import (
    FleetService,
    Group,
    Robot,
)
from robot_mcp_memory.fleet.validation import (
    check_id,
    check_json_object,
)

T0 = datetime(2026, 7, 1, 12, 0, tzinfo=UTC)


class Clock:
    """A clock that advances one second per reading."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture
def fleet(sqlite_backend: Any) -> FleetService:
    """The registry under test."""
    return sqlite_backend.fleet(clock=Clock())


def _counts(fleet: FleetService) -> tuple[int, int, int]:
    """Rows in fleet_robots, fleet_groups and fleet_settings, as the copy reads them."""
    rows = fleet.repo.export_rows()
    return len(rows.robots), len(rows.groups), len(rows.settings)


def _nested(depth: int, leaf: Any = 1, *, lists: bool = False) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value] if lists else {"a": value}
    return value


# --- robots ------------------------------------------------------------------------------


class TestRobots:
    def test_register_new_robot_has_defaults(self, fleet: FleetService) -> None:
        """A new robot is ungrouped, nameless, with meta {} and registered == updated."""
        robot = fleet.register_robot("rap-1")
        assert robot == Robot("rap-1", None, None, {}, robot.registered, robot.registered)
        assert robot.registered == "2026-07-01T12:00:01.000Z"
        assert fleet.get_robot("rap-1") == robot

    def test_update_keeps_what_is_not_given(self, fleet: FleetService) -> None:
        """On re-registration None arguments keep their field; registered is kept."""
        fleet.upsert_group("line-3")
        first = fleet.register_robot("rap-1", name="Rap", group_id="line-3", meta={"arm": "ur5"})
        again = fleet.register_robot("rap-1")
        assert (again.name, again.group_id, again.meta) == ("Rap", "line-3", {"arm": "ur5"})
        assert again.registered == first.registered
        assert again.updated > first.updated
        renamed = fleet.register_robot("rap-1", name="Rapunzel", meta={"arm": "ur10"})
        assert (renamed.name, renamed.group_id, renamed.meta) == (
            "Rapunzel",
            "line-3",
            {"arm": "ur10"},
        )

    def test_empty_name_clears_it(self, fleet: FleetService) -> None:
        """name='' clears the name (None would keep it)."""
        fleet.register_robot("rap-1", name="Rap")
        assert fleet.register_robot("rap-1", name="").name is None

    def test_register_in_unknown_group_is_not_found(self, fleet: FleetService) -> None:
        """An unknown group_id is not_found, names the remedy, and writes nothing."""
        with pytest.raises(FleetError) as info:
            fleet.register_robot("rap-1", group_id="line-9")
        assert info.value.code == "not_found"
        assert str(info.value) == (
            "group 'line-9' does not exist; create it with upsert_group first"
        )
        assert _counts(fleet) == (0, 0, 0)

    def test_set_robot_meta_replaces_meta(self, fleet: FleetService) -> None:
        """set_robot_meta replaces the whole object and bumps updated."""
        first = fleet.register_robot("rap-1", meta={"a": 1, "b": 2})
        robot = fleet.set_robot_meta("rap-1", {"c": [1, 2.5, None, True, "x"]})
        assert robot.meta == {"c": [1, 2.5, None, True, "x"]}
        assert robot.updated > first.updated
        assert fleet.get_robot("rap-1") == robot

    def test_set_robot_meta_unknown_robot(self, fleet: FleetService) -> None:
        """Meta for an unregistered robot is not_found, naming the robot and the remedy."""
        with pytest.raises(FleetError) as info:
            fleet.set_robot_meta("ghost", {})
        assert info.value.code == "not_found"
        assert info.value.field is None
        assert "robot 'ghost' is not registered; register it with register_robot" in str(info.value)

    def test_get_and_list(self, fleet: FleetService) -> None:
        """get_robot is None for the unknown; list_robots orders by id and filters by group."""
        assert fleet.get_robot("rap-1") is None
        assert fleet.list_robots() == []
        fleet.upsert_group("g1")
        for rid in ("rap-3", "rap-1", "rap-2"):
            fleet.register_robot(rid, group_id="g1" if rid != "rap-2" else None)
        assert [r.robot_id for r in fleet.list_robots()] == ["rap-1", "rap-2", "rap-3"]
        assert [r.robot_id for r in fleet.list_robots("g1")] == ["rap-1", "rap-3"]
        assert fleet.list_robots("nope") == []

    def test_to_dict_is_json(self, fleet: FleetService) -> None:
        """Robot.to_dict is every field, JSON-serialisable."""
        robot = fleet.register_robot("rap-1", name="R", meta={"k": {"n": 1}})
        data = json.loads(json.dumps(robot.to_dict()))
        assert data == {
            "robot_id": "rap-1",
            "group_id": None,
            "name": "R",
            "meta": {"k": {"n": 1}},
            "registered": robot.registered,
            "updated": robot.updated,
        }

    def test_concurrent_registrations_all_land(self, fleet: FleetService) -> None:
        """Eight threads registering at once: every robot is there, nothing raised."""
        errors: list[BaseException] = []

        def work(n: int) -> None:
            try:
                for i in range(25):
                    fleet.register_robot(f"r{n}-{i}", meta={"i": i})
                    fleet.scope_of(f"r{n}-{i}")
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert len(fleet.list_robots()) == 200


# --- groups ------------------------------------------------------------------------------


class TestGroups:
    def test_upsert_creates_then_updates(self, fleet: FleetService) -> None:
        """A new group inherits self-improve; on update None keeps a field, '' clears it."""
        made = fleet.upsert_group("line-3", name="Line 3", customer="ACME", factory="Lyon")
        assert made == Group(
            "line-3", "Line 3", "ACME", "Lyon", None, made.created, made.created, ()
        )
        kept = fleet.upsert_group("line-3", factory="Porto")
        assert (kept.name, kept.customer, kept.factory) == ("Line 3", "ACME", "Porto")
        assert kept.created == made.created
        assert kept.updated > made.updated
        cleared = fleet.upsert_group("line-3", customer="")
        assert cleared.customer is None
        assert cleared.name == "Line 3"

    def test_get_and_list_groups_with_members(self, fleet: FleetService) -> None:
        """Groups come by id, each with its member ids sorted."""
        assert fleet.list_groups() == []
        assert fleet.get_group("g") is None
        fleet.upsert_group("b")
        fleet.upsert_group("a")
        for rid in ("z-9", "a-1", "m-5"):
            fleet.register_robot(rid, group_id="a")
        groups = fleet.list_groups()
        assert [g.group_id for g in groups] == ["a", "b"]
        assert groups[0].robots == ("a-1", "m-5", "z-9")
        assert groups[1].robots == ()
        assert fleet.get_group("a") == groups[0]
        data = json.loads(json.dumps(groups[0].to_dict()))
        assert data["robots"] == ["a-1", "m-5", "z-9"]
        assert set(data) == {
            "group_id",
            "name",
            "customer",
            "factory",
            "self_improve",
            "created",
            "updated",
            "robots",
        }

    def test_delete_empty_group(self, fleet: FleetService) -> None:
        """An empty group is deleted and returned as it was."""
        made = fleet.upsert_group("line-3", name="L3")
        assert fleet.delete_group("line-3") == made
        assert fleet.get_group("line-3") is None

    def test_delete_unknown_group(self, fleet: FleetService) -> None:
        """Deleting a group that does not exist is not_found."""
        with pytest.raises(FleetError) as info:
            fleet.delete_group("line-3")
        assert info.value.code == "not_found"

    def test_delete_non_empty_group_is_a_conflict(self, fleet: FleetService) -> None:
        """A group with robots is refused, naming them; nothing changes; once they are moved
        out the delete goes through (decision 0007)."""
        fleet.upsert_group("line-3")
        fleet.register_robot("rap-2", group_id="line-3")
        fleet.register_robot("rap-1", group_id="line-3")
        with pytest.raises(FleetError) as info:
            fleet.delete_group("line-3")
        assert info.value.code == "conflict"
        assert str(info.value) == (
            "group 'line-3' still has robots rap-1, rap-2; move them with set_group first "
            "(set_group(robot_id, None) ungroups a robot)"
        )
        assert info.value.to_dict() == {"error": "conflict", "detail": str(info.value)}
        assert _counts(fleet) == (2, 1, 0)
        assert fleet.scope_of("rap-1") == "group:line-3"
        fleet.set_group("rap-1", None)
        fleet.set_group("rap-2", None)
        fleet.delete_group("line-3")
        assert fleet.scope_of("rap-1") == "solo:rap-1"

    def test_conflict_message_is_bounded(self, fleet: FleetService) -> None:
        """A big group's conflict names 20 robots and counts the rest."""
        fleet.upsert_group("big")
        for i in range(25):
            fleet.register_robot(f"r{i:02d}", group_id="big")
        with pytest.raises(FleetError, match=r"r19, and 5 more; move them"):
            fleet.delete_group("big")


class TestSetGroup:
    def test_move_and_ungroup(self, fleet: FleetService) -> None:
        """set_group moves a robot and None ungroups it."""
        fleet.upsert_group("g1")
        fleet.upsert_group("g2")
        fleet.register_robot("rap-1", group_id="g1")
        assert fleet.set_group("rap-1", "g2").group_id == "g2"
        assert fleet.get_group("g1").robots == ()  # type: ignore[union-attr]
        assert fleet.set_group("rap-1", None).group_id is None

    @pytest.mark.parametrize(("robot", "group"), [("ghost", "g1"), ("rap-1", "nope")])
    def test_unknown_robot_or_group(self, fleet: FleetService, robot: str, group: str) -> None:
        """An unknown robot or group is not_found and the robot stays where it was."""
        fleet.upsert_group("g1")
        fleet.register_robot("rap-1", group_id="g1")
        with pytest.raises(FleetError) as info:
            fleet.set_group(robot, group)
        assert info.value.code == "not_found"
        assert repr(robot if robot == "ghost" else group) in str(info.value)
        assert fleet.group_of("rap-1") == "g1"


# --- scopes ------------------------------------------------------------------------------


class TestScopes:
    def test_unregistered_robot_is_solo(self, fleet: FleetService) -> None:
        """A robot nobody registered is solo, sees itself, has no group."""
        assert fleet.scope_of("rap-9") == "solo:rap-9"
        assert fleet.visible_robots("rap-9") == frozenset({"rap-9"})
        assert fleet.group_of("rap-9") is None

    def test_grouped_robot_sees_its_group(self, fleet: FleetService) -> None:
        """A grouped robot's scope is its group; it sees every member, nobody else."""
        fleet.upsert_group("g1")
        fleet.upsert_group("g2")
        for rid, gid in (("a", "g1"), ("b", "g1"), ("c", "g2"), ("d", None)):
            fleet.register_robot(rid, group_id=gid)
        assert fleet.scope_of("a") == "group:g1"
        assert fleet.visible_robots("a") == frozenset({"a", "b"})
        assert fleet.visible_robots("c") == frozenset({"c"})
        assert fleet.visible_robots("d") == frozenset({"d"})
        assert fleet.scope_of("d") == "solo:d"
        res = fleet.resolve("b")
        assert (res.robot_id, res.group_id, res.scope) == ("b", "g1", "group:g1")

    def test_regrouping_takes_effect_at_once(self, fleet: FleetService) -> None:
        """After set_group, scope_of / visible_robots / group_of answer the new grouping."""
        fleet.upsert_group("g1")
        fleet.upsert_group("g2")
        fleet.register_robot("a", group_id="g1")
        fleet.register_robot("b", group_id="g1")
        fleet.register_robot("c", group_id="g2")
        fleet.set_group("a", "g2")
        assert fleet.scope_of("a") == "group:g2"
        assert fleet.group_of("a") == "g2"
        assert fleet.visible_robots("a") == frozenset({"a", "c"})
        assert fleet.visible_robots("b") == frozenset({"b"})
        fleet.set_group("a", None)
        assert fleet.scope_of("a") == "solo:a"
        assert fleet.visible_robots("c") == frozenset({"c"})

    def test_operations_join_an_outer_transaction(self, sqlite_backend: Any) -> None:
        """Inside store.transaction() the operations are one unit: an error undoes all
        (the SQLite backend's own feature: each PostgreSQL call is its own transaction)."""
        opened = sqlite_backend.open_backend()
        store = opened.index
        fleet = FleetService(opened.fleet, clock=Clock())
        fleet.upsert_group("g1", name="old")
        fleet.register_robot("a")

        def rename_and_move_then_fail() -> None:
            with store.transaction():
                fleet.upsert_group("g1", name="new")
                fleet.set_group("a", "g1")
                raise RuntimeError("abort")

        with pytest.raises(RuntimeError):
            rename_and_move_then_fail()
        assert fleet.get_group("g1").name == "old"  # type: ignore[union-attr]
        assert fleet.group_of("a") is None
        with store.transaction():
            fleet.upsert_group("g1", name="new")
            fleet.set_group("a", "g1")
        assert fleet.get_group("g1").robots == ("a",)  # type: ignore[union-attr]


# --- self-improve ------------------------------------------------------------------------


class TestSelfImprove:
    @pytest.fixture
    def grouped(self, fleet: FleetService) -> FleetService:
        fleet.upsert_group("g1")
        fleet.register_robot("in-g1", group_id="g1")
        fleet.register_robot("loner")
        return fleet

    def test_off_everywhere_by_default(self, grouped: FleetService) -> None:
        """Until an operator switches it on, nobody self-improves."""
        for rid in ("in-g1", "loner", "unregistered"):
            assert grouped.self_improve_for(rid) == (False, "global")

    def test_global_on_reaches_inheriting_groups_and_loners(self, grouped: FleetService) -> None:
        """Global on: a group that never set its toggle and an ungrouped robot are on."""
        assert grouped.set_self_improve(True) == {"group_id": None, "self_improve": True}
        assert grouped.self_improve_for("in-g1") == (True, "global")
        assert grouped.self_improve_for("loner") == (True, "global")

    def test_group_off_beats_global_on(self, grouped: FleetService) -> None:
        """Global on + group explicitly off → off for the group's robots."""
        grouped.set_self_improve(True)
        assert grouped.set_self_improve(False, "g1") == {"group_id": "g1", "self_improve": False}
        assert grouped.self_improve_for("in-g1") == (False, "group:g1")
        assert grouped.self_improve_for("loner") == (True, "global")
        assert grouped.get_group("g1").self_improve is False  # type: ignore[union-attr]

    def test_group_on_beats_global_off(self, grouped: FleetService) -> None:
        """Group on + global off → on for the group; an ungrouped robot follows global."""
        grouped.set_self_improve(True, group_id="g1")
        assert grouped.self_improve_for("in-g1") == (True, "group:g1")
        assert grouped.self_improve_for("loner") == (False, "global")
        grouped.set_self_improve(False)  # global explicitly off
        assert grouped.self_improve_for("in-g1") == (True, "group:g1")

    def test_none_returns_a_group_to_inheriting(self, grouped: FleetService) -> None:
        """set_self_improve(None, group) clears the group's toggle; None globally is invalid."""
        grouped.set_self_improve(True)
        grouped.set_self_improve(False, "g1")
        assert grouped.set_self_improve(None, "g1") == {"group_id": "g1", "self_improve": None}
        assert grouped.self_improve_for("in-g1") == (True, "global")
        with pytest.raises(FleetError) as info:
            grouped.set_self_improve(None)
        assert (info.value.code, info.value.field) == ("invalid", "enabled")

    def test_moving_robot_changes_its_toggle(self, grouped: FleetService) -> None:
        """A robot moved out of an 'on' group follows the global toggle at once."""
        grouped.set_self_improve(True, "g1")
        grouped.set_group("in-g1", None)
        assert grouped.self_improve_for("in-g1") == (False, "global")

    def test_unknown_group_and_bad_flag(self, grouped: FleetService) -> None:
        """An unknown group is not_found; a non-bool flag is invalid; nothing is written."""
        with pytest.raises(FleetError) as info:
            grouped.set_self_improve(True, "nope")
        assert info.value.code == "not_found"
        for bad in (1, "yes", 0.0):
            with pytest.raises(FleetError) as info:
                grouped.set_self_improve(bad)  # type: ignore[arg-type]
            assert (info.value.code, info.value.field) == ("invalid", "enabled")
        assert _counts(grouped)[2] == 0


# --- validation --------------------------------------------------------------------------

BAD_IDS: list[object] = [
    "",
    "-rap",
    ".rap",
    "rap 1",
    "rap-1\n",
    "rap\n1",
    "r" * 65,
    "räp",
    "rap/1",
    "rap@1",
    "rap:1",
    5,
    1.5,
    ["rap"],
    b"rap",
]


def _id_calls(fleet: FleetService, bad: Any) -> list[tuple[str, Any]]:
    return [
        ("robot_id", lambda: fleet.register_robot(bad)),
        ("robot_id", lambda: fleet.set_robot_meta(bad, {})),
        ("robot_id", lambda: fleet.get_robot(bad)),
        ("robot_id", lambda: fleet.set_group(bad, None)),
        ("robot_id", lambda: fleet.scope_of(bad)),
        ("robot_id", lambda: fleet.visible_robots(bad)),
        ("robot_id", lambda: fleet.group_of(bad)),
        ("robot_id", lambda: fleet.self_improve_for(bad)),
        ("group_id", lambda: fleet.register_robot("ok", group_id=bad)),
        ("group_id", lambda: fleet.set_group("ok", bad)),
        ("group_id", lambda: fleet.upsert_group(bad)),
        ("group_id", lambda: fleet.delete_group(bad)),
        ("group_id", lambda: fleet.get_group(bad)),
        ("group_id", lambda: fleet.list_robots(bad)),
        ("group_id", lambda: fleet.set_self_improve(True, bad)),
    ]


class TestValidation:
    @pytest.mark.parametrize("bad", BAD_IDS, ids=repr)
    def test_bad_ids_are_invalid_everywhere(self, fleet: FleetService, bad: object) -> None:
        """Every method refuses a bad robot or group id with invalid + the field."""
        fleet.register_robot("ok")
        for field, call in _id_calls(fleet, bad):
            with pytest.raises(FleetError) as info:
                call()
            assert (info.value.code, info.value.field) == ("invalid", field)
            assert str(info.value).startswith(field)
        assert _counts(fleet) == (1, 0, 0)

    def test_id_message_quotes_value_and_says_what_is_valid(self) -> None:
        """The message quotes the id (a trailing newline visible) and states the rule."""
        with pytest.raises(FleetError) as info:
            check_id("rap-1\n", "robot_id")
        assert str(info.value) == (
            "robot_id 'rap-1\\n' is not a valid id: 1 to 64 characters, letters, digits, "
            "'.', '_' or '-', starting with a letter or a digit"
        )
        assert info.value.to_dict() == {
            "error": "invalid",
            "detail": str(info.value),
            "field": "robot_id",
        }

    @pytest.mark.parametrize("good", ["a", "0", "A" * 64, "rap-1.x_y", "R2-D2"])
    def test_good_ids(self, fleet: FleetService, good: str) -> None:
        """Ids matching the whole pattern are accepted."""
        assert fleet.register_robot(good).robot_id == good
        assert fleet.upsert_group(good).group_id == good

    @pytest.mark.parametrize(
        "bad", ["x" * 201, "two\nlines", "tab\there", "nul\x00", "sep\u2028", "\ud800", 5]
    )
    @pytest.mark.parametrize("field", ["name", "customer", "factory"])
    def test_bad_labels(self, fleet: FleetService, field: str, bad: object) -> None:
        """Labels: at most 200 characters, one line, no control characters, a string."""
        with pytest.raises(FleetError) as info:
            fleet.upsert_group("g", **{field: bad})
        assert (info.value.code, info.value.field) == ("invalid", field)
        assert _counts(fleet) == (0, 0, 0)

    def test_label_limits(self, fleet: FleetService) -> None:
        """200 characters and non-ASCII text are fine; robot names follow the same rule."""
        assert fleet.upsert_group("g", name="é" * 200).name == "é" * 200
        with pytest.raises(FleetError) as info:
            fleet.register_robot("r", name="a\nb")
        assert info.value.field == "name"

    @pytest.mark.parametrize(
        ("meta", "needle"),
        [
            pytest.param(_nested(10_000), "nested deeper than 16", id="deep-dict-10000"),
            pytest.param(
                {"x": _nested(10_000, lists=True)}, "nested deeper than 16", id="deep-list"
            ),
            pytest.param(_nested(17), "nested deeper than 16", id="depth-17"),
            pytest.param({"n": 2**63}, "integers must fit in 64 bits", id="int-2**63"),
            pytest.param({"n": -(2**63) - 1}, "64 bits", id="int-below"),
            pytest.param({"n": 10**5000}, "an integer of 16610 bits", id="int-5000-digits"),
            pytest.param({"x": math.nan}, "nan", id="nan"),
            pytest.param({"x": [math.inf]}, "inf", id="inf"),
            pytest.param({"x": -math.inf}, "-inf", id="-inf"),
            pytest.param({"x": "a" * 1_000_000}, "larger than 16384 bytes", id="1MB-string"),
            pytest.param({"x": list(range(300_000))}, "larger than 16384", id="1MB-list"),
            pytest.param({"x": "é" * 9000}, "bytes as JSON; at most 16384", id="utf8-17KB"),
            pytest.param(["not", "a", "dict"], "must be a JSON object", id="list"),
            pytest.param("{}", "must be a JSON object", id="string"),
            pytest.param(42, "must be a JSON object", id="int"),
            pytest.param({1: "x"}, "key 1, which is not a string", id="int-key"),
            pytest.param({("a",): 1}, "not a string", id="tuple-key"),
            pytest.param({"s": {1, 2}}, "a set of 2 items, which is not a JSON value", id="set"),
            pytest.param({"b": b"raw"}, "3 bytes of binary data, which is not", id="bytes"),
            pytest.param({"o": object()}, "an object, which is not a JSON value", id="object"),
            pytest.param({"s": "\ud800"}, "lone surrogate", id="surrogate"),
        ],
    )
    def test_hostile_meta_is_invalid(self, fleet: FleetService, meta: Any, needle: str) -> None:
        """Hostile meta is FleetError invalid (field meta), never another exception, and
        nothing is written."""
        fleet.register_robot("r")
        for call in (
            lambda: fleet.register_robot("r", meta=meta),
            lambda: fleet.register_robot("new", meta=meta),
            lambda: fleet.set_robot_meta("r", meta),
        ):
            with pytest.raises(FleetError) as info:
                call()
            assert (info.value.code, info.value.field) == ("invalid", "meta")
            assert needle in str(info.value)
            assert len(str(info.value)) < 300
        assert fleet.get_robot("r").meta == {}  # type: ignore[union-attr]
        assert _counts(fleet) == (1, 0, 0)

    def test_cyclic_meta_is_invalid(self, fleet: FleetService) -> None:
        """A self-referencing dict is caught by the depth walk."""
        cyclic: dict[str, Any] = {}
        cyclic["self"] = cyclic
        with pytest.raises(FleetError, match="nested deeper"):
            fleet.register_robot("r", meta=cyclic)

    def test_meta_limits_are_inclusive(self, fleet: FleetService) -> None:
        """Depth 16, 64-bit extremes and exactly 16 KiB of JSON are accepted."""
        assert fleet.register_robot("r", meta=_nested(16)).meta == _nested(16)
        edge = {"lo": -(2**63), "hi": 2**63 - 1, "f": 1e308, "t": True, "n": None}
        assert fleet.set_robot_meta("r", edge).meta == edge
        filler = "x" * (MAX_JSON_BYTES - len('{"k":""}'))
        assert len(check_json_object({"k": filler}, "meta")) == MAX_JSON_BYTES
        assert fleet.set_robot_meta("r", {"k": filler}).meta == {"k": filler}
        with pytest.raises(FleetError):
            fleet.set_robot_meta("r", {"k": filler + "x"})

    def test_none_meta_for_set_robot_meta_is_invalid(self, fleet: FleetService) -> None:
        """set_robot_meta needs an object; None is not one."""
        fleet.register_robot("r")
        with pytest.raises(FleetError) as info:
            fleet.set_robot_meta("r", None)  # type: ignore[arg-type]
        assert info.value.field == "meta"


# --- properties ----------------------------------------------------------------------------

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=40),
    st.binary(max_size=4),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.text(max_size=8), st.integers()), inner, max_size=5),
    ),
    max_leaves=40,
)


@given(value=_values)
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
def test_json_check_raises_only_fleet_error(value: object) -> None:
    """Whatever it is given, the check returns JSON that loads back, or raises FleetError."""
    error: FleetError | None = None
    try:
        text = check_json_object(value, "meta")
    except FleetError as exc:
        error = exc
    if error is not None:
        assert (error.code, error.field) == ("invalid", "meta")
        return
    assert isinstance(value, dict)
    assert isinstance(json.loads(text), dict)
    assert len(text.encode()) <= MAX_JSON_BYTES


@given(value=st.one_of(st.text(max_size=80), st.integers(), st.none()))
def test_id_check_accepts_exactly_the_pattern(value: object) -> None:
    """check_id returns the value iff the whole string matches the pattern."""
    ok = isinstance(value, str) and ID_PATTERN.fullmatch(value) is not None
    error: FleetError | None = None
    try:
        assert check_id(value, "robot_id") == value
    except FleetError as exc:
        error = exc
    assert (error is None) == ok
    assert error is None or error.code == "invalid"
