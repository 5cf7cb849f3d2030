"""TaskManager lifecycle: start, progress, success, structured and unexpected failures."""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any

import pytest

from robot_mcp_kit import TaskContext, TaskError, TaskInfo, TaskManager


class TestStart:
    async def test_start_returns_running_info_before_the_body_runs(self, manager, poster):
        """start() answers at once with a running TaskInfo; the body has not run yet."""
        ran: list[str] = []

        async def body(ctx: TaskContext) -> dict[str, Any]:
            ran.append(ctx.task_id)
            return {}

        info = manager.start("sleep_task", body, est_duration_s=3.0)
        assert isinstance(info, TaskInfo)
        assert info.state == "running"
        assert info.server == "sleeper"
        assert info.tool == "sleep_task"
        assert info.est_duration_s == 3.0
        assert info.created_at == info.updated_at
        assert ran == []
        await poster.wait_for(info.task_id, "task_done")
        assert ran == [info.task_id]

    async def test_task_id_is_server_short_name_and_six_hex(self, manager):
        """Task ids look like slee-7f3a2b (first four characters of the server name)."""

        async def body(ctx: TaskContext) -> dict[str, Any]:
            return {}

        ids = {manager.start("t", body).task_id for _ in range(20)}
        assert len(ids) == 20
        assert all(re.fullmatch(r"slee-[0-9a-f]{6}", i) for i in ids)

    def test_start_without_a_running_loop_raises_a_clear_error(self, poster):
        """Calling start() outside a running event loop raises RuntimeError naming the cause."""

        async def body(ctx: TaskContext) -> dict[str, Any]:
            return {}

        manager = TaskManager("sleeper", poster)
        with pytest.raises(RuntimeError, match="asyncio event loop, and this thread has none"):
            manager.start("t", body)

    @pytest.mark.parametrize("kwargs", [{"max_finished_retained": -1}, {"cancel_grace_s": -1}])
    def test_invalid_manager_settings_are_rejected(self, poster, kwargs):
        """Negative retention or grace values fail at construction."""
        with pytest.raises(ValueError, match=next(iter(kwargs))):
            TaskManager("sleeper", poster, **kwargs)


class TestSuccess:
    async def test_progress_events_in_order_then_task_done_with_result(self, manager, poster):
        """Progress events arrive in order with seq 1, 2, 3, then task_done carries the result."""

        async def body(ctx: TaskContext) -> dict[str, Any]:
            for i in range(3):
                await ctx.progress({"step": i, "percent": 25 * (i + 1)})
            return {"slept_s": 3}

        info = manager.start("sleep_task", body)
        done = await poster.wait_for(info.task_id, "task_done")
        events = poster.events_for(info.task_id)
        assert [e.type for e in events] == ["progress"] * 3 + ["task_done"]
        assert [e.seq for e in events] == [1, 2, 3, 4]
        assert [e.payload.get("step") for e in events[:3]] == [0, 1, 2]
        assert done.payload == {"result": {"slept_s": 3}}
        assert all(e.server == "sleeper" and e.tool == "sleep_task" for e in events)
        assert len({e.event_id for e in events}) == 4

        final = manager.get(info.task_id)
        assert final is not None
        assert final.state == "succeeded"
        assert final.result == {"slept_s": 3}
        assert final.progress == {"step": 2, "percent": 75}
        assert final.failure is None
        assert final.updated_at >= final.created_at

    async def test_watch_events_are_emitted_with_the_same_envelope(self, manager, poster):
        """ctx.emit() produces watch_event events that share the task's seq counter."""

        async def body(ctx: TaskContext) -> dict[str, Any]:
            await ctx.emit({"seen": "person"})
            await ctx.progress({"percent": 10})
            await ctx.emit({"seen": "dog"})
            return {}

        info = manager.start("watch_for", body)
        await poster.wait_for(info.task_id, "task_done")
        events = poster.events_for(info.task_id)
        assert [(e.type, e.seq) for e in events] == [
            ("watch_event", 1),
            ("progress", 2),
            ("watch_event", 3),
            ("task_done", 4),
        ]
        assert events[2].payload == {"seen": "dog"}

    async def test_seq_is_per_task_and_gap_free_under_concurrency(self, manager, poster):
        """Many tasks reporting at once each see their own seq 1..n, in order."""

        async def body(ctx: TaskContext) -> dict[str, Any]:
            for i in range(10):
                await ctx.progress({"i": i})
                await asyncio.sleep(0)
            return {}

        infos = [manager.start("t", body) for _ in range(8)]
        for info in infos:
            await poster.wait_for(info.task_id, "task_done")
        for info in infos:
            events = poster.events_for(info.task_id)
            assert [e.seq for e in events] == list(range(1, 12))
            assert [e.payload.get("i") for e in events[:10]] == list(range(10))

    async def test_updated_at_follows_the_injected_clock(self, poster):
        """created_at is the start time; updated_at moves with each event and the finish."""
        from datetime import UTC, datetime, timedelta

        base = datetime(2026, 6, 12, 14, 0, tzinfo=UTC)
        ticks = iter(base + timedelta(seconds=s) for s in range(100))
        manager = TaskManager("sleeper", poster, clock=lambda: next(ticks))
        gate = asyncio.Event()

        async def body(ctx: TaskContext) -> dict[str, Any]:
            await ctx.progress({"percent": 50})
            await gate.wait()
            return {}

        info = manager.start("t", body)
        assert info.created_at == base
        first = await poster.wait_for(info.task_id, "progress")
        assert first.ts == base + timedelta(seconds=1)
        running = manager.get(info.task_id)
        assert running is not None
        assert running.updated_at == base + timedelta(seconds=1)
        gate.set()
        done = await poster.wait_for(info.task_id, "task_done")
        final = manager.get(info.task_id)
        assert final is not None
        assert final.created_at == base
        assert final.updated_at == done.ts
        assert final.updated_at > running.updated_at


