"""Unit tests of EventPoster over a scripted httpx.MockTransport and a virtual clock.

The fake brain (:class:`Receiver`) verifies every request with ``robot_mcp_kit.signing.check``
at the virtual receive time, records it, and answers from a script. The kit's
:class:`~robot_mcp_kit.testing.FakeClock` advances virtual time instantly on ``sleep``, so
the 10-minute retry schedule runs in milliseconds and its pauses can be asserted exactly.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from robot_mcp_kit import (
    ConfigurationError,
    EventPoster,
    PosterStats,
    RetryPolicy,
    SignatureError,
    TaskEvent,
)
from robot_mcp_kit.models import new_event_id, utc_now
from robot_mcp_kit.signing import HEADER_SERVER, HEADER_SIGNATURE, HEADER_TIMESTAMP, check
from robot_mcp_kit.testing import FakeClock

SECRET = "s3cret"
URL = "http://brain.test/api/agent/events"
WALL0 = 1_765_532_000.7  # a fractional start so a 0.5 s pause changes the signed second
SPEC_PAUSES = [0.5, 2.0, 8.0] + [30.0] * 19  # attempts at 0, 0.5, 2.5, 10.5, 40.5 ... 580.5 s
LOGGER = "robot_mcp_kit.events"


@dataclass
class Attempt:
    """One request as the fake brain saw it."""

    body: bytes
    headers: httpx.Headers
    received_at: float  # virtual wall time at receipt
    event: dict[str, Any]

    @property
    def timestamp(self) -> int:
        return int(self.headers[HEADER_TIMESTAMP])


Outcome = int | BaseException | httpx.Response
Script = Callable[[int, Attempt], Outcome]


@dataclass
class Receiver:
    """A scripted fake of the brain's POST /api/agent/events.

    ``script(n, attempt)`` decides the answer to the n-th request (1-based): a status, an
    exception to raise (a transport failure) or a ready Response. Default: 200.
    """

    clock: FakeClock
    script: Script = lambda n, a: 200
    attempts: list[Attempt] = field(default_factory=list)
    delivered: list[dict[str, Any]] = field(default_factory=list)
    bad_signatures: list[str] = field(default_factory=list)

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        now = self.clock.time()
        try:
            check(
                SECRET,
                request.headers.get(HEADER_TIMESTAMP, ""),
                body,
                request.headers.get(HEADER_SIGNATURE, ""),
                now_s=now,
            )
        except SignatureError as exc:
            self.bad_signatures.append(exc.reason)
            return httpx.Response(401, json={"error": exc.reason})
        attempt = Attempt(body, request.headers, now, json.loads(body))
        self.attempts.append(attempt)
        outcome = self.script(len(self.attempts), attempt)
        if isinstance(outcome, BaseException):
            raise outcome
        response = outcome if isinstance(outcome, httpx.Response) else httpx.Response(outcome)
        if 200 <= response.status_code < 300:
            self.delivered.append(attempt.event)
        return response

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)


def make_event(task_id: str = "nav-7f3a2b", seq: int = 1, **payload: Any) -> TaskEvent:
    return TaskEvent(
        event_id=new_event_id(),
        task_id=task_id,
        server="navigation",
        tool="navigate_to",
        type="progress",
        seq=seq,
        ts=utc_now(),
        payload=payload or {"n": seq},
    )


def fail_first(n_failures: int, outcome: Outcome | Callable[[], Outcome]) -> Script:
    """Answer the first n requests with ``outcome``, then 200."""

    def script(n: int, attempt: Attempt) -> Outcome:
        if n > n_failures:
            return 200
        return outcome() if callable(outcome) else outcome

    return script


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(WALL0)


@pytest.fixture
def receiver(clock: FakeClock) -> Receiver:
    return Receiver(clock)


@pytest.fixture
async def make_poster(clock: FakeClock, receiver: Receiver):
    """Factory of posters wired to the fake brain and the virtual clock; closed after."""
    posters: list[EventPoster] = []

    def factory(**kwargs: Any) -> EventPoster:
        kwargs.setdefault("clock", clock)
        kwargs.setdefault("transport", receiver.transport)
        poster = EventPoster("navigation", URL, SECRET, **kwargs)
        posters.append(poster)
        return poster

    yield factory
    for poster in posters:
        await poster.aclose()


async def wait_until(predicate: Callable[[], bool], timeout_s: float = 5.0) -> None:
    """Poll ``predicate`` on the event loop until it holds, or fail after the deadline."""
    async with asyncio.timeout(timeout_s):
        while not predicate():
            await asyncio.sleep(0.001)


def messages(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == level]


class TestDelivery:
    async def test_event_is_posted_signed_with_the_spec_headers(
        self, make_poster, receiver, caplog
    ):
        """One POST per event: the model's JSON bytes, X-RVC-Server/-Timestamp/-Signature."""
        caplog.set_level(logging.DEBUG, LOGGER)
        poster = make_poster()
        event = make_event()
        await poster.post(event)
        await poster.flush()
        [attempt] = receiver.attempts
        assert attempt.body == event.model_dump_json().encode()
        assert attempt.headers[HEADER_SERVER] == "navigation"
        assert attempt.headers["Content-Type"] == "application/json"
        assert attempt.headers[HEADER_SIGNATURE].startswith("sha256=")
        assert receiver.bad_signatures == []
        assert poster.stats == PosterStats(sent=1, posted=1)
        assert any(
            m.startswith("event_delivered ") and event.event_id in m and "attempt=1" in m
            for m in messages(caplog, logging.DEBUG)
        )

    async def test_retry_on_500_then_success_resigns_each_attempt(
        self, make_poster, receiver, clock
    ):
        """A 500 is retried after 0.5 s; each attempt carries its own fresh, valid signature."""
        receiver.script = fail_first(1, 500)
        poster = make_poster()
        await poster.post(make_event())
        await poster.flush()
        first, second = receiver.attempts
        assert clock.sleeps == [0.5]
        assert first.body == second.body  # serialized once
        assert first.timestamp == int(WALL0)
        assert second.timestamp == int(WALL0 + 0.5)  # a fresh timestamp, not a replay
        assert first.headers[HEADER_SIGNATURE] != second.headers[HEADER_SIGNATURE]
        assert receiver.bad_signatures == []
        assert len(receiver.delivered) == 1
        assert poster.stats == PosterStats(sent=1, retried=1, posted=1)

    async def test_full_schedule_then_give_up_at_the_cap(
        self, make_poster, receiver, clock, caplog
    ):
        """Never acknowledged: pauses 0.5, 2, 8, then 30 s; given up ≤ 600 s, ERROR logged."""
        caplog.set_level(logging.WARNING, LOGGER)
        receiver.script = lambda n, a: 500
        poster = make_poster()
        event = make_event(task_id="nav-aaaaaa", seq=3)
        await poster.post(event)
        await poster.flush()
        assert clock.sleeps == SPEC_PAUSES
        assert len(receiver.attempts) == len(SPEC_PAUSES) + 1
        assert receiver.attempts[-1].received_at - WALL0 == 580.5
        assert clock.monotonic() <= 600.0
        assert poster.stats == PosterStats(retried=22, given_up=1, posted=1)
        [gave_up] = messages(caplog, logging.ERROR)
        assert event.event_id in gave_up
        assert gave_up.startswith("event_given_up ")
        assert "task_id='nav-aaaaaa'" in gave_up
        assert "seq=3" in gave_up
        assert "attempts=23" in gave_up
        assert "status 500" in gave_up
        assert len(messages(caplog, logging.WARNING)) == 22  # one per failed, retried attempt

    async def test_worker_goes_on_after_giving_up(self, make_poster, receiver):
        """After one event is given up the next one is still delivered."""
        receiver.script = lambda n, a: 500 if a.event["seq"] == 1 else 200
        poster = make_poster()
        await poster.post(make_event(seq=1))
        await poster.post(make_event(seq=2))
        await poster.flush()
        assert [e["seq"] for e in receiver.delivered] == [2]
        assert poster.stats.given_up == 1
        assert poster.stats.sent == 1

    async def test_retry_after_300s_still_carries_a_fresh_timestamp(
        self, make_poster, receiver, clock
    ):
        """A retry more than 300 s after the first attempt is re-signed and still verifies."""
        receiver.script = lambda n, a: 503 if a.received_at - WALL0 < 330 else 200
        poster = make_poster()
        await poster.post(make_event())
        await poster.flush()
        first, last = receiver.attempts[0], receiver.attempts[-1]
        assert last.received_at - first.received_at > 300
        assert receiver.bad_signatures == []  # every attempt verified at its receive time
        assert all(abs(a.timestamp - a.received_at) <= 300 for a in receiver.attempts)
        # The first attempt's signature, replayed at the last receive time, would be stale.
        with pytest.raises(SignatureError) as info:
            check(
                SECRET,
                first.headers[HEADER_TIMESTAMP],
                first.body,
                first.headers[HEADER_SIGNATURE],
                now_s=last.received_at,
            )
        assert info.value.reason == "stale_timestamp"
        assert len(receiver.delivered) == 1

    @pytest.mark.parametrize(
        ("header", "expected_pause"),
        [
            pytest.param("7", 7.0, id="seconds"),
            pytest.param("0.1", 0.5, id="shorter-than-schedule"),
            pytest.param("3600", 30.0, id="capped"),
            pytest.param("soon", 0.5, id="unparseable"),
            pytest.param(email.utils.formatdate(WALL0 + 12.7, usegmt=True), 12.0, id="http-date"),
            pytest.param(email.utils.formatdate(WALL0 - 60, usegmt=True), 0.5, id="past-date"),
            pytest.param("Mon, 30 Nov 2026 08:00:00 -0000", 0.5, id="date-without-zone"),
            pytest.param("-5", 0.5, id="negative"),
        ],
    )
    async def test_retry_after_is_a_capped_lower_bound(
        self, make_poster, receiver, clock, header, expected_pause
    ):
        """Retry-After lengthens the next pause up to 30 s and never shortens it."""
        receiver.script = fail_first(
            1, lambda: httpx.Response(503, headers={"Retry-After": header})
        )
        poster = make_poster()
        await poster.post(make_event())
        await poster.flush()
        assert clock.sleeps == [pytest.approx(expected_pause, abs=1.0)]
        assert len(receiver.delivered) == 1

    async def test_2xx_with_undecodable_body_is_acknowledged(self, make_poster, receiver):
        """The status decides: a 2xx whose body cannot be decoded is not re-sent."""
        receiver.script = lambda n, a: httpx.Response(
            202,
            headers={"Content-Encoding": "gzip"},
            stream=httpx.ByteStream(b"\x00not gzip at all"),  # content= would decode eagerly
        )
        poster = make_poster()
        await poster.post(make_event())
        await poster.flush()
        assert len(receiver.attempts) == 1
        assert poster.stats.sent == 1

    async def test_large_2xx_body_is_not_a_problem(self, make_poster, receiver):
        """A chatty receiver (a big 2xx body) still acknowledges; the next event follows."""
        receiver.script = lambda n, a: httpx.Response(200, stream=httpx.ByteStream(b"x" * 200_000))
        poster = make_poster()
        await poster.post(make_event(seq=1))
        await poster.post(make_event(seq=2))
        await poster.flush()
        assert poster.stats == PosterStats(sent=2, posted=2)
        assert len(receiver.attempts) == 2


