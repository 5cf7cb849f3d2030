"""A durable outbox that cannot grow: delivery comes first (issue 32, finding 3).

The outbox fills for real: ``PRAGMA max_page_count`` on the store's write connection caps
the database at the pages it has, so a row that needs a new page fails with SQLite's own
``database or disk is full`` (``SQLITE_FULL``, what a full disk gives) while small updates
inside existing pages still fit; lifting the cap is space coming back. A scripted
``httpx.MockTransport`` stands in for the brain.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from robot_mcp_kit import EventPoster, RetryPolicy, TaskEvent
from robot_mcp_kit._backlog import DurableBacklog, QueuedEvent
from robot_mcp_kit.models import TaskInfo, TaskState

SECRET = "s3cret"
URL = "http://brain.test/api/agent/events"
T0 = datetime(2026, 1, 1, tzinfo=UTC)
FAST = RetryPolicy(delays_s=(0.01,), then_every_s=0.01, give_up_after_s=600)
NO_CAP = 1_073_741_823  # sqlite's default max_page_count


def event(task_id: str, seq: int, *, pad: int = 6_000) -> TaskEvent:
    """An event whose row needs pages of its own (``pad`` bytes: overflow pages)."""
    return TaskEvent(
        event_id=f"{task_id}-{seq}",
        task_id=task_id,
        server="navigation",
        tool="navigate_to",
        type="progress",
        seq=seq,
        ts=T0,
        payload={"pad": "x" * pad},
    )


def queued(ev: TaskEvent) -> QueuedEvent:
    return QueuedEvent(ev.event_id, ev.task_id, ev.seq, ev.model_dump_json().encode())


class Brain:
    """Answers each POST with ``status()`` and records (task_id, seq) of what it acked."""

    def __init__(self, status: Callable[[dict[str, Any]], int] = lambda e: 200) -> None:
        self.status = status
        self.acked: list[tuple[str, int]] = []

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(await request.aread())
        code = self.status(body)
        if 200 <= code < 300:
            self.acked.append((body["task_id"], body["seq"]))
        return httpx.Response(code)


def cap(backlog: DurableBacklog, pages: int | None) -> None:
    """Cap the outbox at its current pages (``None``), or at ``pages``: a full disk, or room."""
    with backlog._outbox.store.transaction() as conn:
        limit = conn.execute("PRAGMA page_count").fetchone()[0] if pages is None else pages
        conn.execute(f"PRAGMA max_page_count = {int(limit)}")


def durable_backlog(poster: EventPoster) -> DurableBacklog:
    backlog = poster._backlog
    assert isinstance(backlog, DurableBacklog)
    return backlog


def states(path: Path) -> dict[str, str]:
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT event_id, state FROM outbox_events ORDER BY id"))


async def wait_until(predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
    for _ in range(int(timeout_s / 0.01)):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("timed out")


def outbox_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The poster's outbox log lines, by event name (ERROR and WARNING)."""
    return [
        r.getMessage().split(" ")[0]
        for r in caplog.records
        if r.name == "robot_mcp_kit.events" and r.getMessage().startswith("outbox_")
    ]


async def test_events_go_out_not_durable_while_the_outbox_is_full_then_are_written(tmp_path):
    """Full: every event delivered in order per task, counted not durable, shown in repr.
    Room again: their rows are written with the state they reached, the counters say so."""
    path = tmp_path / "outbox.db"
    brain = Brain()
    poster = EventPoster(
        "navigation", URL, SECRET, transport=httpx.MockTransport(brain), outbox=path, retry=FAST
    )
    await poster.start()
    for seq in (1, 2):
        await poster.post(event("a", seq, pad=10))
    await poster.flush()
    cap(durable_backlog(poster), None)
    for seq in range(3, 8):
        await poster.post(event("a", seq))
        await poster.post(event("b", seq - 2))
    await asyncio.wait_for(poster.flush(), 10)  # nothing waits for the full file

    assert [s for t, s in brain.acked if t == "a"] == [1, 2, 3, 4, 5, 6, 7]
    assert [s for t, s in brain.acked if t == "b"] == [1, 2, 3, 4, 5]
    stats = poster.stats
    assert (stats.sent, stats.dropped, stats.queued) == (12, 0, 0)
    assert (stats.outbox_not_durable, stats.outbox_unwritten, stats.outbox_written_late) == (
        10,
        10,
        0,
    )
    assert stats.outbox_failing is True
    assert stats.outbox_write_failures >= 1
    assert "outbox='failing'" in repr(poster)
    assert "outbox_unwritten=10, outbox_not_durable=10" in repr(poster)
    assert list(states(path)) == ["a-1", "a-2"]

    cap(durable_backlog(poster), NO_CAP)
    await wait_until(lambda: poster.stats.outbox_unwritten == 0)
    stats = poster.stats
    assert (stats.outbox_not_durable, stats.outbox_written_late) == (10, 10)
    assert stats.outbox_failing is False
    assert "outbox='ok'" in repr(poster)
    assert "written_late=10" in repr(durable_backlog(poster))
    expected = ["a-1", "a-2"] + [x for s in range(3, 8) for x in (f"a-{s}", f"b-{s - 2}")]
    assert states(path) == dict.fromkeys(expected, "delivered")
    assert list(states(path)) == expected  # acceptance order: a restart sends them so
    await poster.aclose()
    assert (poster.stats.dropped, poster.stats.kept) == (0, 0)


