"""EventPoster against receivers that trickle their answer: one attempt is bounded as a whole.

Issue 9, finding 3: ``timeout_s`` used to bound each network read, so a receiver that sent
a byte every 0.2 s held one attempt (and the whole queue behind it) open for as long as it
liked. Here a real asyncio server on a loopback port (port 0) answers scripted requests,
sending a prefix at once and the rest one byte per :data:`DRIP_S`; each drip would take a
minute, and every test must finish far sooner. The only timed assertions are generous
"did not hang" bounds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from robot_mcp_kit import EventPoster, RetryPolicy, SignatureError, TaskEvent
from robot_mcp_kit.models import new_event_id, utc_now
from robot_mcp_kit.signing import check

SECRET = "trickle-secret"
TINY = RetryPolicy(delays_s=(0.01, 0.02, 0.04), then_every_s=0.05, give_up_after_s=30)
DRIP_S = 0.2
DRIPPED = 300
"""Bytes dripped per trickled answer: 300 x 0.2 s = 60 s if the poster waited for them."""
ATTEMPT_S = 1.0
"""The poster's ``timeout_s`` in these tests: the bound of one whole attempt."""
DID_NOT_HANG_S = 10.0
"""Generous: every test is done in a few seconds; a poster that waits for a drip needs 60."""

FAST_200 = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


@dataclass(frozen=True)
class Answer:
    """Bytes to answer one request with: ``data[:at_once]`` at once, the rest dripped."""

    data: bytes
    at_once: int


def fast_200() -> Answer:
    return Answer(FAST_200, len(FAST_200))


def trickled_body(status: str) -> Answer:
    """A complete head at once, then a ``DRIPPED``-byte body one byte per ``DRIP_S``."""
    head = f"HTTP/1.1 {status}\r\nContent-Length: {DRIPPED}\r\n\r\n".encode()
    return Answer(head + b"x" * DRIPPED, len(head))


def trickled_head(at_once: int) -> Answer:
    """A 200 whose head is dripped from byte ``at_once`` on (0: the status line itself)."""
    head = f"HTTP/1.1 200 OK\r\nX-Pad: {'p' * DRIPPED}\r\nContent-Length: 2\r\n\r\n{{}}".encode()
    return Answer(head, at_once)


@dataclass
class TrickleReceiver:
    """A raw HTTP/1.1 receiver: verifies each POST's signature, answers from a script.

    Each request takes the next scripted :class:`Answer`; when the script is used up it
    answers a fast 200. Connections are kept alive as long as the client keeps them.
    """

    script: deque[Answer] = field(default_factory=deque)
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""
    _server: asyncio.Server | None = None
    _handlers: set[asyncio.Task[Any]] = field(default_factory=set)
    _connections: int = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/api/agent/events"

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self._connections += 1
        connection = self._connections
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                headers = {
                    k.strip().lower(): v.strip()
                    for k, _, v in (line.partition(":") for line in lines[1:] if line)
                }
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                try:
                    check(
                        SECRET,
                        headers.get("x-rvc-timestamp", ""),
                        body,
                        headers.get("x-rvc-signature", ""),
                    )
                    verdict = "ok"
                except SignatureError as exc:
                    verdict = exc.reason
                self.requests.append(
                    {
                        "verdict": verdict,
                        "seq": json.loads(body)["seq"],
                        "connection": connection,
                        "at": time.monotonic(),
                    }
                )
                answer = self.script.popleft() if self.script else fast_200()
                writer.write(answer.data[: answer.at_once])
                await writer.drain()
                for i in range(answer.at_once, len(answer.data)):
                    await asyncio.sleep(DRIP_S)
                    if reader.at_eof():  # the client gave up on this answer and closed
                        return
                    writer.write(answer.data[i : i + 1])
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            return  # the client closed the connection
        finally:
            writer.close()
            self._handlers.discard(task)


@pytest.fixture
async def receiver() -> AsyncIterator[TrickleReceiver]:
    """A TrickleReceiver on a free loopback port, stopped (handlers cancelled) after the test."""
    rx = TrickleReceiver()
    await rx.start()
    try:
        yield rx
    finally:
        await rx.stop()


