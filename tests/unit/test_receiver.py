"""The receiver end to end in one process: real SQLite files, a real kit server behind an
in-memory MCP client/server pair, the events posted as its poster would (signed), some of
them lost, repeated or late on purpose.

What must hold: each task's updates reach the handler once and in seq order; an
acknowledged event survives the receiver's restart; gaps are repaired from
get_task_events; reconciliation learns what no post said; an unreachable server is
reported and retried, never fatal.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp.server.fastmcp import FastMCP
from mcp.shared.memory import create_connected_server_and_client_session

from robot_mcp_kit import TaskContext, TaskEvent, TaskManager, register_task_tools
from robot_mcp_kit.models import new_event_id, utc_now
from robot_mcp_kit.receiver import (
    Receipt,
    Receiver,
    ServerCallFailed,
    ServerConfig,
    TaskUpdate,
    UpdateKind,
)
from robot_mcp_kit.signing import signed_headers
from robot_mcp_kit.testing import RecordingPoster

SECRET = "s3cret"
SERVER = ServerConfig("sleeper", (SECRET,))

Handler = Callable[[TaskUpdate], Awaitable[None]]


async def until(check: Callable[[], Any], timeout_s: float = 10.0) -> Any:
    """Poll ``check`` until it is truthy; its value. A hang guard, not a speed check."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"still {value!r} after {timeout_s} s")
        await asyncio.sleep(0.01)


def body_of(event: TaskEvent) -> bytes:
    return event.model_dump_json().encode()


def wire(events: Any) -> list[str]:
    """Events as they cross the wire (the wire's ts has millisecond precision)."""
    return [e.model_dump_json() for e in events]


class Brain:
    """A receiver over a state file, recording what its handler got."""

    def __init__(
        self,
        path: Path,
        *,
        handler: Handler | None = None,
        server: FastMCP | None = None,
        **options: Any,
    ) -> None:
        self.updates: list[TaskUpdate] = []
        self.server = server

        async def record(update: TaskUpdate) -> None:
            self.updates.append(update)

        factory = None
        if server is not None:

            def factory(_config: ServerConfig) -> Any:
                return create_connected_server_and_client_session(server)

        options.setdefault("reconcile_every_s", None)
        options.setdefault("reconcile_on_start", False)
        self.receiver = Receiver(
            [SERVER],
            handler or record,
            state=path,
            session_factory=factory,
            **options,
        )

    async def post(self, event: TaskEvent, body: bytes | None = None) -> Receipt:
        data = body if body is not None else body_of(event)
        headers = signed_headers("sleeper", SECRET, data, int(time.time()))
        return await self.receiver.receive(headers, data)

    def seen(self, task_id: str) -> list[tuple[str, int]]:
        return [(u.type, u.seq) for u in self.updates if u.task_id == task_id]


def event(seq: int, task_id: str = "slee-000001", type: str = "progress", **payload: Any):
    return TaskEvent(
        event_id=new_event_id(),
        task_id=task_id,
        server="sleeper",
        tool="sleep_task",
        type=type,  # type: ignore[arg-type]
        seq=seq,
        ts=utc_now(),
        payload=payload,
    )


@asynccontextmanager
async def kit_server(
    **manager_options: Any,
) -> AsyncIterator[tuple[TaskManager, RecordingPoster, FastMCP]]:
    """A real kit server (TaskManager + the task tools) whose poster only records."""
    poster = RecordingPoster()
    manager = TaskManager("sleeper", poster, **manager_options)
    server = FastMCP("sleeper")
    register_task_tools(server, manager, inputs=True)
    try:
        yield manager, poster, server
    finally:
        await manager.aclose()


async def ticking(ctx: TaskContext) -> dict[str, Any]:
    for i in range(1, 6):
        await ctx.progress({"percent": i * 20})
    return {"ticks": 5}


