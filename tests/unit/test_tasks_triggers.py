"""Triggers: at-most-once firing, repeat, automatic progress_above, unknown types."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from robot_mcp_kit import (
    InvalidArgument,
    InvalidTrigger,
    TaskContext,
    TaskManager,
    TextField,
    TriggerType,
)
from robot_mcp_kit.testing import RecordingPoster


@pytest.fixture
def poster() -> RecordingPoster:
    return RecordingPoster()


def fired(poster: RecordingPoster, task_id: str) -> list[dict[str, Any]]:
    return [e.payload for e in poster.events_for(task_id) if e.type == "trigger_fired"]


def body_with_eta_ticks(etas: list[float]):
    """A body that fires every eta_below trigger on each tick where the eta is below it."""

    async def body(ctx: TaskContext) -> dict[str, Any]:
        for eta in etas:
            await ctx.progress({"eta_s": eta})
            for trigger in ctx.triggers:
                if trigger.get("type") == "eta_below" and eta < trigger["seconds"]:
                    await ctx.fire_trigger(trigger, {"eta_s": eta})
        return {}

    return body


class TestFireTrigger:
    async def test_eta_below_fires_exactly_once(self, poster):
        """A trigger the body fires on every qualifying tick is emitted once."""
        manager = TaskManager("navigation", poster, known_trigger_types={"eta_below"})
        trigger = {"type": "eta_below", "seconds": 10}
        info = manager.start("navigate_to", body_with_eta_ticks([20, 12, 9.4, 5, 1, 0]), [trigger])
        await poster.wait_for(info.task_id, "task_done")
        assert fired(poster, info.task_id) == [{"trigger": trigger, "eta_s": 9.4}]
        types = poster.types_for(info.task_id)
        # Fired right after the progress event that crossed the threshold.
        assert types[:5] == ["progress", "progress", "progress", "trigger_fired", "progress"]
        assert [e.seq for e in poster.events_for(info.task_id)] == list(range(1, len(types) + 1))

    async def test_repeat_true_fires_every_time(self, poster):
        """A trigger with "repeat": true fires on every call."""
        manager = TaskManager("navigation", poster)
        trigger = {"type": "eta_below", "seconds": 10, "repeat": True}
        info = manager.start("navigate_to", body_with_eta_ticks([20, 9, 5, 1]), [trigger])
        await poster.wait_for(info.task_id, "task_done")
        assert [p["eta_s"] for p in fired(poster, info.task_id)] == [9, 5, 1]

    async def test_two_different_triggers_fire_independently(self, poster):
        """At-most-once is per trigger: each distinct trigger fires once."""
        manager = TaskManager("navigation", poster)
        near = {"type": "eta_below", "seconds": 10}
        nearer = {"type": "eta_below", "seconds": 3}
        info = manager.start("navigate_to", body_with_eta_ticks([12, 8, 6, 2, 1]), [near, nearer])
        await poster.wait_for(info.task_id, "task_done")
        assert [p["trigger"] for p in fired(poster, info.task_id)] == [near, nearer]

    async def test_trigger_identity_is_by_content(self, poster):
        """Firing an equal copy of an already-fired trigger does not fire it again."""
        manager = TaskManager("navigation", poster)

        async def body(ctx: TaskContext) -> dict[str, Any]:
            await ctx.fire_trigger({"type": "zone_entered", "zone": "lab"})
            await ctx.fire_trigger(dict(ctx.triggers[0]))
            return {}

        info = manager.start("t", body, [{"type": "zone_entered", "zone": "lab"}])
        await poster.wait_for(info.task_id, "task_done")
        assert len(fired(poster, info.task_id)) == 1

    async def test_extra_cannot_overwrite_the_trigger(self, poster):
        """The payload's "trigger" is always the trigger itself, even if extra has that key."""
        manager = TaskManager("navigation", poster)
        trigger = {"type": "zone_entered", "zone": "lab"}

        async def body(ctx: TaskContext) -> dict[str, Any]:
            await ctx.fire_trigger(trigger, {"trigger": "bogus", "zone_id": 7})
            return {}

        info = manager.start("t", body, [trigger])
        await poster.wait_for(info.task_id, "task_done")
        assert fired(poster, info.task_id) == [{"trigger": trigger, "zone_id": 7}]


