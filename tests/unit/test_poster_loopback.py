"""EventPoster over a real loopback socket: uvicorn in a thread, the real clock, tiny delays.

This is the proof that the poster works outside MockTransport: real HTTP/1.1, real
keep-alive, signatures verified by ``robot_mcp_kit.signing.check`` against the real clock.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvicorn

from robot_mcp_kit import EventPoster, PosterStats, RetryPolicy, SignatureError, TaskEvent
from robot_mcp_kit.models import new_event_id, utc_now
from robot_mcp_kit.signing import check

SECRET = "loopback-secret"
TINY = RetryPolicy(delays_s=(0.01, 0.02, 0.04), then_every_s=0.05, give_up_after_s=0.5)


@dataclass
class FlakyBrain:
    """A minimal ASGI receiver: verifies the signature, answers 500 twice, then 200."""

    failures: int = 2
    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
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
        with self.lock:
            self.requests.append(
                {
                    "verdict": verdict,
                    "server": headers.get("x-rvc-server"),
                    "timestamp": headers.get("x-rvc-timestamp"),
                    "client_port": scope["client"][1],
                    "event": json.loads(body) if verdict == "ok" else None,
                }
            )
            n = len(self.requests)
        status = 401 if verdict != "ok" else (500 if n <= self.failures else 200)
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b'{"ok": true}'})


@pytest.fixture
def brain() -> Iterator[tuple[FlakyBrain, str]]:
    """Run FlakyBrain under uvicorn in a thread on a free loopback port; stop it after."""
    app = FlakyBrain()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, lifespan="off", log_config=None, access_log=False, ws="none")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            assert thread.is_alive(), "uvicorn thread died while starting"
            assert time.monotonic() < deadline, "uvicorn did not start within 10 s"
            time.sleep(0.01)
        yield app, f"http://127.0.0.1:{port}/api/agent/events"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
    assert not thread.is_alive()


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


async def test_poster_retries_500s_over_a_real_socket(brain):
    """Two 500s then 200 over real HTTP: delivered, every attempt verified, one connection."""
    app, url = brain
    poster = EventPoster("sleeper", url, SECRET, retry=TINY, timeout_s=5)
    events = [make_event(seq) for seq in (1, 2, 3)]
    try:
        for event in events:
            await poster.post(event)
        async with asyncio.timeout(10):
            await poster.flush()
    finally:
        await poster.aclose()

    assert [r["verdict"] for r in app.requests] == ["ok"] * 5
    assert all(r["server"] == "sleeper" for r in app.requests)
    # Attempts 1 and 2 of event 1 got 500; then event 1, 2, 3 went through in order.
    assert [r["event"]["seq"] for r in app.requests] == [1, 1, 1, 2, 3]
    assert [r["event"]["event_id"] for r in app.requests[2:]] == [e.event_id for e in events]
    assert len({r["client_port"] for r in app.requests}) == 1  # one kept-alive connection
    assert poster.stats == PosterStats(sent=3, retried=2, posted=3)


async def test_refused_connection_is_retried_then_given_up(caplog):
    """Nothing listening on the port: connection errors are retried, then given up."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    poster = EventPoster("sleeper", f"http://127.0.0.1:{port}/events", SECRET, retry=TINY)
    try:
        await poster.post(make_event(1))
        async with asyncio.timeout(10):
            await poster.flush()
    finally:
        await poster.aclose()
    stats = poster.stats
    assert stats.given_up == 1
    assert stats.sent == 0
    assert stats.retried >= 3
    assert any("ConnectError" in r.getMessage() for r in caplog.records if r.levelname == "ERROR")
