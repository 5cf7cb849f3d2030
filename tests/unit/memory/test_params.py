"""ScopedParams: lessons scoped by the fleet registry, gated by self-improve (issue 10)."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robot_mcp_kit.params import SqliteBackend
from robot_mcp_memory._exceptions import FleetError
from robot_mcp_memory._limits import MAX_LESSON_NOTE_BYTES
from robot_mcp_memory.fleet import FleetService
from robot_mcp_memory.params import ScopedParams


@pytest.fixture
def fleet(sqlite_backend: Any) -> FleetService:
    f: FleetService = sqlite_backend.fleet()
    f.upsert_group("g1")
    f.upsert_group("g2")
    f.register_robot("a1", group_id="g1")
    f.register_robot("a2", group_id="g1")
    f.register_robot("b1", group_id="g2")
    f.register_robot("loner")
    return f


@pytest.fixture
def lessons(sqlite_backend: Any) -> Path:
    """What ScopedParams is given: the lessons' SQLite file (the rules are tested once;
    the lesson stores of both backends are backends/test_lessons.py's)."""
    path: Path = sqlite_backend.dir / "lessons.db"
    return path


@pytest.fixture
def nothing_written(lessons: Path) -> Callable[[], bool]:
    """True while no lesson is stored: no lessons.db (nor its WAL)."""

    def check() -> bool:
        return not lessons.exists() and not (lessons.parent / "lessons.db-wal").exists()

    return check


@pytest.fixture
def sp(fleet: FleetService, lessons: Path):
    p = ScopedParams(fleet, SqliteBackend(lessons))
    yield p
    p.close()


@pytest.fixture
def on(fleet: FleetService, sp: ScopedParams) -> ScopedParams:
    """Self-improvement switched on globally."""
    fleet.set_self_improve(True)
    return sp


def _earn(
    sp: ScopedParams,
    robot: str,
    skill: str,
    place: str | None,
    params: dict[str, Any],
    ok: int,
    bad: int = 0,
    *,
    private: bool = False,
) -> None:
    sp.record(robot, skill, params, place=place, private=private)
    for _ in range(ok):
        sp.record(robot, skill, None, place=place, success=True, private=private)
    for _ in range(bad):
        sp.record(robot, skill, None, place=place, success=False, private=private)