class TestOnceInOrder:
    async def test_shuffled_repeated_posts_reach_the_handler_once_in_seq_order(self, tmp_path):
        """Posts 3, 1, 3, 2, 1, 5, 4 (each a separate post, some again): 1..5, once each."""
        brain = Brain(tmp_path / "r.db")
        events = [event(i) for i in range(1, 6)]
        async with brain.receiver:
            answers = [await brain.post(events[i - 1]) for i in (3, 1, 3, 2, 1, 5, 4)]
            await until(lambda: len(brain.updates) == 5)
            await asyncio.sleep(0.05)
        assert [a.status for a in answers] == [200] * 7
        assert [a.body.get("duplicate") for a in answers] == [
            False, False, True, False, True, False, False,
        ]  # fmt: skip
        assert brain.seen("slee-000001") == [("progress", i) for i in range(1, 6)]
        assert wire(u.event for u in brain.updates) == wire(events)
        assert not any(u.redelivered for u in brain.updates)
        assert brain.receiver.stats.duplicates == 2

    async def test_a_retry_re_signed_later_is_a_duplicate(self, tmp_path):
        """The poster re-signs a retry with a fresh timestamp: same event_id, same bytes."""
        brain = Brain(tmp_path / "r.db")
        first = event(1)
        async with brain.receiver:
            await brain.post(first)
            body = body_of(first)
            again = await brain.receiver.receive(
                signed_headers("sleeper", SECRET, body, int(time.time()) + 60), body
            )
            await until(lambda: brain.updates)
            await asyncio.sleep(0.05)
        assert again.body == {"duplicate": True, "event_id": first.event_id}
        assert again.ingested is not None
        assert wire([again.ingested.original]) == wire([first])
        assert len(brain.updates) == 1

    async def test_tasks_go_side_by_side_and_a_gap_holds_back_only_its_own(self, tmp_path):
        """Task A waits at a gap; task B's events are handed over meanwhile."""
        brain = Brain(tmp_path / "r.db", gap_timeout_s=60)
        async with brain.receiver:
            await brain.post(event(1, "slee-00000a"))
            await brain.post(event(3, "slee-00000a"))
            for i in (1, 2, 3):
                await brain.post(event(i, "slee-00000b"))
            await until(lambda: len(brain.seen("slee-00000b")) == 3)
            assert brain.seen("slee-00000a") == [("progress", 1)]
            assert brain.receiver.inspect("sleeper", "slee-00000a")["gaps"] == [2]
            await brain.post(event(2, "slee-00000a"))
            await until(lambda: len(brain.seen("slee-00000a")) == 3)
        assert brain.seen("slee-00000a") == [("progress", 1), ("progress", 2), ("progress", 3)]

    async def test_an_unknown_type_is_acknowledged_and_passed_over_in_its_place(self, tmp_path):
        """Seq 2 of a type this kit does not know: 200; the handler gets 1 and 3, no wait."""
        brain = Brain(tmp_path / "r.db", gap_timeout_s=60)
        second = event(2)
        odd = json.dumps({**json.loads(body_of(second)), "type": "battery_low"}).encode()
        async with brain.receiver:
            await brain.post(event(1))
            answer = await brain.post(second, odd)
            await brain.post(event(3))
            await until(lambda: len(brain.updates) == 2)
            inspected = brain.receiver.inspect("sleeper", "slee-000001")
        assert answer.status == 200
        assert answer.body["unknown_type"] is True
        assert brain.seen("slee-000001") == [("progress", 1), ("progress", 3)]
        assert inspected["delivered_seq"] == 3
        assert [e["type"] for e in inspected["events"]] == ["progress", "battery_low", "progress"]

    async def test_a_refused_post_leaves_nothing_behind(self, tmp_path):
        """A bad signature: 401, nothing stored, nothing handed over (§4.4, §5.4)."""
        brain = Brain(tmp_path / "r.db")
        bad = event(1)
        body = body_of(bad)
        headers = signed_headers("sleeper", "not-the-secret", body, int(time.time()))
        async with brain.receiver:
            answer = await brain.receiver.receive(headers, body)
            await asyncio.sleep(0.05)
            assert brain.receiver.inspect("sleeper", bad.task_id)["events"] == []
        assert (answer.status, answer.body["error"]) == (401, "bad_signature")
        assert brain.updates == []
        assert brain.receiver.stats.refused == 1