async def test_one_error_per_episode_however_many_events_and_failed_writes(tmp_path, caplog):
    """A full outbox fails every write: one ERROR when it starts, one WARNING when it
    ends, none per event or per retry."""
    caplog.set_level(logging.WARNING)
    path = tmp_path / "outbox.db"
    poster = EventPoster(
        "navigation", URL, SECRET, transport=httpx.MockTransport(Brain()), outbox=path
    )
    await poster.start()
    await poster.post(event("a", 1, pad=10))
    await poster.flush()
    cap(durable_backlog(poster), None)
    for seq in range(2, 32):
        await poster.post(event("a", seq))
        await asyncio.sleep(0)
    await asyncio.wait_for(poster.flush(), 10)
    failures = poster.stats.outbox_write_failures
    await wait_until(lambda: poster.stats.outbox_write_failures >= failures + 3)  # retried
    assert poster.stats.outbox_not_durable == 30
    assert outbox_lines(caplog) == ["outbox_write_failing"]
    [failing] = [r for r in caplog.records if r.getMessage().startswith("outbox_write_failing")]
    assert failing.levelno == logging.ERROR
    assert "database or disk is full" in failing.getMessage()
    assert "sent all the same" in failing.getMessage()

    cap(durable_backlog(poster), NO_CAP)
    await wait_until(lambda: not poster.stats.outbox_failing)
    assert outbox_lines(caplog) == ["outbox_write_failing", "outbox_write_recovered"]
    recovered = caplog.records[-1]
    assert recovered.levelno == logging.WARNING
    assert "written_late=30" in recovered.getMessage()
    await poster.aclose()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.name for r in errors] == ["robot_mcp_kit.store", "robot_mcp_kit.events"]


async def test_an_event_sent_again_after_a_loop_change_is_counted_not_durable_once(tmp_path):
    """The not-durable count is of events, not of attempts to write them."""
    b = DurableBacklog(tmp_path / "outbox.db", server_name="n", queue_max=10, adopt=print)
    first = queued(event("a", 1, pad=10))
    b.accept(first, 1.0)
    await b.write_ahead(first)
    cap(b, None)
    second = queued(event("a", 2))
    b.accept(second, 2.0)
    await b.write_ahead(second)
    await b.write_ahead(second)  # its lane restarted on a new loop: sent again
    assert (b.not_durable, b.unwritten, b.written_late) == (1, 1, 0)
    assert b.failing
    assert repr(b).startswith(f"<DurableBacklog {str(b.path)!r} failing accepted=2 unwritten=1")
    assert "not_durable=1 written_late=0" in repr(b)
    await b.stop()
    b.close()


async def test_a_task_row_may_claim_a_seq_sent_before_its_row_was_written(tmp_path):
    """A nearly full disk: the task row (small, fits its page) lands, the event rows (big)
    do not. The next start continues after the seq the receiver saw, not before it."""
    path = tmp_path / "outbox.db"
    b = DurableBacklog(path, server_name="n", queue_max=10, adopt=print)
    running = TaskInfo(
        task_id="a",
        server="navigation",
        tool="navigate_to",
        state=TaskState.RUNNING,
        created_at=T0,
        updated_at=T0,
    )
    b.journal.save(running, 0)
    first = queued(event("a", 1, pad=10))
    b.accept(first, 1.0)
    await b.write_ahead(first)
    cap(b, None)
    for seq in (2, 3):
        item = queued(event("a", seq))
        b.accept(item, float(seq))
        await b.write_ahead(item)  # sent, not durable
        b.journal.save(running, seq)
    await b.stop()
    assert b.keep([]) == []  # its rows still cannot be written: logged, not lost
    b.close()
    assert list(states(path)) == ["a-1"]
    again = DurableBacklog(path, server_name="n", queue_max=10, adopt=print)
    assert [(i.task_id, seq) for i, seq in again.journal.recover(10, 100).running] == [("a", 3)]
    again.close()