FAILURES: dict[str, Callable[[], Outcome]] = {
    "connect-error": lambda: httpx.ConnectError("connection refused"),
    "read-timeout": lambda: httpx.ReadTimeout("timed out"),
    "connection-reset": lambda: httpx.RemoteProtocolError("peer closed connection"),
    "write-error": lambda: httpx.WriteError("broken pipe"),
    "non-httpx-exception": lambda: RuntimeError("handler blew up"),
    "400": lambda: 400,
    "404": lambda: 404,
    "429": lambda: 429,
    "500": lambda: 500,
    "503": lambda: 503,
    "garbage-body": lambda: httpx.Response(502, content=b"\xff\xfe<html>\x00garbage"),
    "1xx-status": lambda: httpx.Response(199),
    "3xx-redirect": lambda: httpx.Response(302, headers={"Location": "http://elsewhere.test/"}),
}


class TestNeverRaises:
    @pytest.mark.parametrize("kind", FAILURES)
    async def test_transient_failure_is_retried_then_delivered(self, make_poster, receiver, kind):
        """Three failures of any kind, then a 200: delivered once, post() never raised."""
        receiver.script = fail_first(3, FAILURES[kind])
        poster = make_poster()
        await poster.post(make_event())
        await poster.flush()
        assert len(receiver.delivered) == 1
        refused = int(kind in ("400", "404"))  # counted (and logged) as refusals, still retried
        assert poster.stats == PosterStats(sent=1, retried=3, posted=1, refused=refused)

    @pytest.mark.parametrize("kind", FAILURES)
    async def test_permanent_failure_is_given_up(self, make_poster, receiver, clock, kind):
        """A failure that never ends is retried to the cap and given up, post() never raised."""
        make = FAILURES[kind]
        receiver.script = lambda n, a: make()
        poster = make_poster()
        for seq in (1, 2):
            await poster.post(make_event(seq=seq))
        await poster.flush()
        assert receiver.delivered == []
        refused = 2 * (kind in ("400", "404"))
        assert poster.stats == PosterStats(retried=44, given_up=2, posted=2, refused=refused)
        assert clock.sleeps == SPEC_PAUSES * 2

    async def test_unserializable_payload_is_dropped_not_raised(self, make_poster, caplog):
        """An event whose payload cannot become JSON is logged and counted, not raised."""
        poster = make_poster()
        event = make_event(thing=object())
        await poster.post(event)
        assert poster.stats.dropped == 1
        assert poster.stats.posted == 0
        assert any(event.event_id in m for m in messages(caplog, logging.ERROR))

    async def test_a_bug_in_delivery_does_not_kill_the_worker(self, make_poster, receiver, caplog):
        """An unexpected error while delivering gives that event up; the next is delivered."""

        @dataclass(frozen=True)
        class BrokenPolicy(RetryPolicy):
            def next_delay(self, attempt, elapsed_s, retry_after_s=None):
                raise ZeroDivisionError("policy bug")

        receiver.script = lambda n, a: 500 if a.event["seq"] == 1 else 200
        poster = make_poster(retry=BrokenPolicy())
        await poster.post(make_event(seq=1))
        await poster.post(make_event(seq=2))
        await poster.flush()
        assert [e["seq"] for e in receiver.delivered] == [2]
        assert poster.stats == PosterStats(sent=1, given_up=1, posted=2)
        assert any("unexpected error" in m for m in messages(caplog, logging.ERROR))