class TestHandlerContract:
    async def test_a_failing_handler_is_called_again_and_the_task_waits(self, tmp_path):
        """Seq 2 fails twice: handed over again (redelivered, attempt 3); seq 3 waits for it;
        another task's events go on meanwhile."""
        calls: list[tuple[str, int, int, bool]] = []

        async def flaky(update: TaskUpdate) -> None:
            calls.append((update.task_id, update.seq, update.attempt, update.redelivered))
            if update.task_id == "slee-00000a" and update.seq == 2 and update.attempt < 3:
                raise RuntimeError("the brain's database is down")

        brain = Brain(tmp_path / "r.db", handler=flaky, handler_retry_first_s=0.05)
        async with brain.receiver:
            for i in (1, 2, 3):
                await brain.post(event(i, "slee-00000a"))
            await brain.post(event(1, "slee-00000b"))
            await until(lambda: ("slee-00000a", 3, 1, False) in calls)
        mine = [c for c in calls if c[0] == "slee-00000a"]
        assert mine == [
            ("slee-00000a", 1, 1, False),
            ("slee-00000a", 2, 1, False),
            ("slee-00000a", 2, 2, True),
            ("slee-00000a", 2, 3, True),
            ("slee-00000a", 3, 1, False),
        ]
        assert calls.index(("slee-00000b", 1, 1, False)) < calls.index(mine[-1])
        assert brain.receiver.stats.handler_failures == 2

    async def test_give_up_after_passes_over_a_poison_update(self, tmp_path, capture_logs):
        """give_up_after=2: after two failures the update is passed over (ERROR), the task
        goes on."""
        got: list[int] = []

        async def poisoned(update: TaskUpdate) -> None:
            if update.seq == 1:
                raise ValueError("cannot handle this one")
            got.append(update.seq)

        brain = Brain(
            tmp_path / "r.db", handler=poisoned, give_up_after=2, handler_retry_first_s=0.01
        )
        with capture_logs() as logs:
            async with brain.receiver:
                await brain.post(event(1))
                await brain.post(event(2))
                await until(lambda: got == [2])
        assert brain.receiver.stats.given_up == 1
        gave_up = [e for e in logs if e["event"] == "handler_gave_up"]
        assert len(gave_up) == 1
        assert gave_up[0]["key"] == "sleeper/slee-000001/1"
        assert "cannot handle" not in json.dumps(gave_up[0], default=str)

    async def test_an_acknowledged_event_is_handed_over_after_a_restart(self, tmp_path):
        """The handler is still running when the receiver stops (past its grace): the next
        receiver on the same file hands the event over again, redelivered; then the next."""
        started = asyncio.Event()

        async def stuck(update: TaskUpdate) -> None:
            started.set()
            await asyncio.sleep(3600)

        first = Brain(tmp_path / "r.db", handler=stuck, close_grace_s=0.05)
        events = [event(1), event(2)]
        async with first.receiver:
            for e in events:
                assert (await first.post(e)).status == 200
            await started.wait()
        second = Brain(tmp_path / "r.db")
        async with second.receiver:
            await until(lambda: len(second.updates) == 2)
        assert [(u.seq, u.redelivered) for u in second.updates] == [(1, True), (2, False)]
        assert wire(u.event for u in second.updates) == wire(events)

    async def test_what_was_handed_over_is_not_handed_over_again_after_a_restart(self, tmp_path):
        """Cursors are committed: a restarted receiver hands over only what is new, and a
        replay of old events (a server restarted with its outbox) changes nothing."""
        events = [event(i) for i in (1, 2, 3)]
        first = Brain(tmp_path / "r.db")
        async with first.receiver:
            for e in events[:2]:
                await first.post(e)
            await until(lambda: len(first.updates) == 2)
        second = Brain(tmp_path / "r.db")
        async with second.receiver:
            for e in events:
                await second.post(e)
            await until(lambda: second.updates)
            await asyncio.sleep(0.05)
        assert [u.seq for u in second.updates] == [3]
        assert not second.updates[0].redelivered

    async def test_the_key_is_stable_and_says_what_it_is(self):
        """update.key: server/task/seq for an event, and one for each synthetic kind."""
        e = event(4)
        assert TaskUpdate(UpdateKind.EVENT, "sleeper", e.task_id, 4, event=e).key == (
            "sleeper/slee-000001/4"
        )
        gap = TaskUpdate(UpdateKind.GAP, "sleeper", "t", 6, missing=(5, 6))
        assert gap.key == "sleeper/t/gap/5-6"
        assert TaskUpdate(UpdateKind.LOST, "sleeper", "t", 2).key == "sleeper/t/lost"