def make_event(seq: int) -> TaskEvent:
    return TaskEvent(
        event_id=new_event_id(),
        task_id="slee-0a1b2c",
        server="sleeper",
        tool="sleep_task",
        type="progress",
        seq=seq,
        ts=utc_now(),
        payload={"percent": 10 * seq},
    )


async def deliver_two(receiver: TrickleReceiver) -> tuple[EventPoster, float]:
    """Post events seq 1 and 2, wait until both are settled; return the poster and seconds."""
    poster = EventPoster("sleeper", receiver.url, SECRET, retry=TINY, timeout_s=ATTEMPT_S)
    started = time.monotonic()
    try:
        await poster.post(make_event(1))
        await poster.post(make_event(2))
        # Fails the test (TimeoutError) instead of waiting out a minute-long drip.
        async with asyncio.timeout(DID_NOT_HANG_S * 2):
            await poster.flush()
        return poster, time.monotonic() - started
    finally:
        with contextlib.suppress(Exception):
            await poster.aclose()


class TestWholeAttemptDeadline:
    async def test_2xx_with_a_trickled_body_is_delivered_and_the_next_event_follows(self, receiver):
        """A 200 whose body drips for a minute counts as delivered at once; event 2 follows."""
        receiver.script.append(trickled_body("200 OK"))
        poster, took_s = await deliver_two(receiver)

        assert took_s < DID_NOT_HANG_S
        assert [(r["seq"], r["verdict"]) for r in receiver.requests] == [(1, "ok"), (2, "ok")]
        stats = poster.stats
        assert (stats.sent, stats.retried, stats.given_up, stats.queued) == (2, 0, 0, 0)

    @pytest.mark.parametrize(
        "at_once",
        [
            pytest.param(0, id="status-line-dripped"),
            pytest.param(len(b"HTTP/1.1 200 OK\r\n"), id="headers-dripped"),
        ],
    )
    async def test_a_trickled_head_fails_the_attempt_within_the_bound_then_retries(
        self, receiver, caplog, at_once
    ):
        """No complete status and headers within timeout_s: a failed attempt, retried."""
        receiver.script.append(trickled_head(at_once))
        with caplog.at_level(logging.WARNING, logger="robot_mcp_kit.events"):
            poster, took_s = await deliver_two(receiver)

        assert took_s < DID_NOT_HANG_S
        assert [(r["seq"], r["verdict"]) for r in receiver.requests] == [
            (1, "ok"),
            (1, "ok"),
            (2, "ok"),
        ]
        first, retry = receiver.requests[0], receiver.requests[1]
        assert retry["at"] - first["at"] < DID_NOT_HANG_S
        assert retry["connection"] != first["connection"]  # the stuck connection was dropped
        stats = poster.stats
        assert (stats.sent, stats.retried, stats.given_up, stats.queued) == (2, 1, 0, 0)
        assert any("attempt deadline" in r.getMessage() for r in caplog.records)

    async def test_a_trickled_non_2xx_is_a_failed_attempt_and_is_retried(self, receiver):
        """A 503 whose body drips is a failure like any 503: retried, then delivered."""
        receiver.script.append(trickled_body("503 Service Unavailable"))
        poster, took_s = await deliver_two(receiver)

        assert took_s < DID_NOT_HANG_S
        assert [r["seq"] for r in receiver.requests] == [1, 1, 2]
        stats = poster.stats
        assert (stats.sent, stats.retried, stats.given_up, stats.queued) == (2, 1, 0, 0)

    async def test_every_attempt_at_a_receiver_that_always_trickles_is_bounded(self, receiver):
        """A receiver that trickles every head: each attempt ends within the bound, none hangs.

        Three trickled attempts at one event, then a fast 200: three failures, one retry
        after each, the fourth delivers; the event behind it is not starved.
        """
        for _ in range(3):
            receiver.script.append(trickled_head(0))
        poster, took_s = await deliver_two(receiver)

        assert took_s < DID_NOT_HANG_S
        assert [r["seq"] for r in receiver.requests] == [1, 1, 1, 1, 2]
        stats = poster.stats
        assert (stats.sent, stats.retried, stats.given_up) == (2, 3, 0)
