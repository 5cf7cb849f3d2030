"""The recorder's collaborators on their own: the Notifier (waits, feeds, listeners) and Fault."""

from __future__ import annotations

import logging
import threading

import pytest

from fake_rvc import Attempt, FaultError
from fake_rvc._faults import Fault, FaultPlan
from fake_rvc._waits import Notifier


def attempt(n: int = 1) -> Attempt:
    return Attempt(
        n=n, received_wall=0.0, received_mono=0.0, server="s", status=200, outcome="fault"
    )


@pytest.fixture
def state() -> tuple[threading.RLock, list[int], Notifier]:
    lock = threading.RLock()
    values: list[int] = []
    return lock, values, Notifier(lock, describe=lambda: f"<values {values}>")


class TestNotifier:
    def test_sync_wait_returns_once_notified(self, state):
        """A waiter on another thread sees the change that notify() announces."""
        lock, values, notifier = state

        def change() -> None:
            with lock:
                values.append(1)
            notifier.notify(attempt())

        timer = threading.Timer(0.05, change)
        timer.start()
        try:
            assert notifier.wait_for(lambda: values or None, timeout_s=5) == [1]
        finally:
            timer.join()

    def test_timeout_names_what_describe_says(self, state):
        _, _, notifier = state
        with pytest.raises(TimeoutError, match=r"within 0.01 s: <values \[\]>"):
            notifier.wait_for(lambda: None, timeout_s=0.01)

    async def test_async_wait_and_subscription_see_a_notify(self, state):
        lock, values, notifier = state
        sub = notifier.subscribe()
        with lock:
            values.append(2)
        notifier.notify(attempt(7))
        assert await notifier.wait_for_async(lambda: values or None, timeout_s=5) == [2]
        kind, got = await sub.queue.get()
        assert (kind, got.n if got else None) == ("attempt", 7)
        notifier.notify(None)
        assert await sub.queue.get() == ("reset", None)
        notifier.close_streams()
        assert await sub.queue.get() is None

    def test_listener_runs_and_a_broken_one_is_logged(self, state, caplog):
        """Listeners get each attempt (not resets); one that raises logs listener_failed."""
        _, _, notifier = state
        seen: list[int] = []

        def broken(_: Attempt) -> None:
            raise RuntimeError("printer on fire")

        notifier.add_listener(broken)
        with (
            caplog.at_level(logging.ERROR, logger="fake_rvc"),
            notifier.listening(lambda a: seen.append(a.n)),
        ):
            notifier.notify(attempt(3))
            notifier.notify(None)
        notifier.notify(attempt(4))  # the with-block listener is gone
        assert seen == [3]
        failed = [r for r in caplog.records if getattr(r, "event", None) == "listener_failed"]
        assert len(failed) == 2  # attempts 3 and 4; a reset calls no listener
        record = failed[0]
        assert record.exc_info is not None
        assert isinstance(record.exc_info[1], RuntimeError)


class TestFault:
    @pytest.mark.parametrize(
        ("kwargs", "words"),
        [
            ({}, "at least one"),
            ({"status": 503, "drop": True}, "not both"),
            ({"status": 99}, "100-599"),
            ({"delay_s": -1.0}, "0-3600"),
            ({"status": 503, "remaining": 0}, "at least 1"),
        ],
    )
    def test_an_invalid_fault_cannot_be_built(self, kwargs, words):
        with pytest.raises(FaultError, match=words):
            Fault(server="s", **kwargs)

    def test_empty_server_is_refused(self):
        with pytest.raises(FaultError, match="server name"):
            Fault(server="", status=503)

    def test_plan_queues_per_server_and_counts_down(self):
        plan = FaultPlan()
        plan.add(Fault(server="*", status=500))
        plan.add(Fault(server="s", status=503, remaining=2))
        assert [f.status for f in (plan.take("s"), plan.take("s"), plan.take("s"))] == [
            503,
            503,
            500,
        ]
        assert plan.take("s") is None
