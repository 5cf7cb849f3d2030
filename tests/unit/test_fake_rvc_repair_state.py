"""Recorder.record_repaired (issue 14): only a seq still missing is stored, marked repaired."""

from __future__ import annotations

import time
from typing import Any

from fake_rvc import Recorder, format_attempt
from robot_mcp_kit.models import TaskEvent, new_event_id, utc_now


def event(seq: int, **fields: Any) -> TaskEvent:
    data: dict[str, Any] = {
        "event_id": new_event_id(),
        "task_id": "slee-1a2b3c",
        "server": "sleeper",
        "tool": "sleep_task",
        "type": "progress",
        "seq": seq,
        "ts": utc_now(),
        "payload": {"seq": seq},
    }
    data.update(fields)
    return TaskEvent(**data)


def receive(recorder: Recorder, e: TaskEvent) -> None:
    recorder.record_event(
        e,
        server="sleeper",
        n=recorder.next_attempt_number(),
        received_wall=time.time(),
        received_mono=time.monotonic(),
    )


def test_missing_seqs_are_filled_and_marked():
    """Seen 1, 2, 5: repairing 3 and 4 empties missing_seqs; the gap stays in the history."""
    recorder = Recorder()
    for seq in (1, 2, 5):
        receive(recorder, event(seq))
    three, four = event(3), event(4)
    assert recorder.record_repaired(three, server="sleeper") is not None
    attempt = recorder.record_repaired(four, server="sleeper")
    assert attempt is not None
    assert attempt.outcome == "repaired"
    timeline = recorder.timeline("slee-1a2b3c")
    assert timeline is not None
    assert (timeline.missing_seqs, timeline.repaired_seqs) == ([], [3, 4])
    assert [a["kind"] for a in timeline.anomalies] == ["gap"]
    assert recorder.counters()["repaired"] == 2
    assert recorder.counters()["attempts"] == 3  # repairs are not POSTs
    assert "repaired through get_task_events" in format_attempt(attempt)
    assert timeline.to_dict()["events"][-1]["repaired"] is True


def test_a_seq_not_missing_or_a_known_event_is_not_stored():
    """Nothing is stored for a seq already received, above the highest, or a known id."""
    recorder = Recorder()
    first = event(1)
    receive(recorder, first)
    receive(recorder, event(3))
    assert recorder.record_repaired(event(1), server="sleeper") is None
    assert recorder.record_repaired(event(4), server="sleeper") is None
    assert recorder.record_repaired(first, server="sleeper") is None
    assert recorder.record_repaired(event(2), server="other") is None
    timeline = recorder.timeline("slee-1a2b3c")
    assert timeline is not None
    assert timeline.missing_seqs == [2]
