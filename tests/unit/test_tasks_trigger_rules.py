"""The trigger rules as functions: accept_triggers, progress_triggers_due, trigger_key."""

from __future__ import annotations

import logging

from robot_mcp_kit._triggers import accept_triggers, progress_triggers_due, trigger_key


def test_accept_keeps_dict_copies_and_drops_the_rest(caplog):
    caplog.set_level(logging.WARNING, "robot_mcp_kit.tasks")
    original = {"type": "eta_below", "seconds": 5}
    kept = accept_triggers("t-1", [original, "nope", {"type": 3}], known=None)  # type: ignore[list-item]
    assert kept == [original, {"type": 3}]
    assert kept[0] is not original
    reasons = [r.getMessage() for r in caplog.records]
    assert len(reasons) == 2
    assert all("trigger_ignored" in m for m in reasons)


def test_unknown_types_are_kept_and_warned_only_when_types_are_known(caplog):
    caplog.set_level(logging.WARNING, "robot_mcp_kit.tasks")
    assert accept_triggers("t-1", [{"type": "x"}], known=None) == [{"type": "x"}]
    assert caplog.records == []
    assert accept_triggers("t-1", [{"type": "x"}], known=frozenset({"y"})) == [{"type": "x"}]
    assert "unknown type" in caplog.records[0].getMessage()
    assert "progress_above" in caplog.records[0].getMessage()


def test_progress_above_without_a_number_is_warned(caplog):
    caplog.set_level(logging.WARNING, "robot_mcp_kit.tasks")
    accept_triggers("t-1", [{"type": "progress_above", "percent": "half"}], known=None)
    assert "'percent' must be a number" in caplog.records[0].getMessage()


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


def test_trigger_key_is_by_content():
    assert trigger_key({"a": 1, "type": "x"}) == trigger_key({"type": "x", "a": 1})
    assert trigger_key({"type": "x"}) != trigger_key({"type": "y"})