class TestRepair:
    async def test_a_lost_post_is_fetched_with_get_task_events_and_handed_over_in_place(
        self, tmp_path
    ):
        """Seqs 3 and 4 never arrive: repaired (source repair), handed over between 2 and 5."""
        async with kit_server() as (manager, poster, server):
            info = manager.start("sleep_task", ticking)
            await poster.wait_for(info.task_id, "task_done")
            brain = Brain(tmp_path / "r.db", server=server, repair_wait_s=0.05)
            async with brain.receiver:
                for e in poster.events_for(info.task_id):
                    if e.seq not in (3, 4):
                        await brain.post(e)
                await until(lambda: brain.seen(info.task_id)[-1:] == [("task_done", 6)])
        got = [u for u in brain.updates if u.task_id == info.task_id]
        assert wire(u.event for u in got) == wire(poster.events_for(info.task_id))
        assert [u.source for u in got] == ["post", "post", "repair", "repair", "post", "post"]
        assert brain.receiver.stats.repaired == 2

    async def test_seqs_the_server_no_longer_retains_become_one_gap(self, tmp_path):
        """The server keeps the newest 2 events: after seq 1, a post of seq 6 repairs 5 and
        hands over GAP 2..4 before it."""
        async with kit_server(max_events_per_task=2) as (manager, poster, server):
            info = manager.start("sleep_task", ticking)
            await poster.wait_for(info.task_id, "task_done")
            events = poster.events_for(info.task_id)
            brain = Brain(tmp_path / "r.db", server=server, repair_wait_s=0.05)
            async with brain.receiver:
                await brain.post(events[0])
                await brain.post(events[5])
                await until(lambda: len(brain.seen(info.task_id)) == 4)
        assert brain.seen(info.task_id) == [
            ("progress", 1), ("gap", 4), ("progress", 5), ("task_done", 6),
        ]  # fmt: skip
        gap = brain.updates[1]
        assert (gap.kind, gap.missing, gap.key) == (
            UpdateKind.GAP, (2, 4), f"sleeper/{info.task_id}/gap/2-4",
        )  # fmt: skip

    async def test_a_task_the_server_forgot_goes_as_far_as_it_can_then_is_lost(self, tmp_path):
        """Seq 1 and 3 of a task the server does not know: 1, GAP 2, 3, LOST."""
        async with kit_server() as (_manager, _poster, server):
            brain = Brain(tmp_path / "r.db", server=server, repair_wait_s=0.05)
            async with brain.receiver:
                await brain.post(event(1))
                await brain.post(event(3))
                await until(lambda: len(brain.updates) == 4)
        assert brain.seen("slee-000001") == [
            ("progress", 1), ("gap", 2), ("progress", 3), ("lost", 3),
        ]  # fmt: skip
        assert brain.receiver.stats.lost == 1

    async def test_without_an_mcp_url_a_hole_is_given_up_after_the_timeout(self, tmp_path):
        """No way to ask: the hole waits gap_timeout_s for its post, then GAP, then on."""
        brain = Brain(tmp_path / "r.db", gap_timeout_s=0.3, repair_wait_s=0.01)
        async with brain.receiver:
            await brain.post(event(1))
            await brain.post(event(3))
            await asyncio.sleep(0.1)
            assert brain.seen("slee-000001") == [("progress", 1)]
            await until(lambda: len(brain.updates) == 3)
        assert brain.seen("slee-000001") == [("progress", 1), ("gap", 2), ("progress", 3)]


