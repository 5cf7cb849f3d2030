"""The receiver served: its plain ASGI app (through httpx's ASGI transport and a lifespan
driven by hand) and its FastAPI router (TestClient, lifespan included)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from robot_mcp_kit import TaskEvent
from robot_mcp_kit.models import new_event_id, utc_now
from robot_mcp_kit.receiver import Receiver, ReceiverApp, ServerConfig, TaskUpdate
from robot_mcp_kit.signing import signed_headers

SECRET = "s3cret"


def event(seq: int, task_id: str = "slee-000001") -> TaskEvent:
    return TaskEvent(
        event_id=new_event_id(),
        task_id=task_id,
        server="sleeper",
        tool="sleep_task",
        type="progress",
        seq=seq,
        ts=utc_now(),
        payload={"percent": seq},
    )


def signed(body: bytes) -> dict[str, str]:
    return signed_headers("sleeper", SECRET, body, int(time.time()))


@pytest.fixture
def got() -> list[TaskUpdate]:
    return []


@pytest.fixture
def receiver(tmp_path, got) -> Receiver:
    async def handle(update: TaskUpdate) -> None:
        got.append(update)

    return Receiver(
        [ServerConfig("sleeper", (SECRET,))],
        handle,
        state=tmp_path / "r.db",
        reconcile_every_s=None,
        max_body_bytes=4_096,
    )


async def lifespan(app: ReceiverApp, phase: str) -> list[dict[str, Any]]:
    """Drive the app's lifespan through ``startup`` or ``shutdown``; what it sent."""
    sent: list[dict[str, Any]] = []
    messages = [{"type": "lifespan.startup"}] if phase == "startup" else []
    messages.append({"type": "lifespan.shutdown"})
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    for m in messages:
        queue.put_nowait(m)

    async def send(message: Any) -> None:
        sent.append(dict(message))

    await app({"type": "lifespan"}, queue.get, send)
    return sent


class TestAsgiApp:
    async def test_posts_are_answered_and_handed_over(self, receiver, got):
        """A valid post 200, again 200 duplicate, a forged one 401; the handler gets one."""
        app = receiver.asgi_app(inspect_path="/inspect")
        e = event(1)
        body = e.model_dump_json().encode()
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://brain") as client:
            first = await client.post("/api/agent/events", content=body, headers=signed(body))
            again = await client.post("/api/agent/events", content=body, headers=signed(body))
            forged = await client.post(
                "/api/agent/events",
                content=body,
                headers={**signed(body), "X-RVC-Signature": "sha256=" + "0" * 64},
            )
            for _ in range(200):
                if got:
                    break
                await asyncio.sleep(0.01)
            hook = await client.get("/inspect", params={"server": "sleeper", "task_id": e.task_id})
            bad_hook = await client.get("/inspect", params={"server": "sleeper"})
        await receiver.aclose()
        assert (first.status_code, first.json()["accepted"]) == (200, True)
        assert again.json() == {"duplicate": True, "event_id": e.event_id}
        assert (forged.status_code, forged.json()["error"]) == (401, "bad_signature")
        assert [u.seq for u in got] == [1]
        assert hook.json()["events"] == [{"event_id": e.event_id, "seq": 1, "type": "progress"}]
        assert (bad_hook.status_code, bad_hook.json()["error"]) == (422, "invalid_request")

    async def test_a_body_over_the_limit_is_refused_413_before_it_is_read(self, receiver):
        """Content-Length over max_body_bytes: 413 at once; a body that grows past it: 413."""
        app = receiver.asgi_app()
        transport = httpx.ASGITransport(app=app)
        big = b"x" * 5_000
        async with httpx.AsyncClient(transport=transport, base_url="http://brain") as client:
            declared = await client.post("/api/agent/events", content=big, headers=signed(big))

            async def chunks():
                for _ in range(5):
                    yield b"x" * 1_000

            streamed = await client.post("/api/agent/events", content=chunks(), headers=signed(big))
        await receiver.aclose()
        assert (declared.status_code, declared.json()["error"]) == (413, "too_large")
        assert (streamed.status_code, streamed.json()["error"]) == (413, "too_large")
        assert receiver.stats.accepted == 0

    async def test_other_paths_and_methods(self, receiver):
        app = receiver.asgi_app()
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://brain") as client:
            get = await client.get("/api/agent/events")
            nowhere = await client.post("/elsewhere", content=b"{}")
        await receiver.aclose()
        assert (get.status_code, get.json()["error"]) == (405, "method_not_allowed")
        assert (nowhere.status_code, nowhere.json()["error"]) == (404, "not_found")

    async def test_the_lifespan_starts_and_closes_the_receiver(self, receiver):
        """startup starts it; shutdown closes it; a post after that is 503, not a crash."""
        app = receiver.asgi_app()
        sent = await lifespan(app, "startup")
        assert [m["type"] for m in sent] == [
            "lifespan.startup.complete",
            "lifespan.shutdown.complete",
        ]
        status = receiver.status()
        assert (status.started, status.closed) == (True, True)
        body = event(1).model_dump_json().encode()
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://brain") as client:
            late = await client.post("/api/agent/events", content=body, headers=signed(body))
        assert (late.status_code, late.json()["error"]) == (503, "unavailable")


def test_the_fastapi_router_serves_the_same_routes_with_a_lifespan(receiver, got):
    """app.include_router(receiver.router()): the router's lifespan opens and closes it."""
    app = FastAPI()
    app.include_router(receiver.router(inspect_path="/inspect"))
    e = event(1)
    body = e.model_dump_json().encode()
    with TestClient(app) as client:
        assert receiver.status().started
        first = client.post("/api/agent/events", content=body, headers=signed(body))
        big = client.post("/api/agent/events", content=b"x" * 5_000, headers=signed(b"x"))
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:
            time.sleep(0.01)
        hook = client.get("/inspect", params={"server": "sleeper", "task_id": e.task_id})
    assert receiver.status().closed
    assert first.status_code == 200
    assert big.status_code == 413
    assert [u.seq for u in got] == [1]
    assert hook.json()["events"][0]["event_id"] == e.event_id
