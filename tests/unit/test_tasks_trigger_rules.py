"""The trigger rules as functions: declared fields (TriggerType, check_triggers), which
triggers a task keeps (accept_triggers), progress_triggers_due, trigger_key."""

from __future__ import annotations

import logging
import math
from typing import Any

import pytest

from robot_mcp_kit import ConfigurationError, InvalidTrigger, NumberField, TextField, TriggerType
from robot_mcp_kit._triggers import (
    accept_triggers,
    check_triggers,
    progress_triggers_due,
    trigger_key,
    trigger_rules,
)
from robot_mcp_kit.tasks import CONTRACT_TRIGGER_TYPES, MAX_TRIGGERS, MAX_TRIGGERS_JSON_BYTES

DOCK = TriggerType(
    "dock_free",
    {
        "bay": TextField(choices=("north", "south")),
        "within_s": NumberField(gt=0, le=600),
        "count": NumberField(ge=1, integer=True, required=False),
    },
)


def refusal(triggers: list[Any], known: Any = None) -> InvalidTrigger:
    with pytest.raises(InvalidTrigger) as caught:
        check_triggers(triggers, trigger_rules(known))
    return caught.value


class TestContractTypes:
    """docs/contract.md §8: eta_below (seconds), zone_entered (zone), progress_above."""

    @pytest.mark.parametrize(
        ("trigger", "field", "message"),
        [
            (
                {"type": "eta_below"},
                "seconds",
                'trigger 0 (eta_below): "seconds" is missing; it must be a finite number > 0.',
            ),
            (
                {"type": "eta_below", "seconds": "10"},
                "seconds",
                'trigger 0 (eta_below): "seconds" must be a finite number > 0, got "10" (a '
                "string).",
            ),
            (
                {"type": "eta_below", "seconds": True},
                "seconds",
                'trigger 0 (eta_below): "seconds" must be a finite number > 0, got true (a '
                "boolean).",
            ),
            (
                {"type": "eta_below", "seconds": math.inf},
                "seconds",
                'trigger 0 (eta_below): "seconds" must be a finite number > 0, got Infinity (a '
                "number).",
            ),
            (
                {"type": "eta_below", "seconds": 0},
                "seconds",
                'trigger 0 (eta_below): "seconds" must be a finite number > 0, got 0 (an integer).',
            ),
            (
                {"type": "eta_below", "seconds": 5, "repeat": "yes"},
                "repeat",
                'trigger 0 (eta_below): "repeat" must be true or false, got "yes" (a string).',
            ),
            (
                {"type": "zone_entered", "zone": ""},
                "zone",
                'trigger 0 (zone_entered): "zone" must be a non-empty string, got "" (a string).',
            ),
            (
                {"type": "zone_entered", "zone": {"name": "lab"}},
                "zone",
                'trigger 0 (zone_entered): "zone" must be a non-empty string, got an object.',
            ),
            (
                {"type": "progress_above", "percent": 101},
                "percent",
                'trigger 0 (progress_above): "percent" must be a finite number >= 0 and <= '
                "100, got 101 (an integer).",
            ),
            (
                {"type": "progress_above", "percent": None},
                "percent",
                'trigger 0 (progress_above): "percent" must be a finite number >= 0 and <= '
                "100, got null (JSON carries NaN and infinity as null).",
            ),
            (
                {"type": "eta_below", "seconds": math.nan},
                "seconds",
                'trigger 0 (eta_below): "seconds" must be a finite number > 0, got NaN.',
            ),
            (
                {"type": "eta_below", "seconds": 10**400},
                "seconds",
                'trigger 0 (eta_below): "seconds" must be a finite number > 0, got an integer '
                "beyond ±1.8e308 (no JSON reader holds it as a number).",
            ),
            (
                {"type": "eta_below", "seconds": -(10**400)},
                "seconds",
                'trigger 0 (eta_below): "seconds" must be a finite number > 0, got an integer '
                "beyond ±1.8e308 (no JSON reader holds it as a number).",
            ),
            (
                {"type": "progress_above", "percent": 10**400},
                "percent",
                'trigger 0 (progress_above): "percent" must be a finite number >= 0 and <= '
                "100, got an integer beyond ±1.8e308 (no JSON reader holds it as a number).",
            ),
        ],
    )
    def test_a_malformed_documented_trigger_is_refused_naming_it(self, trigger, field, message):
        """The refusal names the trigger's index, its type and the field, and what is valid."""
        error = refusal([trigger])
        assert str(error) == message
        assert (error.index, error.type, error.field) == (0, trigger["type"], field)

    def test_well_formed_documented_triggers_pass(self):
        """Each documented type with its fields (and repeat) passes; extra keys are free."""
        check_triggers(
            [
                {"type": "eta_below", "seconds": 0.5, "repeat": True, "note": "x"},
                {"type": "zone_entered", "zone": "lab"},
                {"type": "progress_above", "percent": 0},
                {"type": "progress_above", "percent": 100.0},
            ],
            trigger_rules(None),
        )

    def test_the_index_is_the_first_bad_triggers(self):
        """Triggers are checked in order; the first bad one is named."""
        error = refusal([{"type": "eta_below", "seconds": 1}, {"type": "zone_entered"}])
        assert (error.index, error.type, error.field) == (1, "zone_entered", "zone")

    def test_a_long_value_is_cut_in_the_message(self):
        """The message quotes at most 40 characters of what was sent."""
        error = refusal([{"type": "zone_entered", "zone": 7, "x": 1}, {"type": "eta_below"}])
        assert "got 7 (an integer)" in str(error)
        error = refusal([{"type": "eta_below", "seconds": "s" * 500}])
        assert '"sssss' in str(error)
        assert len(str(error)) < 150

    def test_a_huge_whole_number_is_judged_not_overflowed(self):
        """Whole numbers are compared as they are: a large one within a double's range
        passes a bound it meets, and an integer field takes it (no float conversion)."""
        check_triggers([{"type": "eta_below", "seconds": 10**300}], trigger_rules(None))
        whole = TriggerType("t", {"n": NumberField(integer=True, ge=1)})
        check_triggers([{"type": "t", "n": 10**300}], trigger_rules([whole]))
        assert refusal([{"type": "t", "n": 10**400}], [whole]).field == "n"

    def test_the_documented_types_are_public(self):
        """CONTRACT_TRIGGER_TYPES holds the three documented types and their fields."""
        assert set(CONTRACT_TRIGGER_TYPES) == {"eta_below", "zone_entered", "progress_above"}
        assert set(CONTRACT_TRIGGER_TYPES["eta_below"].fields) == {"seconds"}