class TestReconcile:
    async def test_what_no_post_said_is_learnt_by_polling(self, tmp_path):
        """One task finished with none of its posts received, one cancelled before any event:
        reconciliation hands over the first's events and the second's STATE."""
        async with kit_server() as (manager, poster, server):
            done = manager.start("sleep_task", ticking)
            await poster.wait_for(done.task_id, "task_done")

            async def forever(ctx: TaskContext) -> dict[str, Any]:
                await asyncio.sleep(3600)
                return {}

            cancelled = manager.start("sleep_task", forever)
            await manager.cancel(cancelled.task_id)
            brain = Brain(tmp_path / "r.db", server=server)
            async with brain.receiver:
                report = await brain.receiver.reconcile()
                await until(lambda: len(brain.updates) == 7)
        assert report == {"sleeper": {"tasks": 2, "caught_up": 2}}
        assert wire(u.event for u in brain.updates if u.task_id == done.task_id) == wire(
            poster.events_for(done.task_id)
        )
        (state,) = [u for u in brain.updates if u.task_id == cancelled.task_id]
        assert state.kind is UpdateKind.STATE
        assert state.info is not None
        assert state.info.state == "cancelled"
        assert {u.source for u in brain.updates} == {"reconcile"}

    async def test_a_running_task_the_server_no_longer_knows_is_lost(self, tmp_path):
        """The receiver holds a task as running that the server does not list: LOST."""
        async with kit_server() as (_manager, _poster, server):
            brain = Brain(tmp_path / "r.db", server=server)
            async with brain.receiver:
                await brain.post(event(1, "slee-0000ff"))
                await until(lambda: brain.updates)
                await brain.receiver.reconcile()
                await until(lambda: len(brain.updates) == 2)
                again = await brain.receiver.reconcile()
                await asyncio.sleep(0.05)
        assert brain.seen("slee-0000ff") == [("progress", 1), ("lost", 1)]
        assert again == {"sleeper": {"tasks": 0, "caught_up": 0}}

    async def test_a_receiver_restarted_after_the_task_finished_catches_up_at_start(self, tmp_path):
        """Seqs 1-2 handed over, then the brain was down while the task finished: the next
        start's reconciliation hands over 3..6 without a post."""
        async with kit_server() as (manager, poster, server):
            info = manager.start("sleep_task", ticking)
            await poster.wait_for(info.task_id, "task_done")
            events = poster.events_for(info.task_id)
            first = Brain(tmp_path / "r.db", server=server)
            async with first.receiver:
                for e in events[:2]:
                    await first.post(e)
                await until(lambda: len(first.updates) == 2)
            second = Brain(tmp_path / "r.db", server=server, reconcile_on_start=True)
            async with second.receiver:
                await until(lambda: len(second.updates) == 4)
        assert wire(u.event for u in second.updates) == wire(events[2:])

    async def test_an_unreachable_server_is_reported_and_retried_never_fatal(self, tmp_path):
        """Sessions fail: reconcile answers the error, status says unreachable with a
        backoff, posts are still taken; once it answers again, it is reachable."""
        failing = True
        async with kit_server() as (_manager, _poster, server):

            @asynccontextmanager
            async def flaky(_config: ServerConfig) -> AsyncIterator[Any]:
                if failing:
                    raise ConnectionRefusedError("nobody listens")
                async with create_connected_server_and_client_session(server) as session:
                    yield session

            receiver = Receiver(
                [SERVER],
                _ignore,
                state=tmp_path / "r.db",
                session_factory=flaky,
                reconcile_every_s=None,
                reconcile_on_start=False,
                max_backoff_s=0.2,
            )
            async with receiver:
                report = await receiver.reconcile()
                status = receiver.status()
                body = body_of(event(1))
                taken = await receiver.receive(
                    signed_headers("sleeper", SECRET, body, int(time.time())), body
                )
                failing = False
                await asyncio.sleep(0.25)
                healed = await receiver.reconcile()
        assert report["sleeper"]["error"] == "unreachable"
        (server_status,) = status.servers
        assert (server_status.reachable, server_status.failures) == (False, 1)
        assert server_status.last_error is not None
        assert "ConnectionRefusedError" in server_status.last_error
        assert taken.status == 200
        # Reachable again: it does not know the task posted meanwhile, which is lost.
        assert healed == {"sleeper": {"tasks": 0, "caught_up": 1}}
        assert receiver.status().servers[0].reachable is True


async def _ignore(update: TaskUpdate) -> None:
    return None


