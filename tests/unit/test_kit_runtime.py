"""TaskRuntime: build order, start, close order, failures on entry and inside the block."""

from __future__ import annotations

import asyncio

import pytest

from robot_mcp_kit import EventPoster, ManagerClosed, TaskContext, TaskRuntime
from robot_mcp_kit.models import TaskEvent
from robot_mcp_kit.testing import RecordingPoster


class OrderedSink(RecordingPoster):
    """Records start/aclose, and what the manager looked like when the poster closed."""

    def __init__(self, fail_start: bool = False) -> None:
        super().__init__()
        self.calls: list[str] = []
        self.fail_start = fail_start
        self.runtime: TaskRuntime | None = None
        self.manager_closed_first: bool | None = None
        self.running_at_close: int | None = None

    async def start(self) -> None:
        self.calls.append("start")
        if self.fail_start:
            raise OSError("no route to the brain")

    async def aclose(self) -> None:
        self.calls.append("aclose")
        assert self.runtime is not None
        self.manager_closed_first = self.runtime.manager.closed
        self.running_at_close = len(self.runtime.manager.list(["running"]))
        await super().aclose()

    async def post(self, event: TaskEvent) -> None:
        await super().post(event)


def runtime(sink: OrderedSink, **kw: object) -> TaskRuntime:
    rt = TaskRuntime("sleeper", poster=sink, **kw)  # type: ignore[arg-type]
    sink.runtime = rt
    return rt


async def _forever(ctx: TaskContext) -> dict[str, object]:
    await ctx.progress({"percent": 1})
    await asyncio.sleep(3600)
    return {}


async def test_enter_starts_the_poster_and_exit_closes_the_manager_then_the_poster():
    sink = OrderedSink()
    rt = runtime(sink, known_trigger_types=["eta_below"])
    assert rt.poster is sink
    assert rt.manager.poster is sink
    assert rt.manager.known_trigger_types == frozenset({"eta_below"})
    assert sink.calls == []  # nothing runs before entry
    async with rt as entered:
        assert entered is rt
        assert sink.calls == ["start"]
        info = rt.manager.start("sleep_task", _forever)
        await sink.wait_for(info.task_id, "progress")
    assert sink.calls == ["start", "aclose"]
    assert sink.manager_closed_first is True
    assert sink.running_at_close == 0  # the task was cancelled before the poster closed
    assert rt.manager.get(info.task_id).state == "cancelled"  # type: ignore[union-attr]


async def test_an_exception_inside_the_block_still_closes_both_and_propagates():
    sink = OrderedSink()
    rt = runtime(sink)

    async def serve() -> None:
        async with rt:
            rt.manager.start("sleep_task", _forever)
            raise KeyError("boom")

    with pytest.raises(KeyError):
        await serve()
    assert sink.calls == ["start", "aclose"]
    assert sink.manager_closed_first is True
    assert sink.closed


async def test_a_failing_start_closes_both_and_raises():
    sink = OrderedSink(fail_start=True)
    rt = runtime(sink)
    with pytest.raises(OSError, match="no route"):
        async with rt:
            pytest.fail("the block must not run")
    assert sink.calls == ["start", "aclose"]
    assert rt.manager.closed


async def test_a_runtime_runs_once():
    sink = OrderedSink()
    rt = runtime(sink)
    async with rt:
        pass
    with pytest.raises(ManagerClosed):
        async with rt:
            pass


async def test_manager_options_reach_the_manager():
    rt = runtime(OrderedSink(), manager_options={"max_finished_retained": 3})
    assert rt.manager.max_finished_retained == 3


def test_run_from_a_sync_entry_point():
    sink = OrderedSink()
    rt = runtime(sink)
    seen: list[str] = []

    async def main() -> None:
        seen.append("main")
        assert sink.calls == ["start"]

    rt.run(main)
    assert seen == ["main"]
    assert sink.calls == ["start", "aclose"]


async def test_by_default_the_poster_is_an_event_poster_from_the_environment(monkeypatch):
    monkeypatch.delenv("RVC_CALLBACK_URL", raising=False)
    monkeypatch.delenv("RVC_OUTBOX", raising=False)
    rt = TaskRuntime("sleeper")
    assert isinstance(rt.poster, EventPoster)
    assert not rt.poster.enabled
    async with rt:
        pass
    assert rt.manager.closed


async def test_a_manager_that_cannot_be_built_leaves_no_outbox_open(monkeypatch, tmp_path):
    """The runtime built the poster (with its outbox file and writer thread); when the
    manager's options are invalid the error propagates and the poster's file is closed."""
    import threading

    from robot_mcp_kit import ConfigurationError

    monkeypatch.setenv("RVC_CALLBACK_URL", "http://127.0.0.1:9/api/agent/events")
    monkeypatch.setenv("RVC_EVENT_SECRET", "s" * 32)
    monkeypatch.setenv("RVC_OUTBOX", str(tmp_path / "outbox.db"))

    def writers() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name.startswith("store-writer")}

    # Other tests of this worker may still be closing stores of their own: compare with
    # the writer threads alive before this test built anything.
    before = writers()
    with pytest.raises(ConfigurationError, match="max_finished_retained"):
        TaskRuntime("sleeper", manager_options={"max_finished_retained": -1})
    assert writers() - before == set()
    # The control: a runtime that was built holds the file's writer thread until it closes.
    rt = TaskRuntime("sleeper")
    assert writers() - before != set()
    async with rt:
        pass
    assert writers() - before == set()


def test_close_unstarted_refuses_a_started_poster():
    async def go() -> None:
        poster = EventPoster("sleeper", "http://127.0.0.1:9/e", "s" * 32, outbox=False)
        await poster.start()
        with pytest.raises(RuntimeError, match="aclose"):
            poster.close_unstarted()
        await poster.aclose()

    asyncio.run(go())
