"""fake_rvc.Recorder on its own: timelines, faults and thread-safe waits."""

from __future__ import annotations

import asyncio
import threading

import pytest

import fake_rvc
from fake_rvc import Attempt, Recorder
from robot_mcp_kit.models import TaskEvent, new_event_id


def record(recorder: Recorder, event: TaskEvent) -> Attempt:
    n = recorder.next_attempt_number()
    return recorder.record_event(
        event, server="sleeper", n=n, received_wall=1.0 * n, received_mono=float(n)
    )


def test_unknown_attribute_raises():
    """A name fake_rvc does not export is an AttributeError."""
    with pytest.raises(AttributeError):
        _ = fake_rvc.nothing_here


class TestTimelines:
    def test_reused_seq_with_new_event_id_is_a_reorder_seen_before(self, make_event):
        """Two different events with seq 1 flag the second as a reorder of a seen seq."""
        recorder = Recorder()
        record(recorder, make_event(1))
        attempt = record(recorder, make_event(1))
        assert attempt.anomalies[0]["kind"] == "reorder"
        assert attempt.anomalies[0]["seq_seen_before"] is True

    def test_resent_event_is_a_duplicate_but_a_reused_id_is_flagged(self, make_event):
        """The same event again is a plain duplicate; a new event under an old id is not.

        At-least-once delivery re-sends identical bodies; a server that reuses an
        event_id for a different event would otherwise be hidden by dedupe.
        """
        recorder = Recorder()
        first = make_event(1)
        record(recorder, first)
        again = record(recorder, first)
        reused = record(recorder, make_event(2, event_id=first.event_id, type="task_done"))
        assert again.outcome == reused.outcome == "duplicate"
        assert again.anomalies[0]["kind"] == "duplicate"
        assert reused.anomalies[0]["kind"] == "event_id_reused"
        assert set(reused.anomalies[0]["differs"]) == {"type", "seq"}
        assert recorder.counters()["anomalies"]["event_id_reused"] == 1
        assert [e.seq for e in recorder.events()] == [1]

    def test_timeline_is_a_snapshot(self, make_event):
        """Mutating a returned timeline does not change the recorder."""
        recorder = Recorder()
        record(recorder, make_event(1))
        snapshot = recorder.timeline("slee-1a2b3c")
        assert snapshot is not None
        snapshot.events.clear()
        again = recorder.timeline("slee-1a2b3c")
        assert again is not None
        assert len(again.events) == 1

    def test_attempts_are_bounded_but_counters_exact(self, make_event):
        """With max_attempts=3, five posts keep the last three and count five."""
        recorder = Recorder(max_attempts=3)
        for seq in range(1, 6):
            record(recorder, make_event(seq))
        assert [a.n for a in recorder.attempts()] == [3, 4, 5]
        assert recorder.counters()["attempts"] == 5
        assert len(recorder.events()) == 5


class TestFaults:
    def test_faults_queue_in_order_and_count_down(self):
        """A 2-count 500 then a drop: take_fault yields 500, 500, drop, then nothing."""
        recorder = Recorder()
        recorder.inject_fault("sleeper", status=500, count=2)
        recorder.inject_fault("sleeper", drop=True)
        taken = [recorder.take_fault("sleeper") for _ in range(4)]
        assert [(f.status, f.drop) if f else None for f in taken] == [
            (500, False),
            (500, False),
            (None, True),
            None,
        ]

    def test_own_faults_go_before_wildcard(self):
        """A server's own fault is used before a "*" fault."""
        recorder = Recorder()
        recorder.inject_fault("*", status=503)
        recorder.inject_fault("sleeper", status=500)
        assert [recorder.take_fault("sleeper").status for _ in range(2)] == [500, 503]

    def test_clear_faults_of_one_server(self):
        """clear_faults(server) leaves other servers' faults."""
        recorder = Recorder()
        recorder.inject_fault("sleeper", status=500)
        recorder.inject_fault("nav", status=500)
        recorder.clear_faults("sleeper")
        assert [f.server for f in recorder.faults()] == ["nav"]

    @pytest.mark.parametrize(
        "kwargs",
        [
            {},
            {"status": 500, "drop": True},
            {"status": 600},
            {"delay_s": -1},
            {"status": 500, "count": 0},
        ],
    )
    def test_invalid_faults_raise_value_error(self, kwargs):
        """inject_fault refuses faults it could not apply."""
        with pytest.raises(ValueError, match="ault"):
            Recorder().inject_fault("sleeper", **kwargs)


