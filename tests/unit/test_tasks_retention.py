"""EventRetention: per-task and total bounds, pages, forgetting a task."""

from __future__ import annotations

from datetime import UTC, datetime

from robot_mcp_kit._task_state import EventRetention, TaskRecord
from robot_mcp_kit.models import TaskEvent, TaskInfo, TaskState

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def ev(task_id: str, seq: int) -> TaskEvent:
    return TaskEvent(
        event_id=f"{task_id}-{seq}",
        task_id=task_id,
        server="sleeper",
        tool="sleep_task",
        type="progress",
        seq=seq,
        ts=T0,
        payload={"n": seq},
    )


def seqs(r: EventRetention, task_id: str, after: int = 0, limit: int = 200) -> list[int]:
    return [e.seq for e in r.page(task_id, after, limit).events]


def test_the_per_task_bound_keeps_the_newest():
    r = EventRetention(per_task=3, total=100)
    for seq in range(1, 6):
        r.retain("a", ev("a", seq))
    assert seqs(r, "a") == [3, 4, 5]
    assert r.page("a", 0, 200).first_retained_seq == 3
    assert len(r) == 3


def test_the_total_bound_forgets_the_oldest_overall():
    r = EventRetention(per_task=10, total=4)
    r.retain("a", ev("a", 1))
    r.retain("b", ev("b", 1))
    r.retain("a", ev("a", 2))
    r.retain("b", ev("b", 2))
    r.retain("b", ev("b", 3))
    assert seqs(r, "a") == [2]
    assert seqs(r, "b") == [1, 2, 3]
    assert len(r) == 4


def test_a_page_is_after_seq_and_limited_with_more():
    r = EventRetention(per_task=10, total=100)
    for seq in range(1, 8):
        r.retain("a", ev("a", seq))
    page = r.page("a", 2, 3)
    assert [e.seq for e in page.events] == [3, 4, 5]
    assert page.more is True
    assert r.page("a", 5, 3).more is False
    assert r.page("unknown", 0, 3).events == []
    assert r.page("a", 0, -1).events == []


def test_forget_frees_the_total_for_other_tasks():
    r = EventRetention(per_task=10, total=3)
    for seq in (1, 2, 3):
        r.retain("a", ev("a", seq))
    r.forget("a")
    assert len(r) == 0
    for seq in (1, 2, 3):
        r.retain("b", ev("b", seq))
    assert seqs(r, "b") == [1, 2, 3]
    assert r.last_seq("b") == 3
    assert r.last_seq("a") is None


def test_zero_bounds_keep_nothing():
    for r in (EventRetention(0, 10), EventRetention(10, 0)):
        r.retain("a", ev("a", 1))
        assert seqs(r, "a") == []


def test_stale_order_entries_are_compacted():
    r = EventRetention(per_task=1, total=2)
    for seq in range(1, 500):
        r.retain("a", ev("a", seq))
    assert seqs(r, "a") == [499]
    assert len(r._order) <= 2 * 2 + 64


def test_a_record_round_trips_through_task_info():
    info = TaskInfo(
        task_id="slee-1a2b3c",
        server="sleeper",
        tool="sleep_task",
        state=TaskState.SUCCEEDED,
        created_at=T0,
        updated_at=T0,
        triggers=[{"type": "progress_above", "percent": 50}],
        result={"slept_s": 1},
    )
    record = TaskRecord.from_info(info, seq=4)
    assert record.seq == 4
    assert record.info("sleeper") == info


def test_a_task_whose_events_all_aged_out_leaves_no_entry():
    """The total bound taking a task's last event forgets the task too (no empty entry)."""
    r = EventRetention(per_task=10, total=2)
    r.retain("a", ev("a", 1))
    r.retain("b", ev("b", 1))
    r.retain("b", ev("b", 2))
    assert seqs(r, "a") == []
    assert r.page("a", 0, 200).first_retained_seq is None
    assert r.tasks() == 1
    assert len(r) == 2
