"""Cancellation: cancel(), idempotence, terminal states, grace period, aclose()."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from robot_mcp_kit import TaskContext, TaskError, TaskManager


def blocking_body(seen: list[str], started: asyncio.Event):
    """A body that reports once, then waits forever, recording the CancelledError it gets."""

    async def body(ctx: TaskContext) -> dict[str, Any]:
        await ctx.progress({"percent": 10})
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return {}

    return body


class TestCancel:
    async def test_cancel_marks_cancelled_and_emits_no_terminal_event(self, manager, poster):
        """cancel() cancels the body (which sees CancelledError); no task_failed/task_done."""
        seen: list[str] = []
        started = asyncio.Event()
        info = manager.start("t", blocking_body(seen, started))
        await started.wait()

        cancelled = await manager.cancel(info.task_id)
        assert cancelled is not None
        assert cancelled.state == "cancelled"
        assert seen == ["cancelled"]
        assert poster.types_for(info.task_id) == ["progress"]
        final = manager.get(info.task_id)
        assert final is not None
        assert final.state == "cancelled"
        assert final.failure is None
        assert final.result is None
        assert final.progress == {"percent": 10}

    async def test_cancel_is_idempotent(self, manager, poster):
        """Cancelling twice answers cancelled both times and changes nothing."""
        started = asyncio.Event()
        info = manager.start("t", blocking_body([], started))
        await started.wait()
        first = await manager.cancel(info.task_id)
        second = await manager.cancel(info.task_id)
        assert first is not None
        assert second is not None
        assert first.state == second.state == "cancelled"
        assert second.updated_at == first.updated_at
        assert poster.types_for(info.task_id) == ["progress"]

    async def test_concurrent_cancels_agree(self, manager):
        """Two cancel() calls in flight at once both answer cancelled."""
        started = asyncio.Event()
        info = manager.start("t", blocking_body([], started))
        await started.wait()
        a, b = await asyncio.gather(manager.cancel(info.task_id), manager.cancel(info.task_id))
        assert a is not None
        assert b is not None
        assert a.state == b.state == "cancelled"

    async def test_cancel_of_a_succeeded_task_returns_it_unchanged(self, manager, poster):
        """A finished task keeps its terminal state; cancel() just reports it."""

        async def body(ctx: TaskContext) -> dict[str, Any]:
            return {"ok": True}

        info = manager.start("t", body)
        await poster.wait_for(info.task_id, "task_done")
        before = manager.get(info.task_id)
        after = await manager.cancel(info.task_id)
        assert after == before
        assert after is not None
        assert after.state == "succeeded"
        assert after.result == {"ok": True}

    async def test_cancel_of_a_failed_task_returns_it_unchanged(self, manager, poster):
        """A failed task stays failed with its failure when cancelled."""

        async def body(ctx: TaskContext) -> dict[str, Any]:
            raise TaskError("TIMEOUT", "Took too long.")

        info = manager.start("t", body)
        await poster.wait_for(info.task_id, "task_failed")
        after = await manager.cancel(info.task_id)
        assert after is not None
        assert after.state == "failed"
        assert after.failure is not None
        assert after.failure.error_code == "TIMEOUT"

    async def test_cancel_of_an_unknown_task_returns_none(self, manager):
        """An unknown id is reported as None (the MCP tool turns it into not_found)."""
        assert await manager.cancel("slee-000000") is None

    async def test_cancel_before_the_body_ever_ran(self, manager, poster):
        """A task cancelled right after start() never runs its body and ends cancelled."""
        ran: list[bool] = []

        async def body(ctx: TaskContext) -> dict[str, Any]:
            ran.append(True)
            return {}

        info = manager.start("t", body)
        cancelled = await manager.cancel(info.task_id)
        assert cancelled is not None
        assert cancelled.state == "cancelled"
        assert ran == []
        assert poster.types_for(info.task_id) == []

    async def test_raise_if_cancelled_raises_once_cancel_was_asked(self, manager, poster):
        """raise_if_cancelled() is a checkpoint that raises CancelledError after cancel()."""
        checkpoints: list[str] = []
        started = asyncio.Event()

        async def body(ctx: TaskContext) -> dict[str, Any]:
            ctx.raise_if_cancelled()
            checkpoints.append("passed while running")
            started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                checkpoints.append(f"cancel_requested={ctx.cancel_requested}")
            try:
                ctx.raise_if_cancelled()
            except asyncio.CancelledError:
                checkpoints.append("raised")
                raise
            return {}

        info = manager.start("t", body)
        await started.wait()
        final = await manager.cancel(info.task_id)
        assert final is not None
        assert final.state == "cancelled"
        assert checkpoints == ["passed while running", "cancel_requested=True", "raised"]

    async def test_body_that_swallows_cancellation_still_ends_cancelled(
        self, manager, poster, caplog
    ):
        """A body that catches CancelledError and returns is recorded cancelled, no task_done."""
        started = asyncio.Event()

        async def body(ctx: TaskContext) -> dict[str, Any]:
            started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                return {"swallowed": True}
            return {}

        with caplog.at_level(logging.WARNING, logger="robot_mcp_kit.tasks"):
            info = manager.start("t", body)
            await started.wait()
            final = await manager.cancel(info.task_id)
        assert final is not None
        assert final.state == "cancelled"
        assert final.result is None
        assert poster.types_for(info.task_id) == []
        assert any("returned normally" in r.getMessage() for r in caplog.records)

    async def test_body_raising_task_error_while_cancelling_emits_no_task_failed(
        self, manager, poster
    ):
        """A body whose cleanup raises TaskError after cancel() is cancelled, not failed."""
        started = asyncio.Event()

        async def body(ctx: TaskContext) -> dict[str, Any]:
            started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                raise TaskError("ABORTED", "Stopped halfway.") from None
            return {}

        info = manager.start("t", body)
        await started.wait()
        final = await manager.cancel(info.task_id)
        assert final is not None
        assert final.state == "cancelled"
        assert "task_failed" not in poster.types_for(info.task_id)

    async def test_body_outliving_the_grace_period_is_marked_cancelled(self, poster, caplog):
        """cancel() waits cancel_grace_s, then records cancelled; the late body emits nothing."""
        manager = TaskManager("sleeper", poster, cancel_grace_s=0.05)
        started = asyncio.Event()
        release = asyncio.Event()
        kept: list[TaskContext] = []

        async def stubborn(ctx: TaskContext) -> dict[str, Any]:
            kept.append(ctx)
            started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                await release.wait()  # ignores the cancellation for a while
            return {"late": True}

        with caplog.at_level(logging.WARNING, logger="robot_mcp_kit.tasks"):
            info = manager.start("t", stubborn)
            await started.wait()
            final = await manager.cancel(info.task_id)
            assert final is not None
            assert final.state == "cancelled"
            assert any("task_did_not_unwind" in r.getMessage() for r in caplog.records)
            release.set()
            await kept[0].progress({"percent": 99})  # late report: dropped
            for _ in range(5):
                await asyncio.sleep(0)
        after = manager.get(info.task_id)
        assert after is not None
        assert after.state == "cancelled"
        assert after.result is None
        assert poster.types_for(info.task_id) == []
        await manager.aclose()


class TestAclose:
    async def test_aclose_cancels_every_running_task(self, poster):
        """aclose() cancels all running tasks, leaves finished ones alone, and is idempotent."""
        manager = TaskManager("sleeper", poster)
        seen: list[str] = []
        started = [asyncio.Event() for _ in range(3)]
        running = [manager.start("t", blocking_body(seen, s)) for s in started]

        async def quick(ctx: TaskContext) -> dict[str, Any]:
            return {}

        done = manager.start("t", quick)
        await poster.wait_for(done.task_id, "task_done")
        for s in started:
            await s.wait()

        await manager.aclose()
        await manager.aclose()
        assert seen == ["cancelled"] * 3
        assert [manager.get(i.task_id).state for i in running] == ["cancelled"] * 3  # type: ignore[union-attr]
        assert manager.get(done.task_id).state == "succeeded"  # type: ignore[union-attr]
        assert manager.closed

    async def test_start_after_aclose_raises(self, poster):
        """A closed manager refuses new tasks with a clear error."""
        manager = TaskManager("sleeper", poster)
        await manager.aclose()

        async def body(ctx: TaskContext) -> dict[str, Any]:
            return {}

        with pytest.raises(RuntimeError, match="closed"):
            manager.start("t", body)