class TestAnswerInput:
    async def test_the_handler_answers_a_question_and_the_task_goes_on(self, tmp_path):
        """input_required reaches the handler, which answers with receiver.answer(); the task
        then emits input_answered and finishes with the answer."""
        async with kit_server() as (manager, poster, server):

            async def asks(ctx: TaskContext) -> dict[str, Any]:
                answer = await ctx.request_input(
                    "Proceed?",
                    schema={"type": "object", "properties": {"ok": {"type": "boolean"}}},
                )
                return {"answer": answer.content}

            brain: Brain | None = None

            async def handler(update: TaskUpdate) -> None:
                assert brain is not None
                brain.updates.append(update)
                if update.type == "input_required":
                    await brain.receiver.answer(update, content={"ok": True})

            brain = Brain(tmp_path / "r.db", server=server, handler=handler)
            info = manager.start("sleep_task", asks)
            async with brain.receiver:
                asked = await poster.wait_for(info.task_id, "input_required")
                await brain.post(asked)
                done = await poster.wait_for(info.task_id, "task_done")
                with pytest.raises(ServerCallFailed) as twice:
                    await brain.receiver.answer(brain.updates[0], content={"ok": False})
        assert done.payload == {"result": {"answer": {"ok": True}}}
        assert twice.value.code == "not_found"

    async def test_answering_an_update_that_asks_nothing_is_a_value_error(self, tmp_path):
        brain = Brain(tmp_path / "r.db")
        update = TaskUpdate(UpdateKind.EVENT, "sleeper", "t", 1, event=event(1, "t"))
        with pytest.raises(ValueError, match="not an input_required event"):
            await brain.receiver.answer(update)
        await brain.receiver.aclose()

    async def test_answering_through_a_server_without_an_mcp_url_says_so(self, tmp_path):
        brain = Brain(tmp_path / "r.db")
        async with brain.receiver:
            with pytest.raises(ServerCallFailed) as info:
                await brain.receiver.answer_input("sleeper", "t", "input-1")
        assert info.value.code == "no_mcp_url"


class TestRetention:
    async def test_delivered_events_are_pruned_and_waiting_ones_kept(self, tmp_path):
        """retain_events bounds the file; an event still waiting (behind a gap) stays."""
        brain = Brain(tmp_path / "r.db", retain_events=10, gap_timeout_s=600)
        async with brain.receiver:
            await brain.post(event(2, "slee-00000w"))  # waits for seq 1
            for i in range(1, 31):
                await brain.post(event(i, "slee-00000d"))
            await until(lambda: len(brain.updates) == 30)
            gone = brain.receiver.prune()
            counts = brain.receiver._store.counts()
            waiting = brain.receiver.inspect("sleeper", "slee-00000w")["events"]
        assert gone == 20
        assert counts["receiver_events"] == 10 + 1
        assert [e["seq"] for e in waiting] == [2]

    async def test_the_receiver_prunes_as_it_goes(self, tmp_path):
        """2 500 events through a receiver keeping 100: the file never holds them all."""
        brain = Brain(tmp_path / "r.db", retain_events=100)
        async with brain.receiver:
            for i in range(1, 2_501):
                await brain.post(event(i))
                if i % 500 == 0:
                    await until(lambda i=i: len(brain.updates) == i)
            counts = brain.receiver._store.counts()
        assert counts["receiver_events"] <= 100 + 1_000
        assert len(brain.updates) == 2_500


class TestSyntheticUpdatesOnce:
    def test_a_task_lost_twice_is_handed_over_as_lost_once(self, tmp_path):
        """A repair and a poll that both find the task gone: one LOST (the second finds it
        no longer running). Regression: a repair that was waiting on the server queued a
        second LOST after the poll's was handed over."""
        from robot_mcp_kit.receiver._state import Final, ReceiverState, TaskRecord
        from robot_mcp_kit.receiver._store import ReceiverStore

        store = ReceiverStore(tmp_path / "r.db")
        state = ReceiverState(store)
        record = TaskRecord(server="sleeper", task_id="slee-000001")
        state.finish(record, Final(UpdateKind.LOST))
        state.finish(record, Final(UpdateKind.LOST))
        assert len(record.finals) == 1
        state.commit(record, record.finals[0], time.time())
        state.finish(record, Final(UpdateKind.LOST))
        state.finish(record, Final(UpdateKind.STATE))
        assert record.finals == []
        assert record.state == "lost"
        store.close()

    async def test_the_first_synthetic_update_after_a_start_is_flagged(self, tmp_path):
        """A task loaded at start whose first update is synthetic (here LOST) is handed over
        redelivered: the last process may have handed it over before its state was written."""
        async with kit_server() as (_manager, _poster, server):
            first = Brain(tmp_path / "r.db", server=server)
            async with first.receiver:
                await first.post(event(1, "slee-0000aa"))
                await until(lambda: first.updates)
            second = Brain(tmp_path / "r.db", server=server)
            async with second.receiver:
                await second.receiver.reconcile()
                await until(lambda: second.updates)
        (lost,) = second.updates
        assert (lost.kind, lost.redelivered) == (UpdateKind.LOST, True)