class TestOrdering:
    async def test_order_is_preserved_under_1000_concurrent_posts(self, make_poster, receiver):
        """1 000 posts from 50 tasks, some retried: every one delivered, each task in seq."""
        receiver.script = lambda n, a: 500 if n % 7 == 0 else 200
        poster = make_poster()

        async def producer(task_no: int) -> None:
            task_id = f"nav-{task_no:06x}"
            for seq in range(1, 21):
                await poster.post(make_event(task_id=task_id, seq=seq))
                await asyncio.sleep(0)

        async with asyncio.TaskGroup() as group:
            for task_no in range(50):
                group.create_task(producer(task_no))
        await poster.flush()

        arrived = [(e["task_id"], e["seq"]) for e in receiver.delivered]
        assert len(arrived) == 1000
        by_task: dict[str, list[int]] = {}
        for task_id, seq in arrived:
            by_task.setdefault(task_id, []).append(seq)
        assert len(by_task) == 50
        assert all(seqs == list(range(1, 21)) for seqs in by_task.values())
        # A retried event is always sent again before its task's next one.
        for task_id in by_task:
            tried = [a.event["seq"] for a in receiver.attempts if a.event["task_id"] == task_id]
            assert tried == sorted(tried), task_id
        assert poster.stats.retried > 100
        assert poster.stats.sent == 1000