async def test_closing_while_full_loses_only_the_undelivered_and_says_which(tmp_path, caplog):
    """The brain refuses and the disk is full at close: the undelivered events whose rows
    cannot be written are dropped (one ERROR); nothing is kept that is not in the file."""
    caplog.set_level(logging.WARNING, "robot_mcp_kit.events")
    path = tmp_path / "outbox.db"
    brain = Brain(lambda e: 200 if e["seq"] == 1 else 503)
    poster = EventPoster(
        "navigation",
        URL,
        SECRET,
        transport=httpx.MockTransport(brain),
        outbox=path,
        retry=RetryPolicy(delays_s=(30.0,)),
        close_grace_s=0.05,
    )
    await poster.start()
    await poster.post(event("a", 1, pad=10))
    await poster.flush()
    cap(durable_backlog(poster), None)
    for seq in (2, 3, 4):
        await poster.post(event("a", seq))
    await wait_until(lambda: poster.stats.outbox_not_durable == 1)  # a-2 in flight
    await poster.aclose()
    stats = poster.stats
    assert (stats.sent, stats.dropped, stats.kept) == (1, 3, 0)
    assert list(states(path)) == ["a-1"]
    lost = [r.getMessage() for r in caplog.records if "outbox_events_lost" in r.getMessage()]
    assert len(lost) == 1
    assert "events=3" in lost[0]
    assert "first_seq=2" in lost[0]


def test_a_writer_left_on_a_stopped_loop_is_replaced_on_the_next(tmp_path):
    """The poster moved to a new loop (the old one stopped without aclose): the rows of
    events sent not durable are still written once the file has room."""
    b = DurableBacklog(tmp_path / "outbox.db", server_name="n", queue_max=10, adopt=print)

    async def on_the_old_loop() -> asyncio.Task[None] | None:
        first = queued(event("a", 1, pad=10))
        b.accept(first, 1.0)
        await b.write_ahead(first)
        cap(b, None)
        second = queued(event("a", 2))
        b.accept(second, 2.0)
        await b.write_ahead(second)  # not durable: the writer starts on this loop
        return b._writer

    async def on_the_new_loop() -> None:
        cap(b, NO_CAP)
        third = queued(event("b", 1))
        b.accept(third, 3.0)
        await b.write_ahead(third)  # the episode is on: sent at once, not durable
        await wait_until(lambda: b.unwritten == 0)
        await b.stop()

    old_loop = asyncio.new_event_loop()
    old_writer = None
    try:
        old_writer = old_loop.run_until_complete(on_the_old_loop())
        assert old_writer is not None
        assert not old_writer.done()  # its loop stopped under it
        asyncio.run(on_the_new_loop())
        assert (b.not_durable, b.written_late, b.failing) == (2, 2, False)
    finally:
        if old_writer is not None:
            old_writer.cancel()
            old_loop.run_until_complete(asyncio.gather(old_writer, return_exceptions=True))
        old_loop.close()
        b.close()
    assert states(b.path) == dict.fromkeys(["a-1", "a-2", "b-1"], "pending")


