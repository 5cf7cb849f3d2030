"""TaskManager bookkeeping: retention ring, id collisions, get/list, repr."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import robot_mcp_kit.tasks as tasks_module
from robot_mcp_kit import TaskContext, TaskManager
from robot_mcp_kit.tasks import EventSink
from robot_mcp_kit.testing import RecordingPoster


@pytest.fixture
def poster() -> RecordingPoster:
    return RecordingPoster()


async def quick(ctx: TaskContext) -> dict[str, Any]:
    return {"task": ctx.task_id}


async def run_to_done(manager: TaskManager, poster: RecordingPoster) -> str:
    info = manager.start("t", quick)
    await poster.wait_for(info.task_id, "task_done")
    return info.task_id


class TestRetention:
    async def test_oldest_finished_tasks_are_forgotten_beyond_the_ring(self, poster):
        """With max_finished_retained=2 only the two most recently finished remain."""
        manager = TaskManager("sleeper", poster, max_finished_retained=2)
        ids = [await run_to_done(manager, poster) for _ in range(4)]
        assert [manager.get(i) is not None for i in ids] == [False, False, True, True]
        assert [t.task_id for t in manager.list()] == ids[2:]

    async def test_running_tasks_are_never_evicted(self, poster):
        """A long-running task survives any number of finished tasks passing through."""
        manager = TaskManager("sleeper", poster, max_finished_retained=1)
        gate = asyncio.Event()

        async def slow(ctx: TaskContext) -> dict[str, Any]:
            await gate.wait()
            return {}

        long_running = manager.start("t", slow)
        ids = [await run_to_done(manager, poster) for _ in range(5)]
        assert manager.get(long_running.task_id) is not None
        assert [t.task_id for t in manager.list()] == [long_running.task_id, ids[-1]]
        gate.set()
        await poster.wait_for(long_running.task_id, "task_done")
        # Now it is the most recently finished one, and the ring holds only one.
        assert [t.task_id for t in manager.list()] == [long_running.task_id]

    async def test_zero_retention_forgets_tasks_as_soon_as_they_finish(self, poster):
        """max_finished_retained=0: a finished task is immediately not found."""
        manager = TaskManager("sleeper", poster, max_finished_retained=0)
        task_id = await run_to_done(manager, poster)
        assert manager.get(task_id) is None
        assert manager.list() == []

    async def test_zero_retention_keeps_no_events_of_forgotten_tasks(self, poster):
        """max_finished_retained=0: the terminal event of an evicted task is sent but not
        retained, so a stream of short tasks holds no memory of them."""
        manager = TaskManager("sleeper", poster, max_finished_retained=0)
        ids = [await run_to_done(manager, poster) for _ in range(20)]
        assert [e.type for e in poster.events_for(ids[-1])][-1] == "task_done"
        assert all(manager.events(i) is None for i in ids)
        assert (len(manager._retention), manager._retention.tasks()) == (0, 0)


class TestTaskIds:
    async def test_colliding_id_is_redrawn_not_overwritten(self, poster):
        """When the generator repeats an id in use, the manager draws again."""
        drawn = iter(["slee-aaaaaa", "slee-aaaaaa", "slee-aaaaaa", "slee-bbbbbb"])
        manager = TaskManager("sleeper", poster, id_factory=lambda server_name: next(drawn))
        gate = asyncio.Event()

        async def slow(ctx: TaskContext) -> dict[str, Any]:
            await gate.wait()
            return {"id": ctx.task_id}

        first = manager.start("first", slow)
        second = manager.start("second", slow)
        assert (first.task_id, second.task_id) == ("slee-aaaaaa", "slee-bbbbbb")
        assert manager.get("slee-aaaaaa").tool == "first"  # type: ignore[union-attr]
        assert manager.get("slee-bbbbbb").tool == "second"  # type: ignore[union-attr]
        gate.set()
        done = await poster.wait_for("slee-aaaaaa", "task_done")
        assert done.payload == {"result": {"id": "slee-aaaaaa"}}
        await manager.aclose()

    async def test_a_generator_stuck_on_one_id_raises_instead_of_looping(self, poster):
        """If no fresh id can be drawn, start() fails loudly rather than overwrite."""
        manager = TaskManager("sleeper", poster, id_factory=lambda server_name: "slee-aaaaaa")
        gate = asyncio.Event()

        async def slow(ctx: TaskContext) -> dict[str, Any]:
            await gate.wait()
            return {}

        manager.start("first", slow)
        with pytest.raises(RuntimeError, match="unique task id"):
            manager.start("second", slow)
        assert manager.get("slee-aaaaaa").tool == "first"  # type: ignore[union-attr]
        await manager.aclose()

    def test_short_server_names_are_used_whole(self):
        """A server name shorter than four characters is used as-is."""
        assert tasks_module.new_task_id("io").startswith("io-")
        assert tasks_module.new_task_id("perception").startswith("perc-")


class TestQueries:
    async def test_list_filters_by_state_oldest_first(self, poster):
        """list(states=...) returns the tasks in those states in creation order."""
        manager = TaskManager("sleeper", poster)
        gate = asyncio.Event()

        async def slow(ctx: TaskContext) -> dict[str, Any]:
            await gate.wait()
            return {}

        done_id = await run_to_done(manager, poster)
        running_a = manager.start("t", slow).task_id
        running_b = manager.start("t", slow).task_id
        assert [t.task_id for t in manager.list()] == [done_id, running_a, running_b]
        assert [t.task_id for t in manager.list(["running"])] == [running_a, running_b]
        assert [t.task_id for t in manager.list(["succeeded", "failed"])] == [done_id]
        assert manager.list([]) == []
        await manager.aclose()
        assert [t.state for t in manager.list(["cancelled"])] == ["cancelled", "cancelled"]

    async def test_list_rejects_unknown_states(self, poster):
        """An unknown state name raises ValueError naming it and the valid ones."""
        manager = TaskManager("sleeper", poster)
        with pytest.raises(ValueError, match=r"'done'.*valid states"):
            manager.list(["done"])  # type: ignore[list-item]

    async def test_get_unknown_returns_none(self, poster):
        """get() of an id never issued is None."""
        assert TaskManager("sleeper", poster).get("slee-ffffff") is None

    async def test_snapshots_do_not_alias_internal_state(self, poster):
        """Mutating a returned TaskInfo does not change what the manager reports."""
        manager = TaskManager("sleeper", poster)
        trigger = {"type": "progress_above", "percent": 99}
        info = manager.start("t", quick, [trigger])
        trigger["percent"] = 1
        info.triggers[0]["percent"] = 2
        await poster.wait_for(info.task_id, "task_done")
        final = manager.get(info.task_id)
        assert final is not None
        assert final.triggers == [{"type": "progress_above", "percent": 99}]
        assert final.result is not None
        final.result["tampered"] = True
        assert manager.get(info.task_id).result == {"task": info.task_id}  # type: ignore[union-attr]

    async def test_task_info_serializes_to_the_wire_shape(self, poster):
        """TaskInfo JSON has the §4.1 fields and Z-suffixed millisecond timestamps."""
        manager = TaskManager("sleeper", poster)
        info = manager.start("t", quick, est_duration_s=2.5)
        await poster.wait_for(info.task_id, "task_done")
        data = manager.get(info.task_id).model_dump(mode="json")  # type: ignore[union-attr]
        assert set(data) == {
            "task_id",
            "server",
            "tool",
            "state",
            "created_at",
            "updated_at",
            "triggers",
            "est_duration_s",
            "progress",
            "result",
            "failure",
        }
        assert data["created_at"].endswith("Z")
        assert len(data["created_at"]) == len("2026-06-12T14:03:00.123Z")
        assert data["est_duration_s"] == 2.5


class TestRepr:
    async def test_repr_shows_live_counters(self, poster):
        """repr() names the server and counts running and finished tasks."""
        manager = TaskManager("sleeper", poster)
        gate = asyncio.Event()

        async def slow(ctx: TaskContext) -> dict[str, Any]:
            await gate.wait()
            return {}

        await run_to_done(manager, poster)
        manager.start("t", slow)
        text = repr(manager)
        assert "server='sleeper'" in text
        assert "running=1" in text
        assert "started=2" in text
        assert "succeeded=1" in text
        await manager.aclose()
        text = repr(manager)
        assert "running=0" in text
        assert "cancelled=1" in text
        assert "closed" in text


def test_recording_poster_satisfies_the_event_sink_protocol():
    """The testing recorder is usable wherever an EventSink is expected."""
    assert isinstance(RecordingPoster(), EventSink)


async def test_recording_poster_wait_for_times_out_with_what_it_saw():
    """wait_for() raises TimeoutError listing the task's events when none match."""
    poster = RecordingPoster()
    manager = TaskManager("sleeper", poster)
    info = manager.start("t", quick)
    await poster.wait_for(info.task_id, "task_done")
    with pytest.raises(TimeoutError, match=r"task_failed.*\['task_done'\]"):
        await poster.wait_for(info.task_id, "task_failed", timeout_s=0.01)
    assert poster.waiting == 0  # the timed-out wait left nothing behind