class TestLanes:
    """Each task's events go out in seq order; different tasks' events do not wait on each other."""

    async def test_a_refused_task_holds_back_only_its_own_events(
        self, make_poster, receiver: Receiver, clock: FakeClock, caplog
    ):
        """Task A's event answered 413 for ever: task B's events all arrive meanwhile."""
        receiver.script = lambda n, a: 413 if a.event["task_id"] == "nav-00000a" else 200
        poster = make_poster()
        await poster.post(make_event(task_id="nav-00000a", seq=1))
        await poster.post(make_event(task_id="nav-00000a", seq=2))
        await wait_until(lambda: len(receiver.attempts) >= 2)  # A refused, retrying
        for seq in range(1, 6):
            await poster.post(make_event(task_id="nav-00000b", seq=seq))
        await wait_until(lambda: len(receiver.delivered) == 5)
        assert [(e["task_id"], e["seq"]) for e in receiver.delivered] == [
            ("nav-00000b", seq) for seq in range(1, 6)
        ]
        assert clock.monotonic() < 600  # B did not wait for A's retry cap
        # A's seq 2 was never sent while seq 1 was still undelivered.
        a_tried = [a.event["seq"] for a in receiver.attempts if a.event["task_id"] == "nav-00000a"]
        assert set(a_tried) == {1}
        await poster.flush()  # A's events reach the cap, in order
        a_tried = [a.event["seq"] for a in receiver.attempts if a.event["task_id"] == "nav-00000a"]
        assert a_tried == sorted(a_tried)
        assert a_tried[-1] == 2
        stats = poster.stats
        assert (stats.sent, stats.given_up, stats.refused, stats.queued) == (5, 2, 2, 0)
        refusals = [m for m in messages(caplog, logging.ERROR) if m.startswith("event_refused ")]
        assert len(refusals) == 2  # once per event, not once per attempt
        assert "status=413" in refusals[0]
        assert "max_payload_bytes" in refusals[0]

    @pytest.mark.parametrize(
        ("status", "hint"),
        [
            (401, "RVC_EVENT_SECRET"),
            (403, "RVC_EVENT_SECRET"),
            (404, "RVC_CALLBACK_URL"),
            (400, "docs/contract.md"),
            (422, "docs/contract.md"),
            (413, "max_payload_bytes"),
        ],
    )
    async def test_a_refusal_is_logged_with_its_fix_and_still_retried(
        self, make_poster, receiver: Receiver, caplog, status, hint
    ):
        """Every non-2xx is retried: a refusal fixed in time (a rotated secret) delivers."""
        receiver.script = fail_first(3, status)
        poster = make_poster()
        await poster.post(make_event(seq=1))
        await poster.flush()
        assert [e["seq"] for e in receiver.delivered] == [1]
        assert poster.stats == PosterStats(sent=1, retried=3, refused=1, posted=1)
        (line,) = [m for m in messages(caplog, logging.ERROR) if m.startswith("event_refused ")]
        assert f"status={status}" in line
        assert hint in line

    async def test_a_server_error_is_not_a_refusal(self, make_poster, receiver: Receiver, caplog):
        receiver.script = fail_first(2, 503)
        poster = make_poster()
        await poster.post(make_event(seq=1))
        await poster.flush()
        assert poster.stats.refused == 0
        assert not [m for m in messages(caplog, logging.ERROR) if m.startswith("event_refused")]

    async def test_attempts_under_way_are_bounded_by_max_in_flight(self, make_poster, receiver):
        """Ten tasks' events at once against a slow receiver: never more than 3 attempts."""
        busy = peak = 0
        gate = asyncio.Event()

        async def slow(request: httpx.Request) -> httpx.Response:
            nonlocal busy, peak
            busy += 1
            peak = max(peak, busy)
            try:
                await gate.wait()
                return await receiver(request)
            finally:
                busy -= 1

        poster = make_poster(transport=httpx.MockTransport(slow), max_in_flight=3)
        for task_no in range(10):
            for seq in (1, 2):
                await poster.post(make_event(task_id=f"nav-{task_no:06x}", seq=seq))
        await wait_until(lambda: busy == 3)
        await asyncio.sleep(0.05)
        assert busy == 3
        gate.set()
        await poster.flush()
        assert peak == 3
        assert len(receiver.delivered) == 20

    async def test_one_lane_at_a_time_still_does_not_block_on_a_pause(
        self, make_poster, receiver: Receiver
    ):
        """max_in_flight=1: task B's event goes out while task A waits out a retry pause."""
        receiver.script = lambda n, a: 500 if a.event["task_id"] == "nav-00000a" and n == 1 else 200
        poster = make_poster(max_in_flight=1)
        await poster.post(make_event(task_id="nav-00000a", seq=1))
        await poster.post(make_event(task_id="nav-00000b", seq=1))
        await poster.flush()
        order = [(a.event["task_id"], a.event["seq"]) for a in receiver.attempts]
        assert order == [("nav-00000a", 1), ("nav-00000b", 1), ("nav-00000a", 1)]

    def test_max_in_flight_below_one_is_refused(self):
        with pytest.raises(ConfigurationError, match="max_in_flight must be >= 1, got 0"):
            EventPoster("navigation", URL, SECRET, max_in_flight=0)