class TestShape:
    @pytest.mark.parametrize(
        ("trigger", "message"),
        [
            ("eta_below", 'trigger 0 must be an object with a "type", got "eta_below" (a string).'),
            ([1], 'trigger 0 must be an object with a "type", got a list.'),
            (None, 'trigger 0 must be an object with a "type", got null.'),
            (
                {"seconds": 3},
                'trigger 0 needs a "type", a non-empty string naming the condition; got none.',
            ),
            (
                {"type": 3},
                'trigger 0 needs a "type", a non-empty string naming the condition; got 3 (an '
                "integer).",
            ),
            (
                {"type": ""},
                'trigger 0 needs a "type", a non-empty string naming the condition; got "" (a '
                "string).",
            ),
        ],
    )
    def test_a_trigger_without_a_string_type_is_refused(self, trigger, message):
        """What is no object with a type is no trigger of an unknown type: it is refused."""
        for known in (None, ["eta_below"]):
            assert str(refusal([trigger], known)) == message


class TestBounds:
    """At most MAX_TRIGGERS triggers, MAX_TRIGGERS_JSON_BYTES of JSON together."""

    def test_the_bounds(self):
        assert (MAX_TRIGGERS, MAX_TRIGGERS_JSON_BYTES) == (32, 8192)

    def test_more_triggers_than_the_bound_are_refused_before_any_is_judged(self):
        many = [{"type": "progress_above", "percent": 0, "n": i} for i in range(33)]
        error = refusal([*many, {"type": "eta_below"}])
        assert str(error) == (
            "at most 32 triggers per task, got 34: keep the conditions the task needs "
            '(one trigger with "repeat": true fires each time its condition holds).'
        )
        assert (error.index, error.type, error.field) == (None, None, None)
        check_triggers(many[:32], trigger_rules(None))

    def test_triggers_larger_than_the_bound_together_are_refused(self):
        big = [{"type": "zone_entered", "zone": "z" * 4000, "n": i} for i in range(3)]
        error = refusal(big)
        assert str(error).startswith("the triggers take 12")
        assert str(error).endswith(
            " bytes as JSON, over the limit of 8192 for one task: send shorter values."
        )
        assert error.index is None
        check_triggers(big[:2], trigger_rules(None))
        error = refusal([{"type": "zone_entered", "zone": "z" * 9000}])
        assert "over the limit of 8192" in str(error)


class TestKnownTypes:
    def test_an_unknown_type_passes_whatever_it_carries(self):
        """A type the server does not know is ignored, never judged (§8.1)."""
        check_triggers([{"type": "warp", "seconds": "soon"}], trigger_rules(["zone_entered"]))

    def test_a_documented_type_the_server_does_not_know_is_not_judged(self):
        """eta_below not among the server's types is an unknown type: ignored, not refused."""
        check_triggers([{"type": "eta_below"}], trigger_rules(["zone_entered"]))

    def test_progress_above_is_always_checked(self):
        """The kit evaluates progress_above itself, so it is always known and checked."""
        assert refusal([{"type": "progress_above", "percent": "half"}], []).field == "percent"

    def test_rules_know_the_declared_names_and_progress_above(self):
        rules = trigger_rules(["eta_below", DOCK, "custom"])
        assert rules.known == {"eta_below", "dock_free", "custom", "progress_above"}
        assert set(rules.checked) == {"eta_below", "dock_free", "progress_above"}
        assert trigger_rules(None).known is None


