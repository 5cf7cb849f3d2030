"""Per-task delivery over real HTTP: fake_rvc under uvicorn refuses one task's events.

The poster runs on the real clock with the contract's retry schedule (0.5 s, 2 s, 8 s,
30 s ...). fake_rvc answers 413 to every post of task A (a fault naming that task); task
B's events, posted after A's first refusal, must all be acknowledged within a couple of
seconds, and A's must still arrive in order once the receiver accepts them again.
"""

from __future__ import annotations

import asyncio
import logging

from fake_rvc import FakeRvcServer
from robot_mcp_kit import EventPoster, TaskEvent
from robot_mcp_kit.models import new_event_id, utc_now

SECRET = "lanes-secret"
A, B = "navi-00000a", "navi-00000b"


def event(task_id: str, seq: int, type: str = "progress") -> TaskEvent:
    return TaskEvent(
        event_id=new_event_id(),
        task_id=task_id,
        server="navigation",
        tool="navigate_to",
        type=type,  # type: ignore[arg-type]
        seq=seq,
        ts=utc_now(),
        payload={"eta_s": 10 - seq},
    )


async def test_one_tasks_refused_event_does_not_delay_another_tasks(caplog) -> None:
    caplog.set_level(logging.ERROR, logger="robot_mcp_kit.events")
    with FakeRvcServer({"navigation": SECRET}) as rvc:
        rvc.state.inject_fault("navigation", status=413, count=1_000_000, task_id=A)
        async with EventPoster("navigation", rvc.events_url, SECRET, close_grace_s=1) as poster:
            await poster.post(event(A, 1))
            await poster.post(event(A, 2))
            await rvc.state.wait_for_async(
                lambda r: [a for a in r.attempts() if a.task_id == A and a.status == 413],
                timeout_s=5,
            )
            loop = asyncio.get_running_loop()
            started = loop.time()
            for seq in (1, 2, 3):
                await poster.post(event(B, seq, "task_done" if seq == 3 else "progress"))
            await rvc.state.wait_for_event_async(B, "task_done", timeout_s=5)
            took = loop.time() - started
            assert took < 2.0, f"task B waited {took:.1f} s behind task A's refused event"
            assert [e.seq for e in rvc.state.events(task_id=B)] == [1, 2, 3]
            assert rvc.state.events(task_id=A) == []
            a_seqs = {a.seq for a in rvc.state.attempts() if a.task_id == A}
            assert a_seqs == {1}, "A's seq 2 was sent before its seq 1 was acknowledged"

            rvc.state.clear_faults()  # the receiver's limit was raised: A goes through
            await rvc.state.wait_for_async(
                lambda r: len(r.events(task_id=A)) == 2 or None, timeout_s=15
            )
            assert [e.seq for e in rvc.state.events(task_id=A)] == [1, 2]
            assert poster.stats.refused == 1
            assert poster.stats.given_up == 0
    lines = [r.getMessage() for r in caplog.records]
    refusals = [line for line in lines if line.startswith("event_refused")]
    assert len(refusals) == 1
    assert "status=413" in refusals[0]
    assert A in refusals[0]