async def test_a_full_outbox_holds_at_most_queue_max_unwritten_rows_in_memory(tmp_path):
    """Full for a long time: the rows of delivered events are forgotten past queue_max
    (counted), the oldest first; an undelivered event's row is never forgotten."""
    path = tmp_path / "outbox.db"
    brain = Brain(lambda e: 503 if e["task_id"] == "b" else 200)
    poster = EventPoster(
        "navigation",
        URL,
        SECRET,
        transport=httpx.MockTransport(brain),
        outbox=path,
        retry=RetryPolicy(delays_s=(30.0,)),
        queue_max=5,
        close_grace_s=0.05,
    )
    await poster.start()
    await poster.post(event("a", 1, pad=10))
    await poster.flush()
    cap(durable_backlog(poster), None)
    for seq in (1, 2, 3):
        await poster.post(event("b", seq))  # refused: stays pending
    for seq in range(2, 42):
        await poster.post(event("a", seq))
        await wait_until(lambda s=seq: ("a", s) in brain.acked)
    stats = poster.stats
    assert (stats.sent, stats.dropped, stats.queued) == (41, 0, 3)
    assert stats.outbox_not_durable == 41  # b-1 (in flight) and a-2..a-41
    assert stats.outbox_unwritten == 5  # b-1..b-3 (undelivered) and a-40, a-41
    assert stats.outbox_rows_forgotten == 38
    assert "rows_forgotten=38" in repr(durable_backlog(poster))

    cap(durable_backlog(poster), NO_CAP)
    await wait_until(lambda: poster.stats.outbox_unwritten == 0)
    assert poster.stats.outbox_written_late == 3  # b-1, a-40, a-41: sent before written
    assert poster.stats.outbox_failing is False
    assert states(path) == {
        "a-1": "delivered",
        "b-1": "pending",
        "b-2": "pending",
        "b-3": "pending",
        "a-40": "delivered",
        "a-41": "delivered",
    }
    await poster.aclose()
    assert (poster.stats.kept, poster.stats.dropped) == (3, 0)


async def test_undelivered_rows_beyond_queue_max_are_bounded_by_the_queue_drop_rule(tmp_path):
    """Every event refused and the file full: nothing is forgotten (nothing was delivered);
    the queue's own bound drops the oldest, so the unwritten rows stay within queue_max
    plus the one in flight."""
    path = tmp_path / "outbox.db"
    poster = EventPoster(
        "navigation",
        URL,
        SECRET,
        transport=httpx.MockTransport(Brain(lambda e: 200 if e["seq"] == 1 else 503)),
        outbox=path,
        retry=RetryPolicy(delays_s=(30.0,)),
        queue_max=5,
        close_grace_s=0.05,
    )
    await poster.start()
    await poster.post(event("a", 1, pad=10))
    await poster.flush()
    cap(durable_backlog(poster), None)
    for seq in range(2, 22):
        await poster.post(event("a", seq))
        await asyncio.sleep(0.01)
    stats = poster.stats
    assert (stats.sent, stats.queued, stats.outbox_rows_forgotten) == (1, 6, 0)
    assert stats.dropped == 14
    assert stats.outbox_unwritten == 6
    await poster.aclose()


async def test_closing_while_full_keeps_what_the_file_holds_and_counts_only_the_rest(
    tmp_path, caplog
):
    """Two events accepted together as the disk fills: the small row lands, the big one
    does not (so both are rewritten, and that fails), and the brain refuses both. At close
    the small one is kept (pending in the file, sent at the next start), only the big one
    is counted lost."""
    caplog.set_level(logging.WARNING, "robot_mcp_kit.events")
    path = tmp_path / "outbox.db"
    brain = Brain(lambda e: 200 if e["task_id"] == "a" else 503)
    poster = EventPoster(
        "navigation",
        URL,
        SECRET,
        transport=httpx.MockTransport(brain),
        outbox=path,
        retry=RetryPolicy(delays_s=(30.0,)),
        close_grace_s=0.05,
    )
    await poster.start()
    await poster.post(event("a", 1, pad=10))
    await poster.flush()
    cap(durable_backlog(poster), None)
    await poster.post(event("x", 1, pad=10))  # fits the last page
    durable_backlog(poster)._outbox.store.flush()  # the store writes it, nothing checks yet
    await poster.post(event("y", 1))  # needs pages of its own
    await wait_until(lambda: poster.stats.outbox_failing)
    await poster.aclose()
    stats = poster.stats
    assert (stats.kept, stats.dropped) == (1, 1)
    assert states(path) == {"a-1": "delivered", "x-1": "pending"}
    lost = [r.getMessage() for r in caplog.records if "outbox_events_lost" in r.getMessage()]
    assert len(lost) == 1
    assert "events=1" in lost[0]
    assert "first_task_id='y'" in lost[0]

    again = EventPoster(
        "navigation", URL, SECRET, transport=httpx.MockTransport(Brain()), outbox=path
    )
    await again.start()
    await again.flush()
    await again.aclose()
    assert (again.stats.recovered, again.stats.sent) == (1, 1)
    assert states(path) == {"a-1": "delivered", "x-1": "delivered"}