class TestProgressAbove:
    async def test_progress_above_fires_automatically_and_once(self, poster):
        """progress() fires progress_above once, when percent first reaches the threshold."""
        manager = TaskManager("sleeper", poster)
        trigger = {"type": "progress_above", "percent": 50}

        async def body(ctx: TaskContext) -> dict[str, Any]:
            for percent in (20, 50, 70, 90):
                await ctx.progress({"percent": percent})
            return {}

        info = manager.start("t", body, [trigger])
        await poster.wait_for(info.task_id, "task_done")
        assert poster.types_for(info.task_id) == [
            "progress",
            "progress",
            "trigger_fired",
            "progress",
            "progress",
            "task_done",
        ]
        assert fired(poster, info.task_id) == [{"trigger": trigger, "percent": 50}]

    async def test_progress_above_with_repeat_fires_on_each_progress_above(self, poster):
        """progress_above with repeat: true fires on every progress at or above it."""
        manager = TaskManager("sleeper", poster)
        trigger = {"type": "progress_above", "percent": 50, "repeat": True}

        async def body(ctx: TaskContext) -> dict[str, Any]:
            for percent in (20, 50, 70):
                await ctx.progress({"percent": percent})
            return {}

        info = manager.start("t", body, [trigger])
        await poster.wait_for(info.task_id, "task_done")
        assert [p["percent"] for p in fired(poster, info.task_id)] == [50, 70]

    @pytest.mark.parametrize("payload", [{"percent": None}, {"eta_s": 3}])
    async def test_a_null_or_missing_percent_does_not_fire(self, poster, payload):
        """Only a numeric percent is evaluated against progress_above (any other percent,
        "90", True or NaN, never gets this far: ``progress`` refuses it, see
        test_task_payloads.py)."""
        manager = TaskManager("sleeper", poster)

        async def body(ctx: TaskContext) -> dict[str, Any]:
            await ctx.progress(payload)
            return {}

        info = manager.start("t", body, [{"type": "progress_above", "percent": 0}])
        await poster.wait_for(info.task_id, "task_done")
        assert fired(poster, info.task_id) == []

    async def test_other_trigger_types_are_not_evaluated_by_progress(self, poster):
        """progress() never fires triggers other than progress_above."""
        manager = TaskManager("sleeper", poster)

        async def body(ctx: TaskContext) -> dict[str, Any]:
            await ctx.progress({"percent": 100, "eta_s": 0})
            return {}

        triggers = [{"type": "eta_below", "seconds": 10}, {"type": "teleported", "percent": 1}]
        info = manager.start("t", body, triggers)
        await poster.wait_for(info.task_id, "task_done")
        assert fired(poster, info.task_id) == []


class TestUnknownTriggers:
    async def test_unknown_type_is_ignored_with_one_warning(self, poster, caplog):
        """An unknown trigger type logs one WARNING for the task and never fires."""
        manager = TaskManager("navigation", poster, known_trigger_types={"eta_below"})
        unknown = {"type": "teleported", "percent": 10}

        async def body(ctx: TaskContext) -> dict[str, Any]:
            for percent in (20, 60, 100):
                await ctx.progress({"percent": percent})
            return {}

        with caplog.at_level(logging.WARNING, logger="robot_mcp_kit.tasks"):
            info = manager.start("navigate_to", body, [unknown])
            await poster.wait_for(info.task_id, "task_done")
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1
        assert "teleported" in warnings[0].getMessage()
        assert info.task_id in warnings[0].getMessage()
        assert fired(poster, info.task_id) == []
        assert info.triggers == [unknown]

    async def test_known_types_and_progress_above_do_not_warn(self, poster, caplog):
        """Declared types and progress_above (always known) start without warnings."""
        manager = TaskManager("navigation", poster, known_trigger_types={"eta_below"})

        async def body(ctx: TaskContext) -> dict[str, Any]:
            return {}

        with caplog.at_level(logging.WARNING, logger="robot_mcp_kit.tasks"):
            info = manager.start(
                "t",
                body,
                [{"type": "eta_below", "seconds": 3}, {"type": "progress_above", "percent": 5}],
            )
            await poster.wait_for(info.task_id, "task_done")
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []

    async def test_per_start_known_types_override_the_managers(self, poster, caplog):
        """known_trigger_types passed to start() wins over the manager's."""
        manager = TaskManager("navigation", poster, known_trigger_types={"eta_below"})

        async def body(ctx: TaskContext) -> dict[str, Any]:
            return {}

        with caplog.at_level(logging.WARNING, logger="robot_mcp_kit.tasks"):
            info = manager.start(
                "t",
                body,
                [{"type": "zone_entered", "zone": "lab"}, {"type": "eta_below", "seconds": 1}],
                known_trigger_types={"zone_entered"},
            )
            await poster.wait_for(info.task_id, "task_done")
        messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(messages) == 1
        assert "'eta_below'" in messages[0]

    async def test_without_declared_types_no_type_name_is_judged(self, poster, caplog):
        """With no known_trigger_types any type name passes without a warning."""
        manager = TaskManager("navigation", poster)

        async def body(ctx: TaskContext) -> dict[str, Any]:
            return {}

        with caplog.at_level(logging.WARNING, logger="robot_mcp_kit.tasks"):
            info = manager.start("t", body, [{"type": "anything_goes"}, {"type": "x", "n": 1}])
            await poster.wait_for(info.task_id, "task_done")
        assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
        assert info.triggers == [{"type": "anything_goes"}, {"type": "x", "n": 1}]