class TestDeclaredTypes:
    """An author's TriggerType is checked the same way as the documented ones."""

    @pytest.mark.parametrize(
        ("trigger", "field", "expects"),
        [
            ({"bay": "north"}, "within_s", "is missing; it must be a finite number > 0 and <= 600"),
            ({"bay": "east", "within_s": 5}, "bay", 'must be one of "north", "south", got "east"'),
            ({"bay": "north", "within_s": 601}, "within_s", "<= 600, got 601"),
            ({"bay": "north", "within_s": 5, "count": 1.5}, "count", "a whole number >= 1"),
            ({"bay": "north", "within_s": 5, "count": 0}, "count", "got 0 (an integer)"),
        ],
    )
    def test_a_declared_field_is_checked(self, trigger, field, expects):
        error = refusal([{"type": "dock_free", **trigger}], [DOCK])
        assert (error.type, error.field) == ("dock_free", field)
        assert expects in str(error)

    def test_a_well_formed_declared_trigger_passes(self):
        """Optional fields may be left out; a whole float counts as a whole number."""
        rules = trigger_rules([DOCK])
        check_triggers([{"type": "dock_free", "bay": "south", "within_s": 600}], rules)
        check_triggers([{"type": "dock_free", "bay": "south", "within_s": 1, "count": 2.0}], rules)

    def test_a_declared_type_wins_over_the_documented_one(self):
        """An author may hold eta_below to other fields."""
        mine = TriggerType("eta_below", {"minutes": NumberField(gt=0)})
        rules = trigger_rules([mine])
        check_triggers([{"type": "eta_below", "minutes": 2}], rules)
        assert refusal([{"type": "eta_below", "seconds": 2}], [mine]).field == "minutes"

    def test_text_field_bounds_are_said(self):
        short = TriggerType("t", {"a": TextField(min_length=3, max_length=5)})
        assert "a string of 3 to 5 characters" in str(refusal([{"type": "t", "a": "ab"}], [short]))
        long = TriggerType("t", {"a": TextField(min_length=2)})
        assert "at least 2 characters" in str(refusal([{"type": "t", "a": "a"}], [long]))

    @pytest.mark.parametrize(
        ("build", "says"),
        [
            (lambda: TriggerType(""), "non-empty name"),
            (lambda: TriggerType("t", {"type": TextField()}), "a field every trigger has"),
            (lambda: TriggerType("t", {"repeat": TextField()}), "a field every trigger has"),
            (lambda: TriggerType("t", {"a": int}), "must be a NumberField or a TextField"),
        ],
    )
    def test_a_bad_declaration_is_a_configuration_error(self, build, says):
        with pytest.raises(ConfigurationError, match=says):
            build()

    @pytest.mark.parametrize(
        ("known", "says"),
        [
            ("eta_below", "wrap it in a list"),
            ([DOCK, DOCK], "declared twice"),
            ([""], "each entry is a type name or a TriggerType"),
            ([3], "each entry is a type name or a TriggerType"),
        ],
    )
    def test_bad_known_types_are_a_configuration_error(self, known, says):
        with pytest.raises(ConfigurationError, match=says):
            trigger_rules(known)

    def test_a_trigger_type_is_hashable_and_its_fields_read_only(self):
        """A TriggerType may sit in a set; its fields cannot be changed after the fact."""
        assert len({DOCK, DOCK}) == 1
        with pytest.raises(TypeError):
            DOCK.fields["bay"] = TextField()  # type: ignore[index]


def test_accept_keeps_copies_and_warns_about_unknown_types_only(caplog):
    caplog.set_level(logging.WARNING, "robot_mcp_kit.tasks")
    original = {"type": "eta_below", "seconds": 5}
    kept = accept_triggers("t-1", [original, {"type": "x"}], known=None)
    assert kept == [original, {"type": "x"}]
    assert kept[0] is not original
    assert caplog.records == []
    known = frozenset({"eta_below", "progress_above"})
    assert accept_triggers("t-1", [{"type": "x"}], known=known) == [{"type": "x"}]
    (record,) = caplog.records
    assert "unknown type" in record.getMessage()
    assert "progress_above" in record.getMessage()


def test_progress_triggers_due():
    triggers = [
        {"type": "progress_above", "percent": 50},
        {"type": "progress_above", "percent": 90},
        {"type": "eta_below", "seconds": 5},
        {"type": "progress_above", "percent": True},
    ]
    assert list(progress_triggers_due(triggers, {"percent": 60})) == [triggers[0]]
    assert list(progress_triggers_due(triggers, {"percent": 95})) == triggers[:2]
    assert list(progress_triggers_due(triggers, {"percent": "95"})) == []
    assert list(progress_triggers_due(triggers, {})) == []
    assert list(progress_triggers_due(triggers, {"percent": 10**400})) == []
    assert list(progress_triggers_due(triggers, {"percent": 10**300})) == triggers[:2]


def test_trigger_key_is_by_content():
    assert trigger_key({"a": 1, "type": "x"}) == trigger_key({"type": "x", "a": 1})
    assert trigger_key({"type": "x"}) != trigger_key({"type": "y"})