def _deep(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


# --- gating ------------------------------------------------------------------------------


class TestGate:
    def test_off_by_default_nothing_recorded_nothing_recalled_no_file(
        self, sp: ScopedParams, nothing_written: Callable[[], bool]
    ) -> None:
        """With self-improvement off (the default), record and recall say why, and no
        lessons.db appears — not even for list_lessons."""
        got = sp.record("a1", "grasp", {"dz": 0.01}, place="t1", success=True, note="x")
        assert got == {
            "recorded": False,
            "reason": "self_improve_off",
            "scope": "group:g1",
            "where": "global",
            "detail": got["detail"],
        }
        assert "set_self_improve" in got["detail"]
        assert sp.record("loner", "grasp", {"dz": 1}, private=True)["scope"] == "robot:loner"
        recalled = sp.recall("a1", "grasp", place="t1")
        assert recalled["lesson"] is None
        assert recalled["reason"] == "self_improve_off"
        assert sp.list_lessons() == []
        assert sp.list_lessons("a1") == []
        assert nothing_written()

    def test_recall_and_list_never_create_the_file(
        self, on: ScopedParams, nothing_written: Callable[[], bool]
    ) -> None:
        """Switched on, a recall or a listing with no lessons still creates nothing."""
        assert on.recall("a1", "grasp", place="t1") == {
            "lesson": None,
            "scope": None,
            "match": None,
            "reason": "no_lesson",
        }
        assert on.list_lessons() == []
        with pytest.raises(FleetError):
            on.record("a1", "grasp", None, success=True)  # outcome for a missing lesson
        assert nothing_written()
        on.record("a1", "grasp", {"dz": 1})
        assert not nothing_written()

    def test_group_off_beats_global_on(self, fleet: FleetService, on: ScopedParams) -> None:
        """A group switched off records nothing while the global toggle is on."""
        fleet.set_self_improve(False, "g1")
        got = on.record("a1", "grasp", {"dz": 1})
        assert (got["recorded"], got["where"]) == (False, "group:g1")
        assert on.record("loner", "grasp", {"dz": 1})["recorded"] is True
        assert on.recall("a2", "grasp")["reason"] == "self_improve_off"

    def test_group_on_beats_global_off(self, fleet: FleetService, sp: ScopedParams) -> None:
        """A group switched on learns while the global toggle is off; a loner does not."""
        fleet.set_self_improve(True, "g1")
        assert sp.record("a1", "grasp", {"dz": 1})["recorded"] is True
        assert sp.recall("a2", "grasp")["match"] == "exact"
        assert sp.record("loner", "grasp", {"dz": 1})["recorded"] is False

    def test_switching_off_hides_lessons_from_recall_not_from_list(
        self, fleet: FleetService, on: ScopedParams
    ) -> None:
        """Stored lessons stay (and are listed) while off; recall answers nothing."""
        on.record("a1", "grasp", {"dz": 1})
        fleet.set_self_improve(False)
        assert on.recall("a1", "grasp")["reason"] == "self_improve_off"
        assert [x["key"] for x in on.list_lessons("a1")] == ["grasp"]


# --- recording ---------------------------------------------------------------------------


class TestRecord:
    def test_record_returns_the_lesson_in_its_scope(self, on: ScopedParams) -> None:
        """The answer names the scope and carries the whole lesson with its note."""
        got = on.record("a1", "grasp", {"dz": 0.01}, place="t1", success=True, note="ok")
        assert got["recorded"] is True
        assert got["scope"] == "group:g1"
        lesson = got["lesson"]
        assert lesson["params"] == {"dz": 0.01}
        assert (lesson["key"], lesson["place"], lesson["robot"]) == ("grasp", "t1", "a1")
        assert (lesson["success_count"], lesson["failure_count"]) == (1, 0)
        assert lesson["note"] == "ok"
        assert lesson["scope"] == "group:g1"
        json.dumps(got)

    @pytest.mark.parametrize(
        ("robot", "private", "scope"),
        [
            ("a1", False, "group:g1"),
            ("loner", False, "solo:loner"),
            ("unregistered", False, "solo:unregistered"),
            ("a1", True, "robot:a1"),
            ("loner", True, "robot:loner"),
        ],
    )
    def test_scope_follows_the_registry(
        self, on: ScopedParams, robot: str, private: bool, scope: str
    ) -> None:
        """Grouped → group:<G>; ungrouped or unknown → solo:<id>; private → robot:<id>."""
        assert on.record(robot, "grasp", {"x": 1}, private=private)["scope"] == scope

    def test_outcomes_and_params_update(self, on: ScopedParams) -> None:
        """params=None counts an outcome on an existing lesson; new params replace."""
        on.record("a1", "grasp", {"dz": 1}, place="t1")
        on.record("a1", "grasp", None, place="t1", success=True)
        on.record("a2", "grasp", None, place="t1", success=False)
        last = on.record("a2", "grasp", {"dz": 2}, place="t1", success=True)["lesson"]
        assert last["params"] == {"dz": 2}
        assert (last["success_count"], last["failure_count"], last["robot"]) == (2, 1, "a2")
        assert last["reliability"] == pytest.approx(3 / 5)

    def test_outcome_for_missing_lesson_is_invalid(self, on: ScopedParams) -> None:
        """params=None with no such lesson: invalid, naming the lesson and the remedy."""
        on.record("a1", "grasp", {"dz": 1}, place="t1")
        with pytest.raises(FleetError) as info:
            on.record("a1", "grasp", None, place="t2", success=True)
        assert (info.value.code, info.value.field) == ("invalid", "params")
        assert "no lesson 'grasp' at place 't2' in scope 'group:g1'" in str(info.value)
        assert "record it with params first" in str(info.value)

    def test_note_is_one_line_and_the_last_one_is_kept(self, on: ScopedParams) -> None:
        """Whitespace collapses to single spaces; '' keeps the old note; a new one replaces."""
        first = on.record("a1", "grasp", {"x": 1}, note="slid\n off  the\tlid ")
        assert first["lesson"]["note"] == "slid off the lid"
        assert on.record("a1", "grasp", None, success=True)["lesson"]["note"] == "slid off the lid"
        assert on.record("a1", "grasp", None, note="regrip")["lesson"]["note"] == "regrip"
        assert on.record("a1", "grasp", None, note=None)["lesson"]["note"] == "regrip"  # type: ignore[arg-type]

    @pytest.mark.parametrize(
        ("note", "needle"),
        [
            ("x" * (MAX_LESSON_NOTE_BYTES + 1), "at most 1024"),
            ("é" * 513, "1026 bytes long"),
            ("bell\x07", "control characters"),
            ("\ud800", "control characters"),
            (5, "must be a string"),
        ],
    )
    def test_bad_note(self, on: ScopedParams, note: Any, needle: str) -> None:
        """A note over 1 KiB, with control characters, or not a string is invalid."""
        with pytest.raises(FleetError) as info:
            on.record("a1", "grasp", {"x": 1}, note=note)
        assert (info.value.code, info.value.field) == ("invalid", "note")
        assert needle in str(info.value)
        assert on.record("a1", "grasp", {"x": 1}, note="x" * MAX_LESSON_NOTE_BYTES)["recorded"]

    def test_regrouping_moves_where_the_next_lesson_goes(
        self, fleet: FleetService, on: ScopedParams
    ) -> None:
        """After set_group, a robot records into and recalls from its new group."""
        on.record("b1", "grasp", {"from": "g2"})
        fleet.set_group("a1", "g2")
        assert on.recall("a1", "grasp")["lesson"]["params"] == {"from": "g2"}
        assert on.record("a1", "push", {"x": 1})["scope"] == "group:g2"
        assert on.recall("a2", "push")["reason"] == "no_lesson"


# --- recall --------------------------------------------------------------------------------


class TestRecall:
    def test_exact_beats_placeless_beats_earned_transfer(self, on: ScopedParams) -> None:
        """Added one by one: an earned lesson from t2 is transferred; then a place-less one
        wins; then an exact one wins."""
        _earn(on, "a2", "grasp", "t2", {"from": "t2"}, ok=3)
        got = on.recall("a1", "grasp", place="t1")
        assert got["match"] == "transferred"
        assert got["scope"] == "group:g1"
        assert got["lesson"]["params"] == {"from": "t2"}
        assert (got["lesson"]["transferred"], got["lesson"]["origin_place"]) == (True, "t2")
        on.record("a2", "grasp", {"from": "none"})
        got = on.recall("a1", "grasp", place="t1")
        assert (got["match"], got["lesson"]["params"]) == ("placeless", {"from": "none"})
        assert (got["lesson"]["transferred"], got["lesson"]["origin_place"]) == (False, None)
        on.record("a2", "grasp", {"from": "t1"}, place="t1")
        got = on.recall("a1", "grasp", place="t1")
        assert (got["match"], got["lesson"]["params"]) == ("exact", {"from": "t1"})
        assert got["lesson"]["transferred"] is False

    @pytest.mark.parametrize(
        ("ok", "bad", "transferred"),
        [
            (2, 0, False),  # too few successes
            (3, 2, False),  # reliability 4/7 < 0.75
            (3, 0, True),  # 3 successes, reliability 4/5
            (6, 1, True),  # reliability 7/9
        ],
    )
    def test_transfer_must_be_earned(
        self, on: ScopedParams, ok: int, bad: int, transferred: bool
    ) -> None:
        """A lesson from another place is offered only once it has earned transfer."""
        _earn(on, "a1", "grasp", "t2", {"x": 1}, ok=ok, bad=bad)
        got = on.recall("a1", "grasp", place="t1")
        assert (got["match"] == "transferred") is transferred
        if not transferred:
            assert got == {"lesson": None, "scope": None, "match": None, "reason": "no_lesson"}

    def test_best_earned_lesson_is_transferred(self, on: ScopedParams) -> None:
        """Among earned lessons from other places, the most reliable wins."""
        _earn(on, "a1", "grasp", "t2", {"from": "t2"}, ok=4, bad=1)  # 5/7
        _earn(on, "a1", "grasp", "t3", {"from": "t3"}, ok=9, bad=1)  # 10/12
        _earn(on, "a1", "grasp", "t4", {"from": "t4"}, ok=5)  # 6/7
        got = on.recall("a1", "grasp", place="t1")
        assert got["lesson"]["origin_place"] == "t4"

    def test_no_place_means_placeless_only(self, on: ScopedParams) -> None:
        """Without a place, a lesson learned at a place is never returned."""
        _earn(on, "a1", "grasp", "t2", {"x": 1}, ok=5)
        assert on.recall("a1", "grasp")["reason"] == "no_lesson"
        on.record("a1", "grasp", {"x": 0})
        got = on.recall("a1", "grasp")
        assert (got["match"], got["lesson"]["place"]) == ("exact", None)

    def test_private_scope_is_looked_in_first(self, on: ScopedParams) -> None:
        """robot:<id> first — its exact, then its place-less — then the group."""
        on.record("a1", "grasp", {"from": "group-exact"}, place="t1")
        on.record("a1", "grasp", {"from": "mine-placeless"}, private=True)
        got = on.recall("a1", "grasp", place="t1")
        assert (got["scope"], got["match"]) == ("robot:a1", "placeless")
        on.record("a1", "grasp", {"from": "mine-exact"}, place="t1", private=True)
        assert on.recall("a1", "grasp", place="t1")["lesson"]["params"] == {"from": "mine-exact"}
        # The group-mate gets the group's lesson.
        got = on.recall("a2", "grasp", place="t1")
        assert (got["scope"], got["lesson"]["params"]) == ("group:g1", {"from": "group-exact"})

    def test_private_lessons_never_leave_their_robot(self, on: ScopedParams) -> None:
        """Another robot — group-mate or not — never recalls or lists a private lesson,
        not even as an earned transfer."""
        _earn(on, "a1", "grasp", "t1", {"secret": 1}, ok=5, private=True)
        on.record("a1", "push", {"secret": 2}, private=True)
        for other in ("a2", "b1", "loner"):
            for skill, place in (("grasp", "t1"), ("grasp", "t9"), ("grasp", None), ("push", None)):
                assert on.recall(other, skill, place=place)["lesson"] is None
            assert on.list_lessons(other) == []
        assert on.recall("a1", "grasp", place="t9")["match"] == "transferred"
        assert {x["scope"] for x in on.list_lessons("a1")} == {"robot:a1"}

    def test_groups_do_not_share(self, on: ScopedParams) -> None:
        """A lesson of group g1 is not recalled by g2 or by an ungrouped robot."""
        _earn(on, "a1", "grasp", "t1", {"x": 1}, ok=5)
        on.record("a1", "grasp", {"x": 2})
        for other in ("b1", "loner", "unregistered"):
            assert on.recall(other, "grasp", place="t1")["reason"] == "no_lesson"

    def test_thresholds_are_configurable(self, fleet: FleetService, lessons: Path) -> None:
        """transfer_min_successes / transfer_min_reliability set what 'earned' means."""
        fleet.set_self_improve(True)
        sp = ScopedParams(
            fleet, SqliteBackend(lessons), transfer_min_successes=1, transfer_min_reliability=0.6
        )
        try:
            _earn(sp, "a1", "grasp", "t2", {"x": 1}, ok=1)  # 2/3
            assert sp.recall("a1", "grasp", place="t1")["match"] == "transferred"
        finally:
            sp.close()


class TestList:
    def test_list_all_by_robot_and_by_skill(self, on: ScopedParams) -> None:
        """No robot: every scope; a robot: its private and shared scopes; skill narrows."""
        on.record("a1", "grasp", {"x": 1}, place="t1")
        on.record("a1", "grasp", {"x": 2}, private=True)
        on.record("a2", "push", {"x": 3}, private=True)
        on.record("b1", "grasp", {"x": 4})
        on.record("loner", "grasp", {"x": 5})
        everything = on.list_lessons()
        assert [(x["scope"], x["key"], x["place"]) for x in everything] == [
            ("group:g1", "grasp", "t1"),
            ("group:g2", "grasp", None),
            ("robot:a1", "grasp", None),
            ("robot:a2", "push", None),
            ("solo:loner", "grasp", None),
        ]
        assert [x["scope"] for x in on.list_lessons("a1")] == ["group:g1", "robot:a1"]
        assert [x["scope"] for x in on.list_lessons("a2")] == ["group:g1", "robot:a2"]
        assert [x["scope"] for x in on.list_lessons("a2", skill="grasp")] == ["group:g1"]
        assert len(on.list_lessons(skill="grasp")) == 4
        assert on.list_lessons(skill="pick") == []


# --- validation --------------------------------------------------------------------------

BAD_NAMES: list[object] = [
    "",
    " grasp",
    "grasp ",
    "grasp@t1",
    "grasp\n",
    "x" * 101,
    "gräsp",
    "-grasp",
    5,
    ["grasp"],
]


class TestValidation:
    @pytest.mark.parametrize("bad", BAD_NAMES, ids=repr)
    def test_bad_skill_and_place(
        self, on: ScopedParams, nothing_written: Callable[[], bool], bad: object
    ) -> None:
        """A bad skill or place is invalid everywhere, and nothing is written."""
        calls = [
            ("skill", lambda: on.record("a1", bad, {"x": 1})),  # type: ignore[arg-type]
            ("skill", lambda: on.recall("a1", bad)),  # type: ignore[arg-type]
            ("skill", lambda: on.list_lessons(skill=bad)),  # type: ignore[arg-type]
            ("place", lambda: on.record("a1", "grasp", {"x": 1}, place=bad)),  # type: ignore[arg-type]
            ("place", lambda: on.recall("a1", "grasp", place=bad)),  # type: ignore[arg-type]
        ]
        for field, call in calls:
            with pytest.raises(FleetError) as info:
                call()
            assert (info.value.code, info.value.field) == ("invalid", field)
        assert nothing_written()

    def test_good_names(self, on: ScopedParams) -> None:
        """Skills and places may hold spaces, ':', '/', '.', '_' and '-'."""
        got = on.record("a1", "pick:cup/v2 large_1.0", {"x": 1}, place="lab 3/table-1")
        assert (got["lesson"]["key"], got["lesson"]["place"]) == (
            "pick:cup/v2 large_1.0",
            "lab 3/table-1",
        )
        assert on.recall("a1", "pick:cup/v2 large_1.0", place="lab 3/table-1")["match"] == "exact"

    @pytest.mark.parametrize("bad", ["a1\n", "", "r@x", 7, None])
    def test_bad_robot(self, on: ScopedParams, bad: object) -> None:
        """The robot must be a valid id (None too: it is required)."""
        for call in (
            lambda: on.record(bad, "grasp", {"x": 1}),  # type: ignore[arg-type]
            lambda: on.recall(bad, "grasp"),  # type: ignore[arg-type]
        ):
            with pytest.raises(FleetError) as info:
                call()
            assert (info.value.code, info.value.field) == ("invalid", "robot")
        if bad is not None:
            with pytest.raises(FleetError):
                on.list_lessons(bad)  # type: ignore[arg-type]

    @pytest.mark.parametrize(
        "params",
        [
            {"a": _deep(10_000)},
            {"x": math.nan},
            {"x": 2**64},
            {"x": 10**5000},
            {"x": "y" * 1_000_000},
            ["not", "an", "object"],
            "{}",
            {1: 2},
        ],
        ids=["deep", "nan", "2**64", "5000-digits", "1MB", "list", "string", "int-key"],
    )
    def test_hostile_params(
        self, on: ScopedParams, nothing_written: Callable[[], bool], params: Any
    ) -> None:
        """Hostile params are invalid (field params), nothing else, nothing written."""
        with pytest.raises(FleetError) as info:
            on.record("a1", "grasp", params)
        assert (info.value.code, info.value.field) == ("invalid", "params")
        assert nothing_written()

    @pytest.mark.parametrize(
        ("field", "kwargs"),
        [
            ("success", {"success": "yes"}),
            ("success", {"success": 1}),
            ("private", {"private": "no"}),
            ("private", {"private": None}),
        ],
    )
    def test_flags_must_be_booleans(
        self, on: ScopedParams, field: str, kwargs: dict[str, Any]
    ) -> None:
        """success and private are true/false (success may be None)."""
        with pytest.raises(FleetError) as info:
            on.record("a1", "grasp", {"x": 1}, **kwargs)
        assert (info.value.code, info.value.field) == ("invalid", field)


_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=6), st.integers()), inner, max_size=4),
    ),
    max_leaves=30,
)


_example_numbers = itertools.count()


@given(params=_json)
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_record_params_raise_only_fleet_error(on: ScopedParams, params: object) -> None:
    """Any params: recorded and recalled back equal, or FleetError invalid — nothing else.

    The store outlives the examples (a function-scoped fixture), so each example records
    under a skill of its own: a lesson an earlier example left must not answer the recall.
    """
    skill = f"prop-{next(_example_numbers)}"
    error: FleetError | None = None
    try:
        got = on.record("a1", skill, params)  # type: ignore[arg-type]
    except FleetError as exc:
        error = exc
    if error is not None:
        assert (error.code, error.field) == ("invalid", "params")
        return
    assert got["recorded"] is True
    assert on.recall("a1", skill)["lesson"]["params"] == json.loads(json.dumps(params))