class TestBoundedQueue:
    async def test_full_queue_drops_the_oldest_and_counts_it(
        self, make_poster, receiver: Receiver, caplog
    ):
        """With queue_max=3 and the head stuck in flight, the oldest waiting events go first."""
        entered, release = asyncio.Event(), asyncio.Event()

        async def blocking(request: httpx.Request) -> httpx.Response:
            entered.set()
            await release.wait()
            return await receiver(request)

        poster = make_poster(queue_max=3, transport=httpx.MockTransport(blocking))
        events = [make_event(seq=i) for i in range(1, 7)]
        await poster.post(events[0])
        await entered.wait()  # event 1 is in flight, the queue is empty
        for event in events[1:]:
            await poster.post(event)
        assert poster.stats.dropped == 2
        assert poster.stats.queued == 4  # three waiting + one in flight
        errors = messages(caplog, logging.ERROR)
        assert len(errors) == 2
        for event, line in zip(events[1:3], errors, strict=True):
            assert event.event_id in line
            assert f"seq={event.seq}" in line
            assert event.task_id in line
            assert "reason='the queue is full'" in line

        release.set()
        await poster.flush()
        assert [e["seq"] for e in receiver.delivered] == [1, 4, 5, 6]
        assert poster.stats == PosterStats(sent=4, dropped=2, posted=6)

    async def test_post_returns_while_the_network_is_stuck(self, make_poster):
        """post() does not wait for the network: it returns while the send hangs."""
        entered = asyncio.Event()

        async def hang(request: httpx.Request) -> httpx.Response:
            entered.set()
            await asyncio.Event().wait()
            raise AssertionError("unreachable")  # pragma: no cover

        poster = make_poster(transport=httpx.MockTransport(hang), close_grace_s=0.01)
        await poster.post(make_event(seq=1))
        await entered.wait()
        async with asyncio.timeout(1):
            for seq in range(2, 102):
                await poster.post(make_event(seq=seq))
        assert poster.stats.queued == 101