class TestMalformedTriggers:
    """Issue 32, finding 5: a malformed trigger refuses the start; nothing runs or is sent."""

    @pytest.mark.parametrize("known", [None, {"eta_below"}])
    @pytest.mark.parametrize(
        ("trigger", "field"),
        [
            ({"type": "eta_below"}, "seconds"),
            ({"type": "eta_below", "seconds": "10"}, "seconds"),
            ({"type": "progress_above", "percent": "lots"}, "percent"),
            ({"seconds": 3}, "type"),
        ],
    )
    async def test_start_refuses_and_creates_nothing(self, poster, known, trigger, field):
        """InvalidTrigger (an InvalidArgument, a ValueError) names the trigger; no task."""
        manager = TaskManager("navigation", poster, known_trigger_types=known)
        ran = False

        async def body(ctx: TaskContext) -> dict[str, Any]:
            nonlocal ran
            ran = True
            return {}

        with pytest.raises(InvalidTrigger) as caught:
            manager.start("navigate_to", body, [{"type": "x"}, trigger])
        assert isinstance(caught.value, InvalidArgument)
        assert isinstance(caught.value, ValueError)
        assert (caught.value.index, caught.value.field) == (1, field)
        assert str(caught.value).startswith("trigger 1 ")
        await asyncio.sleep(0)
        assert manager.list() == []
        assert poster.events == []
        assert not ran
        await manager.aclose()

    @pytest.mark.parametrize(
        ("trigger", "field"),
        [
            ({"type": "eta_below", "seconds": 10**400}, "seconds"),
            ({"type": "progress_above", "percent": -(10**400)}, "percent"),
            ({"type": "eta_below", "seconds": float("nan")}, "seconds"),
        ],
    )
    async def test_a_number_no_json_reader_holds_is_refused_not_crashed(
        self, poster, trigger, field
    ):
        """A whole number beyond a double's range, or NaN, in a declared field: refused
        naming it (an OverflowError escaped before, a crash on every framework)."""
        manager = TaskManager("navigation", poster, known_trigger_types={"eta_below"})

        async def body(ctx: TaskContext) -> dict[str, Any]:
            return {}

        with pytest.raises(InvalidTrigger) as caught:
            manager.start("navigate_to", body, [trigger])
        assert (caught.value.index, caught.value.field) == (0, field)
        with pytest.raises(InvalidArgument, match="est_duration_s must be a finite number"):
            manager.start("navigate_to", body, est_duration_s=10**400)
        assert manager.list() == []
        await manager.aclose()

    async def test_a_progress_percent_no_json_reader_holds_fires_nothing(self, poster):
        """A body reporting a huge whole percent: no trigger is due, the task goes on."""
        manager = TaskManager("navigation", poster)

        async def body(ctx: TaskContext) -> dict[str, Any]:
            await ctx.progress({"percent": 10**400})
            await ctx.progress({"percent": 100})
            return {}

        info = manager.start("t", body, [{"type": "progress_above", "percent": 50}])
        await poster.wait_for(info.task_id, "task_done")
        assert poster.types_for(info.task_id) == [
            "progress",
            "progress",
            "trigger_fired",
            "task_done",
        ]
        await manager.aclose()

    async def test_too_many_triggers_start_nothing(self, poster):
        """2,500 repeating progress_above triggers would fire 2,500 events per progress
        call; past 32 triggers the start is refused and nothing is sent."""
        manager = TaskManager("navigation", poster)

        async def body(ctx: TaskContext) -> dict[str, Any]:
            for percent in (25, 50, 75, 100):
                await ctx.progress({"percent": percent})
            return {}

        many = [
            {"type": "progress_above", "percent": 0, "n": i, "repeat": True} for i in range(2500)
        ]
        with pytest.raises(InvalidTrigger, match="at most 32 triggers per task, got 2500"):
            manager.start("t", body, many)
        await asyncio.sleep(0)
        assert (manager.list(), poster.events) == ([], [])
        info = manager.start("t", body, many[:32])
        await poster.wait_for(info.task_id, "task_done")
        assert len(fired(poster, info.task_id)) == 4 * 32
        await manager.aclose()

    async def test_a_declared_type_is_checked_per_start_too(self, poster):
        """known_trigger_types given to start() may declare fields as the manager's can."""
        manager = TaskManager("navigation", poster)
        dock = TriggerType("dock_free", {"bay": TextField()})

        async def body(ctx: TaskContext) -> dict[str, Any]:
            return {"bay": ctx.triggers[0]["bay"]}

        with pytest.raises(InvalidTrigger, match='"bay" is missing'):
            manager.start("t", body, [{"type": "dock_free"}], known_trigger_types=[dock])
        info = manager.start(
            "t", body, [{"type": "dock_free", "bay": "b2"}], known_trigger_types=[dock]
        )
        done = await poster.wait_for(info.task_id, "task_done")
        assert done.payload == {"result": {"bay": "b2"}}
        await manager.aclose()