class TestFailure:
    async def test_task_error_fails_the_task_with_a_structured_failure(self, manager, poster):
        """A TaskError becomes state failed and a task_failed event carrying the TaskFailure."""

        async def body(ctx: TaskContext) -> dict[str, Any]:
            await ctx.progress({"percent": 40})
            raise TaskError(
                "DOOR_CLOSED",
                "The door to the mail room is closed.",
                recoverable=True,
                suggestions=["ask_reception"],
            )

        info = manager.start("navigate_to", body)
        failed = await poster.wait_for(info.task_id, "task_failed")
        assert failed.seq == 2
        assert failed.payload == {
            "error_code": "DOOR_CLOSED",
            "message": "The door to the mail room is closed.",
            "recoverable": True,
            "suggestions": ["ask_reception"],
        }
        final = manager.get(info.task_id)
        assert final is not None
        assert final.state == "failed"
        assert final.failure is not None
        assert final.failure.error_code == "DOOR_CLOSED"
        assert final.failure.suggestions == ["ask_reception"]
        assert final.result is None
        assert poster.types_for(info.task_id) == ["progress", "task_failed"]

    async def test_unexpected_exception_fails_as_internal_and_is_logged(
        self, manager, poster, caplog
    ):
        """Any other exception: failed, INTERNAL, message str(exc), not recoverable, traceback."""

        async def body(ctx: TaskContext) -> dict[str, Any]:
            raise ValueError("lidar returned NaN")

        with caplog.at_level(logging.ERROR, logger="robot_mcp_kit.tasks"):
            info = manager.start("navigate_to", body)
            failed = await poster.wait_for(info.task_id, "task_failed")
        assert failed.payload == {
            "error_code": "INTERNAL",
            "message": "lidar returned NaN",
            "recoverable": False,
            "suggestions": [],
        }
        final = manager.get(info.task_id)
        assert final is not None
        assert final.state == "failed"
        records = [r for r in caplog.records if r.name == "robot_mcp_kit.tasks"]
        assert any(r.exc_info and r.exc_info[0] is ValueError for r in records)
        assert any(info.task_id in r.getMessage() for r in records)

    async def test_body_returning_a_non_dict_fails_as_internal(self, manager, poster):
        """A body returning something other than a dict fails INTERNAL with a clear message."""

        async def body(ctx: TaskContext) -> Any:
            return ["not", "a", "dict"]

        info = manager.start("t", body)
        failed = await poster.wait_for(info.task_id, "task_failed")
        assert failed.payload["error_code"] == "INTERNAL"
        assert failed.payload["recoverable"] is False
        assert "must be a dict" in failed.payload["message"]
        assert "list" in failed.payload["message"]

    async def test_nothing_is_emitted_after_the_terminal_event(self, manager, poster, caplog):
        """A context used after its task finished emits nothing and logs a warning."""
        kept: list[TaskContext] = []

        async def body(ctx: TaskContext) -> dict[str, Any]:
            kept.append(ctx)
            return {"ok": True}

        info = manager.start("t", body)
        await poster.wait_for(info.task_id, "task_done")
        with caplog.at_level(logging.WARNING, logger="robot_mcp_kit.tasks"):
            await kept[0].progress({"percent": 100})
            await kept[0].emit({"late": True})
        assert poster.types_for(info.task_id) == ["task_done"]
        assert sum("late" in r.getMessage() for r in caplog.records) == 2
        final = manager.get(info.task_id)
        assert final is not None
        assert final.progress is None

    async def test_a_raising_sink_does_not_break_the_task(self, caplog):
        """If the sink raises, the error is logged and the task still finishes."""

        class BrokenSink:
            async def post(self, event):
                raise OSError("disk full")

        manager = TaskManager("sleeper", BrokenSink())
        finished = asyncio.Event()

        async def body(ctx: TaskContext) -> dict[str, Any]:
            await ctx.progress({"percent": 1})
            finished.set()
            return {"ok": True}

        with caplog.at_level(logging.ERROR, logger="robot_mcp_kit.tasks"):
            info = manager.start("t", body)
            await finished.wait()
            await manager.aclose()
        final = manager.get(info.task_id)
        assert final is not None
        assert final.state == "succeeded"
        assert any("event_sink_failed" in r.getMessage() for r in caplog.records)

    @pytest.mark.parametrize("payload", [["x"], "percent=5", None])
    async def test_non_dict_reports_raise_type_error_in_the_body(self, manager, poster, payload):
        """progress()/emit() with a non-dict payload raise TypeError into the body."""
        caught: list[str] = []

        async def body(ctx: TaskContext) -> dict[str, Any]:
            for report in (ctx.progress, ctx.emit):
                try:
                    await report(payload)
                except TypeError as exc:
                    caught.append(str(exc))
            return {}

        info = manager.start("t", body)
        await poster.wait_for(info.task_id, "task_done")
        assert len(caught) == 2
        assert all("must be a dict" in c for c in caught)