class TestClose:
    async def test_queued_events_are_delivered_within_the_grace(self, make_poster, receiver):
        """aclose() right after posting still delivers everything queued."""
        poster = make_poster()
        for seq in range(1, 6):
            await poster.post(make_event(seq=seq))
        await poster.aclose()
        assert [e["seq"] for e in receiver.delivered] == [1, 2, 3, 4, 5]
        assert poster.stats == PosterStats(sent=5, posted=5)

    async def test_after_the_grace_the_rest_is_dropped_and_logged(self, make_poster, caplog):
        """A receiver that never answers: aclose() returns after the grace, dropping all."""
        caplog.set_level(logging.INFO, LOGGER)
        entered = asyncio.Event()

        async def hang(request: httpx.Request) -> httpx.Response:
            entered.set()
            await asyncio.Event().wait()
            raise AssertionError("unreachable")  # pragma: no cover

        poster = make_poster(transport=httpx.MockTransport(hang), close_grace_s=0.2)
        for seq in range(1, 4):
            await poster.post(make_event(seq=seq))
        await entered.wait()
        async with asyncio.timeout(5):
            await poster.aclose()
        assert poster.stats == PosterStats(dropped=3, posted=3)
        [warning] = messages(caplog, logging.WARNING)
        assert warning.startswith("poster_closed ")
        assert "dropped=3" in warning

    async def test_retry_pauses_past_the_grace_are_cut_short(
        self, make_poster, receiver, clock, caplog
    ):
        """While closing, an event whose next pause would end past the grace is dropped."""
        receiver.script = lambda n, a: 500
        poster = make_poster(close_grace_s=5.0)
        await poster.post(make_event(seq=1))
        await poster.post(make_event(seq=2))
        await poster.aclose()
        assert clock.sleeps == [0.5, 2.0]  # the 8 s pause would end at 10.5 s > 5 s
        assert poster.stats == PosterStats(retried=2, dropped=2, posted=2)
        assert any(
            m.startswith("poster_closed ") and "dropped=2" in m
            for m in messages(caplog, logging.WARNING)
        )

    async def test_aclose_is_idempotent_and_post_after_close_is_dropped(
        self, make_poster, receiver, caplog
    ):
        """A second aclose() is harmless; post() afterwards logs, counts, and never raises."""
        poster = make_poster()
        await poster.post(make_event(seq=1))
        await poster.aclose()
        await poster.aclose()
        late = make_event(seq=2)
        await poster.post(late)
        assert poster.stats == PosterStats(sent=1, dropped=1, posted=1)
        assert any(late.event_id in m for m in messages(caplog, logging.WARNING))
        assert [e["seq"] for e in receiver.delivered] == [1]
        await poster.flush()  # returns at once after close

    async def test_concurrent_aclose_calls_both_wait_for_the_end(self, make_poster, receiver):
        """Two aclose() at once: both return after delivery, neither raises."""
        poster = make_poster()
        for seq in range(1, 4):
            await poster.post(make_event(seq=seq))
        await asyncio.gather(poster.aclose(), poster.aclose())
        assert poster.stats.sent == 3
        assert poster.stats.queued == 0

    async def test_aclose_without_any_post_is_a_no_op(self, make_poster, receiver):
        """Closing a poster that never posted sends nothing and counts nothing."""
        poster = make_poster()
        await poster.aclose()
        assert receiver.attempts == []
        assert poster.stats == PosterStats()

    async def test_async_context_manager_closes(self, make_poster, receiver):
        """``async with poster`` delivers and closes on exit."""
        async with make_poster() as poster:
            await poster.post(make_event())
        assert len(receiver.delivered) == 1
        assert "closed" in repr(poster)


