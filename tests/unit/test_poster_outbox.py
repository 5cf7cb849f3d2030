"""The durable outbox (issue 14): events kept in SQLite until acknowledged, across restarts.

A scripted ``httpx.MockTransport`` stands in for the brain; a "restart" is a second
poster (and manager) opened on the same file after the first was closed, or after its
store was closed without ``aclose`` (what a kill leaves: committed rows only).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest

from robot_mcp_kit import EventPoster, OutboxLocked, RetryPolicy, TaskEvent, TaskManager
from robot_mcp_kit.models import new_event_id, utc_now
from robot_mcp_kit.store import StoreUnreadable

SECRET = "s3cret"
URL = "http://brain.test/api/agent/events"


class Brain:
    """Answers each POST with ``status()`` and records the bodies it acknowledged."""

    def __init__(self, status: Callable[[dict[str, Any]], int] = lambda e: 200) -> None:
        self.status = status
        self.acked: list[dict[str, Any]] = []
        self.seen: list[dict[str, Any]] = []

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        event = json.loads(await request.aread())
        self.seen.append(event)
        code = self.status(event)
        if 200 <= code < 300:
            self.acked.append(event)
        return httpx.Response(code)

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)


def event(seq: int, task_id: str = "nav-7f3a2b") -> TaskEvent:
    return TaskEvent(
        event_id=new_event_id(),
        task_id=task_id,
        server="navigation",
        tool="navigate_to",
        type="progress",
        seq=seq,
        ts=utc_now(),
        payload={"n": seq},
    )


def states(path: Path) -> dict[str, str]:
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT event_id, state FROM outbox_events ORDER BY id"))


FAST = RetryPolicy(delays_s=(0.01,), then_every_s=0.01, give_up_after_s=600)


def poster_on(path: Path, brain: Brain, **kwargs: Any) -> EventPoster:
    kwargs.setdefault("retry", FAST)
    kwargs.setdefault("close_grace_s", 0.05)
    return EventPoster("navigation", URL, SECRET, transport=brain.transport, outbox=path, **kwargs)


async def wait_until(predicate: Callable[[], bool], timeout_s: float = 5.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not predicate():
            await asyncio.sleep(0.005)


class TestOutbox:
    async def test_undelivered_events_survive_a_restart_in_order_with_their_ids(self, tmp_path):
        """A receiver down at close: the events stay pending; the next poster sends them first."""
        path = tmp_path / "outbox.db"
        down = Brain(lambda e: 503)
        first = poster_on(path, down)
        sent = [event(i) for i in range(1, 6)]
        for e in sent:
            await first.post(e)
        await wait_until(lambda: len(down.seen) >= 1)
        await first.aclose()
        assert first.stats.kept == 5
        assert first.stats.dropped == 0
        assert set(states(path).values()) == {"pending"}

        up = Brain()
        second = poster_on(path, up)
        await second.start()
        await wait_until(lambda: len(up.acked) == 5)
        later = event(6)
        await second.post(later)
        await second.flush()
        await second.aclose()
        assert [e["event_id"] for e in up.acked] == [e.event_id for e in [*sent, later]]
        assert second.stats.recovered == 5
        assert second.stats.sent == 6
        assert set(states(path).values()) == {"delivered"}

    async def test_without_outbox_nothing_is_kept(self, tmp_path, monkeypatch):
        """No outbox: aclose drops what is undelivered, exactly as before, and writes no file."""
        monkeypatch.chdir(tmp_path)
        monkeypatch.delenv("RVC_OUTBOX", raising=False)
        down = Brain(lambda e: 503)
        poster = EventPoster(
            "navigation", URL, SECRET, transport=down.transport, retry=FAST, close_grace_s=0.05
        )
        await poster.post(event(1))
        await wait_until(lambda: len(down.seen) >= 1)
        await poster.aclose()
        assert poster.outbox_path is None
        assert poster.journal is None
        assert (poster.stats.dropped, poster.stats.kept) == (1, 0)
        assert list(tmp_path.iterdir()) == []

    async def test_env_var_turns_the_outbox_on_and_false_turns_it_off(self, tmp_path, monkeypatch):
        """RVC_OUTBOX names the file; outbox=False wins over it."""
        monkeypatch.setenv("RVC_OUTBOX", str(tmp_path / "env.db"))
        on = EventPoster("navigation", URL, SECRET)
        off = EventPoster("navigation", URL, SECRET, outbox=False)
        assert on.outbox_path == tmp_path / "env.db"
        assert on.journal is not None
        assert on.journal.path == tmp_path / "env.db"
        assert off.outbox_path is None
        await on.aclose()
        await off.aclose()

    async def test_the_budget_of_a_recovered_event_counts_from_its_first_enqueue(self, tmp_path):
        """An event first accepted 11 minutes ago is given up after one failed attempt."""
        path = tmp_path / "outbox.db"
        down = Brain(lambda e: 503)
        first = poster_on(path, down)
        old = event(1)
        await first.post(old)
        await wait_until(lambda: len(down.seen) >= 1)
        await first.aclose()
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE outbox_events SET enqueued_at = enqueued_at - 660")
        still_down = Brain(lambda e: 503)
        second = poster_on(path, still_down)
        await second.start()
        await wait_until(lambda: second.stats.given_up == 1)
        await second.aclose()
        assert len(still_down.seen) == 1
        assert states(path) == {old.event_id: "given_up"}

    async def test_a_recent_recovered_event_keeps_retrying(self, tmp_path):
        """The control: the same event accepted a moment ago is retried, not given up."""
        path = tmp_path / "outbox.db"
        down = Brain(lambda e: 503)
        first = poster_on(path, down)
        await first.post(event(1))
        await wait_until(lambda: len(down.seen) >= 1)
        await first.aclose()
        still_down = Brain(lambda e: 503)
        second = poster_on(path, still_down)
        await second.start()
        await wait_until(lambda: len(still_down.seen) >= 3)
        assert second.stats.given_up == 0
        await second.aclose()

    async def test_the_size_cap_drops_the_oldest_counted_and_logged(self, tmp_path, caplog):
        """queue_max caps the outbox: the oldest pending events are dropped, ERROR-logged."""
        caplog.set_level(logging.ERROR, "robot_mcp_kit.events")
        path = tmp_path / "outbox.db"
        gate = asyncio.Event()

        async def slow(request: httpx.Request) -> httpx.Response:
            await gate.wait()
            return httpx.Response(503)

        poster = EventPoster(
            "navigation",
            URL,
            SECRET,
            transport=httpx.MockTransport(slow),
            outbox=path,
            queue_max=3,
            close_grace_s=0.05,
        )
        sent = [event(i) for i in range(1, 7)]
        for e in sent:
            await poster.post(e)
            await asyncio.sleep(0.01)
        assert poster.stats.dropped == 2  # the head is in flight; 2 more pushed out
        gate.set()
        await poster.aclose()
        found = states(path)
        assert [found[e.event_id] for e in sent] == [
            "pending",
            "dropped",
            "dropped",
            "pending",
            "pending",
            "pending",
        ]
        dropped = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
        assert len(dropped) == 2

    async def test_an_event_is_committed_before_its_first_attempt(self, tmp_path):
        """When the receiver sees an event, its row is already in the file (another reader)."""
        path = tmp_path / "outbox.db"
        seen_in_file: list[bool] = []

        async def look(request: httpx.Request) -> httpx.Response:
            body = json.loads(await request.aread())
            with sqlite3.connect(path) as conn:
                row = conn.execute(
                    "SELECT state FROM outbox_events WHERE event_id = ?", (body["event_id"],)
                ).fetchone()
            seen_in_file.append(row is not None)
            return httpx.Response(200)

        poster = EventPoster(
            "navigation", URL, SECRET, transport=httpx.MockTransport(look), outbox=path
        )
        for i in range(1, 51):
            await poster.post(event(i))
        await poster.flush()
        await poster.aclose()
        assert seen_in_file == [True] * 50

    async def test_the_delivered_tail_is_bounded(self, tmp_path):
        """Settled rows beyond queue_max + delivered_tail are trimmed; pending ones never."""
        path = tmp_path / "outbox.db"
        brain = Brain()
        poster = poster_on(path, brain, queue_max=10, outbox_delivered_tail=5)
        for i in range(1, 301):
            await poster.post(event(i))
        await poster.flush()
        await poster.aclose()
        reopened = poster_on(path, brain, queue_max=10, outbox_delivered_tail=5)
        await reopened.start()  # trims at load
        await reopened.aclose()
        assert len(states(path)) <= 15


class TestGuards:
    async def test_a_second_open_of_the_file_is_refused_until_the_first_closes(self, tmp_path):
        """One poster per outbox file: the second is refused, naming the file and holder."""
        path = tmp_path / "outbox.db"
        first = poster_on(path, Brain())
        with pytest.raises(OutboxLocked) as info:
            poster_on(path, Brain())
        error = info.value
        assert (error.path, error.lock_path) == (str(path), f"{path}.lock")
        assert (error.holder_pid, error.holder_host) == (os.getpid(), socket.gethostname())
        message = str(error)
        assert "\n" not in message
        assert f"{path} is in use by process {os.getpid()} on {socket.gethostname()}" in message
        assert isinstance(error, RuntimeError)
        await first.aclose()
        again = poster_on(path, Brain())  # closing released it
        await again.aclose()

    async def test_a_row_that_is_not_its_event_refuses_the_file_untouched(self, tmp_path):
        """An event body that is not the event its row names: refused at open, not sent."""
        path = tmp_path / "outbox.db"
        down = Brain(lambda e: 503)
        first = poster_on(path, down)
        for i in (1, 2):
            await first.post(event(i))
        await wait_until(lambda: len(down.seen) >= 1)
        await first.aclose()
        with closing(sqlite3.connect(path)) as conn, conn:
            conn.execute("UPDATE outbox_events SET body = ? WHERE id = 2", (b'{"seq": 2',))
        before = path.read_bytes()
        brain = Brain()
        with pytest.raises(StoreUnreadable, match="row 2 of outbox_events") as info:
            poster_on(path, brain)
        assert "move it aside" in str(info.value).lower()
        assert path.read_bytes() == before
        assert brain.seen == []


async def _task_body_forever(ctx: Any) -> dict[str, Any]:
    for i in range(1, 1000):
        await ctx.progress({"i": i})
        await asyncio.sleep(0.01)
    return {}


class TestTaskJournal:
    async def test_a_task_running_at_a_crash_is_reported_interrupted(self, tmp_path):
        """After a stop without any shutdown: task_failed INTERRUPTED with the next seq."""
        path = tmp_path / "outbox.db"
        brain = Brain()
        poster = poster_on(path, brain)
        manager = TaskManager("navigation", poster)
        assert manager.journal is poster.journal
        assert manager.journal is not None
        done = manager.start("navigate_to", _ok_body)
        running = manager.start("navigate_to", _task_body_forever)
        await wait_until(lambda: len([e for e in brain.acked if e["seq"] >= 3]) >= 2)
        await wait_until(lambda: manager.get(done.task_id).state == "succeeded")  # type: ignore[union-attr]
        await poster.flush()
        # What a kill leaves: the committed rows (the store is closed; nothing else runs).
        handle = manager._tasks[running.task_id].handle
        assert handle is not None
        handle.cancel()
        manager._closing = True  # the cancel above stands for the process dying
        await asyncio.sleep(0.05)
        last_seq = max(e["seq"] for e in brain.acked if e["task_id"] == running.task_id)
        poster._backlog.close()

        brain2 = Brain()
        poster2 = poster_on(path, brain2)
        manager2 = TaskManager("navigation", poster2)
        info = manager2.get(running.task_id)
        assert info is not None
        assert info.state == "failed"
        assert info.failure is not None
        assert info.failure.error_code == "INTERRUPTED"
        assert info.failure.recoverable is True
        assert info.progress is not None
        finished = manager2.get(done.task_id)
        assert finished is not None
        assert finished.state == "succeeded"
        await poster2.start()
        await poster2.flush()
        terminal = [e for e in brain2.acked if e["task_id"] == running.task_id]
        assert terminal[-1]["type"] == "task_failed"
        assert terminal[-1]["seq"] == last_seq + 1
        assert terminal[-1]["payload"]["error_code"] == "INTERRUPTED"
        page = manager2.events(running.task_id, after_seq=last_seq - 2)
        assert page is not None
        assert [e.seq for e in page.events] == [last_seq - 1, last_seq, last_seq + 1]
        await manager2.aclose()
        await poster2.aclose()

    async def test_aclose_leaves_running_tasks_to_be_reported_interrupted(self, tmp_path):
        """A graceful shutdown cancels running tasks; the next start reports them."""
        path = tmp_path / "outbox.db"
        brain = Brain()
        poster = poster_on(path, brain)
        manager = TaskManager("navigation", poster)
        info = manager.start("navigate_to", _task_body_forever)
        await wait_until(lambda: len(brain.acked) >= 2)
        await manager.aclose()
        await poster.aclose()

        brain2 = Brain()
        poster2 = poster_on(path, brain2)
        manager2 = TaskManager("navigation", poster2)
        again = manager2.get(info.task_id)
        assert again is not None
        assert again.failure is not None
        assert again.failure.error_code == "INTERRUPTED"
        await poster2.start()
        await poster2.flush()
        assert [e["type"] for e in brain2.acked] == ["task_failed"]
        await manager2.aclose()
        await poster2.aclose()

    async def test_zero_retention_leaves_no_task_rows(self, tmp_path):
        """max_finished_retained=0 with a journal: a finished task's row is forgotten, not
        written back by its terminal event, and an interrupted one's goes after its commit."""
        path = tmp_path / "outbox.db"
        brain = Brain()
        poster = poster_on(path, brain)
        manager = TaskManager("navigation", poster, max_finished_retained=0)
        for _ in range(3):
            info = manager.start("navigate_to", _ok_body)
            await wait_until(lambda i=info.task_id: manager.get(i) is None)
        manager.start("navigate_to", _task_body_forever)
        await wait_until(lambda: len(brain.acked) >= 5)
        await manager.aclose()
        await poster.aclose()
        with sqlite3.connect(path) as conn:
            assert [r[0] for r in conn.execute("SELECT state FROM tasks")] == ["running"]

        brain2 = Brain()
        poster2 = poster_on(path, brain2)
        manager2 = TaskManager("navigation", poster2, max_finished_retained=0)
        await poster2.start()
        await poster2.flush()
        assert [e["payload"].get("error_code") for e in brain2.acked] == ["INTERRUPTED"]
        await manager2.aclose()
        await poster2.aclose()
        with sqlite3.connect(path) as conn:
            assert list(conn.execute("SELECT task_id FROM tasks")) == []

    async def test_without_an_outbox_a_restart_forgets_tasks(self, tmp_path):
        """The control: with no journal a new manager knows nothing (get → None)."""
        brain = Brain()
        poster = EventPoster("navigation", URL, SECRET, transport=brain.transport, outbox=False)
        manager = TaskManager("navigation", poster)
        assert manager.journal is None
        info = manager.start("navigate_to", _ok_body)
        await manager.aclose()
        await poster.aclose()
        manager2 = TaskManager("navigation", poster)
        assert manager2.get(info.task_id) is None