class TestWaiting:
    def test_sync_wait_wakes_when_another_thread_records(self, make_event):
        """wait_for_event in this thread returns once a thread records the event."""
        recorder = Recorder()
        done = make_event(2, "task_done")
        started = threading.Event()

        def producer():
            started.wait(5)
            record(recorder, make_event(1))
            record(recorder, done)

        thread = threading.Thread(target=producer)
        thread.start()
        try:
            started.set()
            found = recorder.wait_for_event("slee-1a2b3c", "task_done", timeout_s=10)
        finally:
            thread.join(5)
        assert found.event_id == done.event_id

    def test_sync_wait_times_out_naming_what_was_seen(self, make_event):
        """A wait that never matches raises TimeoutError listing the task's events."""
        recorder = Recorder()
        record(recorder, make_event(1))
        with pytest.raises(TimeoutError, match=r"#1 progress"):
            recorder.wait_for_event("slee-1a2b3c", "task_done", timeout_s=0.01)

    def test_wait_for_attempts(self, make_event):
        """wait_for_attempts returns once enough attempts exist."""
        recorder = Recorder()
        record(recorder, make_event(1))
        record(recorder, make_event(2))
        assert len(recorder.wait_for_attempts(2, server="sleeper", timeout_s=1)) == 2
        with pytest.raises(TimeoutError):
            recorder.wait_for_attempts(3, timeout_s=0.01)

    async def test_async_wait_wakes_from_another_thread(self, make_event):
        """wait_for_event_async on this loop wakes when a thread records."""
        recorder = Recorder()
        waiter = asyncio.create_task(recorder.wait_for_event_async("slee-1a2b3c", None, 10))
        await asyncio.sleep(0)
        thread = threading.Thread(target=record, args=(recorder, make_event(1)))
        thread.start()
        thread.join(5)
        assert (await asyncio.wait_for(waiter, 10)).seq == 1

    async def test_async_wait_times_out(self):
        """wait_for_event_async raises TimeoutError after its timeout."""
        with pytest.raises(TimeoutError, match="slee-1a2b3c"):
            await Recorder().wait_for_event_async("slee-1a2b3c", "task_done", 0.01)


class TestFeeds:
    async def test_subscription_gets_backlog_then_live_then_reset(self, make_event):
        """subscribe() returns past attempts, then live ones, a reset, and None on close."""
        recorder = Recorder()
        record(recorder, make_event(1))
        past, sub = recorder.subscribe()
        assert [a.seq for a in past] == [1]
        record(recorder, make_event(2))
        recorder.reset()
        recorder.close_streams()
        items = [await asyncio.wait_for(sub.queue.get(), 5) for _ in range(3)]
        assert items[0] is not None
        assert items[0][1].seq == 2
        assert items[1] == ("reset", None)
        assert items[2] is None

    def test_listener_sees_each_attempt_and_a_broken_one_is_contained(self, caplog, make_event):
        """Listeners are called per attempt; one that raises is logged, not propagated."""
        recorder = Recorder()
        seen: list[int] = []

        def broken(attempt: Attempt) -> None:
            raise RuntimeError("boom")

        recorder.add_listener(broken)
        with recorder.listening(lambda a: seen.append(a.n)):
            record(recorder, make_event(1))
        record(recorder, make_event(2))
        assert seen == [1]
        assert "listener" in caplog.text


def test_same_task_id_from_two_servers_keeps_two_timelines() -> None:
    """Task ids are unique per server only: two servers' ``perc-1a2b3c`` never merge.

    Regression: timelines were keyed by task id alone, so the second server's seq 1 read
    as a reorder of the first's.
    """
    from datetime import UTC, datetime

    recorder = Recorder()
    for n, server in enumerate(("perception", "perception-buffer"), start=1):
        event = TaskEvent(
            event_id=new_event_id(),
            task_id="perc-1a2b3c",
            server=server,
            tool="watch_for",
            type="progress",
            seq=1,
            ts=datetime.now(UTC),
            payload={},
        )
        recorder.record_event(event, server=server, n=n, received_wall=0.0, received_mono=0.0)

    first = recorder.timeline("perc-1a2b3c", "perception")
    second = recorder.timeline("perc-1a2b3c", "perception-buffer")
    assert first is not None
    assert second is not None
    assert (first.seqs, second.seqs) == ([1], [1])
    assert first.anomalies == []
    assert second.anomalies == []
    assert recorder.task_ids() == ["perc-1a2b3c"]
    assert len(recorder.timelines()) == 2
    found = recorder.wait_for_event("perc-1a2b3c", "progress", 1, server="perception-buffer")
    assert found.server == "perception-buffer"


class TestTaskStates:
    def test_list_tasks_answers_become_states_and_only_changes_count(self):
        """Each TaskInfo is stored once per state; malformed entries are skipped."""
        recorder = Recorder()
        infos = [
            {"task_id": "slee-000001", "state": "running", "tool": "sleep_task"},
            {"task_id": "slee-000002", "state": "cancelled"},
            {"task_id": 3, "state": "running"},
            {"state": "failed"},
        ]
        changed = recorder.record_task_states("sleeper", infos, polled_wall=5.0)
        assert [(s.task_id, s.state, s.tool) for s in changed] == [
            ("slee-000001", "running", "sleep_task"),
            ("slee-000002", "cancelled", None),
        ]
        assert recorder.record_task_states("sleeper", infos) == []  # nothing new
        later = recorder.record_task_states(
            "sleeper", [{"task_id": "slee-000001", "state": "succeeded"}]
        )
        assert [s.state for s in later] == ["succeeded"]
        assert [s.state for s in recorder.task_states("sleeper")] == ["succeeded", "cancelled"]
        assert recorder.task_states("other") == []
        recorder.reset()
        assert recorder.task_states() == []

    async def test_a_changed_state_is_fed_to_subscribers_but_not_to_listeners(self):
        """The page's feed gets ("task_state", TaskState); the CLI's listeners hear nothing."""
        recorder = Recorder()
        heard: list[Attempt] = []
        recorder.add_listener(heard.append)
        _, sub = recorder.subscribe()
        recorder.record_task_states("sleeper", [{"task_id": "slee-000002", "state": "cancelled"}])
        kind, state = await asyncio.wait_for(sub.queue.get(), 5)
        assert kind == "task_state"
        assert isinstance(state, fake_rvc.TaskState)
        assert state.to_dict()["state"] == "cancelled"
        assert heard == []