class TestStatsAndRepr:
    async def test_repr_shows_counters_and_not_the_secret(self, make_poster, receiver):
        """repr() names the server, URL and counters; the secret never appears."""
        receiver.script = fail_first(1, 500)
        poster = make_poster()
        await poster.post(make_event())
        await poster.flush()
        text = repr(poster)
        assert "server='navigation'" in text
        assert URL in text
        assert "sent=1" in text
        assert "retried=1" in text
        assert "queued=0" in text
        assert SECRET not in text


class TestConfiguration:
    async def test_unset_url_is_no_op_mode_with_debug_log(self, monkeypatch, caplog, receiver):
        """RVC_CALLBACK_URL unset: nothing is sent, the event is logged at DEBUG."""
        monkeypatch.delenv("RVC_CALLBACK_URL", raising=False)
        monkeypatch.delenv("RVC_EVENT_SECRET", raising=False)
        caplog.set_level(logging.DEBUG, LOGGER)
        poster = EventPoster("navigation", transport=receiver.transport)
        assert not poster.enabled
        event = make_event()
        await poster.post(event)
        await poster.flush()
        await poster.aclose()
        assert receiver.attempts == []
        [line] = messages(caplog, logging.DEBUG)
        assert event.event_id in line
        assert "no-op" in line
        assert poster.stats == PosterStats()
        assert "no-op" in repr(poster)

    @pytest.mark.parametrize("value", ["", "   "])
    def test_empty_url_is_no_op_mode(self, monkeypatch, value):
        """An empty RVC_CALLBACK_URL counts as unset."""
        monkeypatch.setenv("RVC_CALLBACK_URL", value)
        monkeypatch.delenv("RVC_EVENT_SECRET", raising=False)
        assert not EventPoster("navigation").enabled

    @pytest.mark.parametrize("secret", [None, ""])
    def test_url_without_secret_raises_naming_the_variable(self, monkeypatch, secret):
        """A URL with no (or an empty) secret fails fast, naming RVC_EVENT_SECRET."""
        monkeypatch.setenv("RVC_CALLBACK_URL", URL)
        monkeypatch.delenv("RVC_EVENT_SECRET", raising=False)
        with pytest.raises(ConfigurationError, match="RVC_EVENT_SECRET"):
            EventPoster("navigation", secret=secret)

    def test_empty_secret_in_env_raises(self, monkeypatch):
        """RVC_EVENT_SECRET set but empty is as good as missing."""
        monkeypatch.setenv("RVC_EVENT_SECRET", "")
        with pytest.raises(ConfigurationError, match="RVC_EVENT_SECRET"):
            EventPoster("navigation", callback_url=URL)

    @pytest.mark.parametrize(
        "url", ["ftp://brain.test/events", "brain.test/events", "http://", "http://[::1"]
    )
    def test_non_http_url_raises(self, url):
        """The callback URL must be http(s) with a host."""
        with pytest.raises(ConfigurationError, match="RVC_CALLBACK_URL"):
            EventPoster("navigation", callback_url=url, secret=SECRET)

    @pytest.mark.parametrize(
        "kwargs",
        [
            {"server_name": ""},
            {"server_name": "nav\nX-Evil: 1"},
            {"queue_max": 0},
            {"close_grace_s": -1},
            {"timeout_s": 0},
        ],
    )
    def test_invalid_settings_raise(self, kwargs):
        """Bad bounds or a server name unfit for a header fail at construction."""
        kwargs = {"server_name": "navigation", **kwargs}
        with pytest.raises(ConfigurationError):
            EventPoster(callback_url=URL, secret=SECRET, **kwargs)

    async def test_env_configures_url_and_secret(self, monkeypatch, receiver, clock):
        """With both variables set the poster posts there, signed with that secret."""
        monkeypatch.setenv("RVC_CALLBACK_URL", URL)
        monkeypatch.setenv("RVC_EVENT_SECRET", SECRET)
        poster = EventPoster("navigation", transport=receiver.transport, clock=clock)
        await poster.post(make_event())
        await poster.aclose()
        assert receiver.bad_signatures == []
        assert len(receiver.delivered) == 1

    async def test_arguments_override_the_environment(self, monkeypatch, clock):
        """Explicit callback_url and secret win over the variables."""
        monkeypatch.setenv("RVC_CALLBACK_URL", "http://wrong.test/")
        monkeypatch.setenv("RVC_EVENT_SECRET", "wrong")
        seen: list[httpx.Request] = []

        def record(request: httpx.Request) -> httpx.Response:
            seen.append(request)
            return httpx.Response(200)

        poster = EventPoster(
            "navigation", URL, SECRET, transport=httpx.MockTransport(record), clock=clock
        )
        await poster.post(make_event())
        await poster.aclose()
        [request] = seen
        assert str(request.url) == URL
        check(
            SECRET,
            request.headers[HEADER_TIMESTAMP],
            request.content,
            request.headers[HEADER_SIGNATURE],
            now_s=clock.time(),
        )

    def test_poster_survives_its_loop_ending_without_aclose(
        self, receiver: Receiver, clock, caplog
    ):
        """A module-level poster used by two asyncio.run() in turn: the queue carries over."""
        entered = asyncio.Event()
        calls = 0

        async def first_hangs(request: httpx.Request) -> httpx.Response:
            nonlocal calls
            calls += 1
            if calls == 1:
                entered.set()
                await asyncio.Event().wait()
            return await receiver(request)

        poster = EventPoster(
            "navigation", URL, SECRET, transport=httpx.MockTransport(first_hangs), clock=clock
        )

        async def first_run() -> None:
            await poster.post(make_event(seq=1))
            await poster.post(make_event(seq=2))
            await entered.wait()  # seq 1 in flight when this loop ends

        async def second_run() -> None:
            await poster.post(make_event(seq=3))
            await poster.aclose()

        asyncio.run(first_run())
        asyncio.run(second_run())
        assert [e["seq"] for e in receiver.delivered] == [1, 2, 3]
        assert any(m.startswith("poster_loop_changed ") for m in messages(caplog, logging.WARNING))

    def test_construction_needs_no_running_loop(self, receiver):
        """A poster built at import time (no loop) works once a loop runs."""
        poster = EventPoster(
            "navigation",
            URL,
            SECRET,
            transport=receiver.transport,
            clock=receiver.clock,
            retry=RetryPolicy(),
        )

        async def main() -> None:
            await poster.post(make_event())
            await poster.aclose()

        asyncio.run(main())
        assert len(receiver.delivered) == 1
