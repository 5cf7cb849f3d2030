"""The backlog strategies and the task journal they hand out (real SQLite files in tmp_path)."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import httpx

from robot_mcp_kit import EventPoster, RetryPolicy
from robot_mcp_kit._backlog import DurableBacklog, MemoryBacklog, QueuedEvent
from robot_mcp_kit.models import TaskEvent, TaskInfo, TaskState

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def states(path: Path) -> dict[str, str]:
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT event_id, state FROM outbox_events ORDER BY id"))


def item(n: int, task_id: str = "nav-1", event_id: str | None = None) -> QueuedEvent:
    """A queued event whose body is the event it names (the outbox checks that at open)."""
    event_id = event_id or f"ev-{n}"
    body = TaskEvent(
        event_id=event_id,
        task_id=task_id,
        server="navigation",
        tool="navigate_to",
        type="progress",
        seq=n,
        ts=T0,
        payload={"n": n},
    )
    return QueuedEvent(event_id, task_id, n, body.model_dump_json().encode())


def backlog(path: Path, adopted: list[QueuedEvent] | None = None) -> DurableBacklog:
    sink = adopted if adopted is not None else []
    return DurableBacklog(path, server_name="navigation", queue_max=10, adopt=sink.append)


def info(task_id: str, state: TaskState, minute: int) -> TaskInfo:
    when = T0.replace(minute=minute)
    return TaskInfo(
        task_id=task_id,
        server="navigation",
        tool="navigate_to",
        state=state,
        created_at=when,
        updated_at=when,
    )


def failed_event(task_id: str, seq: int) -> TaskEvent:
    return TaskEvent(
        event_id=f"{task_id}-int",
        task_id=task_id,
        server="navigation",
        tool="navigate_to",
        type="task_failed",
        seq=seq,
        ts=T0,
        payload={"error_code": "INTERRUPTED"},
    )


async def test_memory_backlog_keeps_nothing():
    b = MemoryBacklog()
    b.accept(item(1), 0.0)
    await b.write_ahead(item(1))
    await b.settle(item(1), "delivered")
    assert (b.path, b.journal, b.recover()) == (None, None, [])
    b.close()


async def test_accepted_events_are_durable_and_settled(tmp_path):
    path = tmp_path / "outbox.db"
    b = backlog(path)
    first, second, third = item(1), item(2), item(3)
    for it in (first, second, third):
        b.accept(it, 1000.0)
    assert (first.n, second.n, third.n) == (1, 2, 3)
    await b.write_ahead(first)  # one flush covers every row accepted so far
    assert states(path) == {"ev-1": "pending", "ev-2": "pending", "ev-3": "pending"}
    await b.settle(first, "delivered")
    await b.settle(second, "given_up")
    b.drop(third)
    b.close()
    assert states(path) == {"ev-1": "delivered", "ev-2": "given_up", "ev-3": "dropped"}


async def test_a_trim_keeps_an_old_pending_event_behind_newer_settled_ones(tmp_path):
    """One task's event stays pending while other tasks' newer events settle: it survives."""
    path = tmp_path / "outbox.db"
    b = DurableBacklog(
        path, server_name="navigation", queue_max=10, delivered_tail=5, adopt=lambda e: None
    )
    stuck = item(1, task_id="nav-stuck")
    b.accept(stuck, 1000.0)
    last = stuck
    for n in range(2, 40):
        last = item(n, task_id="nav-busy")
        b.accept(last, 1000.0 + n)
        await b.settle(last, "delivered")
    b.accept(last := item(40, task_id="nav-busy"), 1040.0)
    await b.write_ahead(last)  # every mark above is committed
    b.trim()
    b.close()
    kept = states(path)
    assert kept["ev-1"] == "pending"
    assert sorted(kept) == sorted(["ev-1", "ev-40"] + [f"ev-{n}" for n in range(35, 40)])
    again = backlog(path)
    assert [e.event_id for e in again.recover()] == ["ev-1", "ev-40"]
    again.close()


async def test_recover_returns_the_pending_events_once_oldest_first(tmp_path):
    path = tmp_path / "outbox.db"
    b = backlog(path)
    for n in (1, 2, 3):
        b.accept(item(n), 1000.0 + n)
    await b.settle(item(1), "delivered")
    b.close()
    again = backlog(path)
    got = again.recover()
    assert [(e.event_id, e.n, e.enqueued_at) for e in got] == [
        ("ev-2", 0, 1002.0),
        ("ev-3", 0, 1003.0),
    ]
    assert again.recover() == []
    again.close()


async def test_the_journal_recovers_plain_data_and_trims_task_rows(tmp_path):
    path = tmp_path / "outbox.db"
    b = backlog(path)
    journal = b.journal
    assert journal.path == path
    for task_id, minute, last_seq in (("old", 1, 2), ("new", 2, 3), ("run", 3, 1)):
        journal.save(info(task_id, TaskState.RUNNING, minute), 0)  # what start() writes
        for seq in range(1, last_seq + 1):
            b.accept(last := item(seq, task_id=task_id, event_id=f"{task_id}-{seq}"), 1.0)
    await b.write_ahead(last)
    journal.save(info("old", TaskState.SUCCEEDED, 1), 2)
    journal.save(info("new", TaskState.FAILED, 2), 3)
    journal.save(info("run", TaskState.RUNNING, 3), 1)
    b.close()

    again = backlog(path)
    recovered = again.journal.recover(max_finished=1, max_events=100)
    assert [(i.task_id, seq) for i, seq in recovered.finished] == [("new", 3)]
    assert [(i.task_id, seq) for i, seq in recovered.running] == [("run", 1)]
    assert [(e.task_id, e.seq) for e in recovered.events] == [
        ("new", 1),
        ("new", 2),
        ("new", 3),
        ("run", 1),
    ]
    again.close()
    third = backlog(path)
    assert {i.task_id for i, _ in third.journal.recover(10, 100).finished} == {"new"}
    third.close()


async def test_a_task_row_never_claims_a_seq_whose_event_is_not_in_the_file(tmp_path):
    """The journal writes a task's seq capped at its newest event row known written: a
    task row that lands where its event rows did not (a nearly full disk) cannot make the
    next start skip seqs (INTERRUPTED comes right after what a receiver could have seen)."""
    path = tmp_path / "outbox.db"
    b = backlog(path)
    journal = b.journal
    journal.save(info("run", TaskState.RUNNING, 1), 0)
    b.accept(first := item(1, task_id="run", event_id="run-1"), 1.0)
    await b.write_ahead(first)
    journal.save(info("run", TaskState.RUNNING, 1), 1)
    journal.save(info("run", TaskState.RUNNING, 1), 5)  # events 2..5 never reached the file
    b.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT seq FROM tasks").fetchall() == [(1,)]
    again = backlog(path)
    assert [(i.task_id, seq) for i, seq in again.journal.recover(10, 100).running] == [("run", 1)]
    again.close()


async def test_a_task_journalled_running_whose_terminal_event_is_in_the_file_is_finished(
    tmp_path,
):
    """Its last task row write failed after its task_done row was written (and perhaps
    sent): the next start restores it finished instead of reporting it INTERRUPTED."""
    path = tmp_path / "outbox.db"
    b = backlog(path)
    b.journal.save(info("run", TaskState.RUNNING, 1), 0)
    done = TaskEvent(
        event_id="run-2",
        task_id="run",
        server="navigation",
        tool="navigate_to",
        type="task_done",
        seq=2,
        ts=T0.replace(minute=9),
        payload={"result": {"arrived": "dock"}},
    )
    b.accept(item(1, task_id="run", event_id="run-1"), 1.0)
    b.accept(last := QueuedEvent("run-2", "run", 2, done.model_dump_json().encode()), 2.0)
    await b.write_ahead(last)
    b.close()
    again = backlog(path)
    recovered = again.journal.recover(10, 100)
    assert recovered.running == []
    [(restored, seq)] = recovered.finished
    assert (restored.state, restored.result, seq) == ("succeeded", {"arrived": "dock"}, 2)
    assert restored.updated_at == done.ts
    again.close()


async def test_an_interrupted_event_is_committed_and_adopted_only_after_recovery(tmp_path):
    path = tmp_path / "outbox.db"
    adopted: list[QueuedEvent] = []
    b = backlog(path, adopted)
    b.journal.interrupt(failed_event("a", 1), info("a", TaskState.FAILED, 1), 5.0)
    assert adopted == []  # before recover(): it is one of the pending rows
    assert [e.event_id for e in b.recover()] == ["a-int"]
    b.journal.interrupt(failed_event("b", 1), info("b", TaskState.FAILED, 2), 6.0)
    assert [(e.event_id, e.enqueued_at) for e in adopted] == [("b-int", 6.0)]
    b.close()
    assert states(path) == {"a-int": "pending", "b-int": "pending"}


async def test_an_adopted_event_pushing_out_the_oldest_is_logged_and_counted(tmp_path, caplog):
    """The journal's INTERRUPTED event on a full queue drops the oldest the one way."""
    caplog.set_level(logging.ERROR, "robot_mcp_kit.events")
    path = tmp_path / "outbox.db"
    seen: list[httpx.Request] = []

    def down(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(503)

    poster = EventPoster(
        "navigation",
        "http://127.0.0.1:9/events",
        "s3cret",
        queue_max=1,
        close_grace_s=0,
        retry=RetryPolicy(delays_s=(30.0,)),
        transport=httpx.MockTransport(down),
        outbox=path,
    )
    await poster.start()
    await poster.post(failed_event("t-1", 1))  # in flight, waiting 30 s to retry
    for _ in range(100):
        if seen:
            break
        await asyncio.sleep(0.01)
    await poster.post(failed_event("t-2", 1))  # waiting on the queue (full)
    assert poster.journal is not None
    poster.journal.interrupt(failed_event("t-3", 1), info("t-3", TaskState.FAILED, 3), 1.0)
    assert poster.stats.dropped == 1
    dropped = [r.getMessage() for r in caplog.records if "event_dropped" in r.getMessage()]
    assert len(dropped) == 1
    assert "t-2-int" in dropped[0]
    assert "the queue is full" in dropped[0]
    await poster.aclose()
    assert states(path)["t-2-int"] == "dropped"
    assert states(path)["t-3-int"] == "pending"


async def test_a_trim_keeps_the_newest_event_of_each_journalled_task(tmp_path):
    """A quiet running task's last event holds its last seq: trimming spares it, so the
    restart's INTERRUPTED follows it (seq 2), not seq 1 again."""
    path = tmp_path / "outbox.db"
    b = DurableBacklog(
        path, server_name="navigation", queue_max=10, delivered_tail=5, adopt=lambda e: None
    )
    b.journal.save(info("quiet", TaskState.RUNNING, 1), 0)
    b.accept(first := item(1, task_id="quiet", event_id="quiet-1"), 1000.0)
    await b.write_ahead(first)
    await b.settle(first, "delivered")
    for n in range(2, 40):
        b.accept(other := item(n, task_id="busy"), 1000.0 + n)
        await b.write_ahead(other)
        await b.settle(other, "delivered")
    b.accept(last := item(40, task_id="busy"), 1040.0)
    await b.write_ahead(last)
    b.trim()
    b.close()
    kept = states(path)
    assert "quiet-1" in kept
    assert len(kept) == 5 + 1 + 1  # the tail, the quiet task's newest, the pending one
    again = backlog(path)
    assert [(i.task_id, seq) for i, seq in again.journal.recover(10, 100).running] == [("quiet", 1)]
    again.close()


async def test_pending_events_of_a_task_come_back_in_seq_order(tmp_path):
    """Rows rewritten after a failed write can sit out of id order; each task's events
    still come back in seq order, in the places its rows hold."""
    path = tmp_path / "outbox.db"
    b = backlog(path)
    for n, task_id in ((2, "a"), (1, "b"), (1, "a"), (3, "a")):
        b.accept(item(n, task_id=task_id, event_id=f"{task_id}-{n}"), 1000.0)
    b.close()
    again = backlog(path)
    assert [e.event_id for e in again.recover()] == ["a-1", "b-1", "a-2", "a-3"]
    again.close()