async def _ok_body(ctx: Any) -> dict[str, Any]:
    await ctx.progress({"percent": 50})
    await ctx.progress({"percent": 100})
    return {"ok": True}


@pytest.fixture
def recording_manager(poster):  # the RecordingPoster fixture from conftest
    def make(**kwargs: Any) -> TaskManager:
        return TaskManager("sleeper", poster, **kwargs)

    return make


class TestRetainedEvents:
    async def test_events_after_a_seq_are_answered_in_order(self, recording_manager):
        """events(task, after_seq=4) answers 5, 6, ...; more=True when the page is full."""
        manager = recording_manager()

        async def body(ctx: Any) -> dict[str, Any]:
            for i in range(10):
                await ctx.progress({"i": i})
            return {}

        info = manager.start("t", body)
        await asyncio.sleep(0.05)
        page = manager.events(info.task_id, after_seq=4)
        assert page is not None
        assert [e.seq for e in page.events] == [5, 6, 7, 8, 9, 10, 11]
        assert page.events[-1].type == "task_done"
        assert (page.last_seq, page.first_retained_seq, page.more) == (11, 1, False)
        small = manager.events(info.task_id, after_seq=0, limit=3)
        assert small is not None
        assert ([e.seq for e in small.events], small.more) == ([1, 2, 3], True)
        assert manager.events("nope-000000") is None
        await manager.aclose()

    async def test_retention_is_bounded_per_task_and_in_total(self, recording_manager):
        """At most max_events_per_task per task and max_events_retained overall, newest kept."""
        manager = recording_manager(max_events_per_task=5, max_events_retained=8)

        async def body(ctx: Any) -> dict[str, Any]:
            for i in range(9):
                await ctx.progress({"i": i})
            return {}

        a = manager.start("t", body)
        await asyncio.sleep(0.05)
        page_a = manager.events(a.task_id)
        assert page_a is not None
        assert [e.seq for e in page_a.events] == [6, 7, 8, 9, 10]
        b = manager.start("t", body)
        await asyncio.sleep(0.05)
        page_a = manager.events(a.task_id)
        page_b = manager.events(b.task_id)
        assert page_a is not None
        assert page_b is not None
        assert [e.seq for e in page_b.events] == [6, 7, 8, 9, 10]
        assert len(page_a.events) + len(page_b.events) <= 8
        assert [e.seq for e in page_a.events] == [8, 9, 10]
        await manager.aclose()
