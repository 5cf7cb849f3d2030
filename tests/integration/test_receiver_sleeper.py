"""The receiver against the real sleeper (a child process) over real HTTP, both transports.

The receiver is served by uvicorn on a loopback port as a brain would serve it
(``receiver.asgi_app()``); the sleeper posts its signed events there. Two things are
checked over SSE and over streamable HTTP:

- gap repair: a thin HTTP front answers 200 for two of a task's posts and drops them (a
  receiver that acknowledged and lost them, or a proxy that did), so the next post shows a
  hole; the receiver fetches the missing events with ``get_task_events`` and the handler
  gets every event once, in order — exactly the server's ``get_task_events`` sequence;
- reconciliation at start: the receiver is down while a task runs and finishes; at its
  start it asks ``list_tasks`` and ``get_task_events`` and hands the events over before
  the poster's retries arrive (which are then duplicates).

And the bearer token of a server's MCP endpoint: sent, and without it the server is
reported unreachable.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from robot_mcp_kit.receiver import Receiver, ServerConfig, TaskUpdate
from robot_mcp_kit.testing import ServiceProcess, free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

REPO = Path(__file__).resolve().parents[2]
SLEEPER = REPO / "examples" / "sleeper.py"
SECRET = "receiver-it-secret"


@contextlib.contextmanager
def served(app: Any, port: int = 0) -> Iterator[str]:
    """Serve an ASGI app (lifespan on) in a thread on a loopback port (0: a free one);
    its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=lambda: server.run(sockets=[sock]), daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive(), "the app's thread ended before it started"
        assert time.monotonic() < deadline, "the app did not start in 30 s"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()


class Front:
    """An ASGI front before the receiver's app (a fake at the HTTP boundary): answers 503
    while ``closed`` (the brain is down); answers 200 for the posts of the seqs in ``lose``
    without passing them on (acknowledged, then lost); passes everything else on."""

    def __init__(self, app: Any, *, lose: Iterable[int] = (), closed: bool = False) -> None:
        self.app = app
        self.lose = set(lose)
        self.lost: list[int] = []
        self.closed = closed

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or (not self.lose and not self.closed):
            await self.app(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        if self.closed:
            await _answer(send, 503)
            return
        try:
            seq = json.loads(body)["seq"]
        except (ValueError, KeyError, TypeError):
            seq = None
        if seq in self.lose:
            self.lose.discard(seq)
            self.lost.append(seq)
            await _answer(send, 200)
            return
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return {"type": "http.disconnect"}
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


async def _answer(send: Any, status: int) -> None:
    await send({"type": "http.response.start", "status": status, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


class Brain:
    """A receiver whose handler records each update (thread-safe to read)."""

    def __init__(self, path: Path, mcp_url: str, **options: Any) -> None:
        self.updates: list[TaskUpdate] = []
        self._lock = threading.Lock()

        async def handle(update: TaskUpdate) -> None:
            with self._lock:
                self.updates.append(update)

        self.receiver = Receiver(
            [ServerConfig("sleeper", (SECRET,), mcp_url=mcp_url)],
            handle,
            state=path,
            repair_wait_s=0.2,
            **options,
        )

    def events_of(self, task_id: str) -> list[dict[str, Any]]:
        with self._lock:
            return [
                json.loads(u.event.model_dump_json())
                for u in self.updates
                if u.task_id == task_id and u.event is not None
            ]

    def sources(self, task_id: str) -> list[str]:
        with self._lock:
            return [u.source for u in self.updates if u.task_id == task_id]

    def wait_for(self, check: Any, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not check():
            assert time.monotonic() < deadline, f"timed out; updates: {self.updates!r}"
            time.sleep(0.05)


@contextlib.contextmanager
def sleeper(transport: str, callback_url: str) -> Iterator[str]:
    """The sleeper on a free port posting to ``callback_url``; its MCP URL."""
    port = free_port()
    child = ServiceProcess(
        "sleeper",
        [sys.executable, str(SLEEPER)],
        port,
        env={
            "MCP_TRANSPORT": transport,
            "MCP_PORT": str(port),
            "RVC_CALLBACK_URL": callback_url,
            "RVC_EVENT_SECRET": SECRET,
            "RVC_OUTBOX": "",
        },
    )
    child.start(ready_timeout_s=60)
    try:
        path = "/sse" if transport == "sse" else "/mcp"
        yield f"http://127.0.0.1:{port}{path}"
    finally:
        child.close()


@contextlib.asynccontextmanager
async def session(url: str):  # type: ignore[no-untyped-def]
    if url.endswith("/sse"):
        cm: Any = sse_client(url)
    else:
        cm = streamable_http_client(url)
    async with cm as streams, ClientSession(streams[0], streams[1]) as s:
        await s.initialize()
        yield s


async def call(url: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    async with session(url) as s:
        result = await s.call_tool(tool, args)
    data: dict[str, Any] = json.loads(result.content[0].text)  # type: ignore[union-attr]
    return data


async def server_events(url: str, task_id: str) -> list[dict[str, Any]]:
    page = await call(url, "get_task_events", {"task_id": task_id, "after_seq": 0})
    events: list[dict[str, Any]] = page["events"]
    return events


@pytest.mark.parametrize("transport", ["sse", "streamable-http"])
def test_a_hole_is_repaired_from_get_task_events(transport: str, tmp_path: Path) -> None:
    """Two posts acknowledged and lost: repaired; the handler's sequence is the server's."""
    callback_port = free_port()
    with sleeper(transport, f"http://127.0.0.1:{callback_port}/api/agent/events") as mcp_url:
        brain = Brain(tmp_path / "r.db", mcp_url, reconcile_every_s=None)
        front = Front(brain.receiver.asgi_app(), lose={3, 4})
        with served(front, callback_port):
            started = asyncio.run(call(mcp_url, "sleep_task", {"duration_s": 1.2, "tick_s": 0.2}))
            task_id = started["task_id"]
            brain.wait_for(lambda: any(e["type"] == "task_done" for e in brain.events_of(task_id)))
            expected = asyncio.run(server_events(mcp_url, task_id))
    assert front.lost == [3, 4]
    assert brain.events_of(task_id) == expected
    assert [e["seq"] for e in expected] == list(range(1, len(expected) + 1))
    sources = brain.sources(task_id)
    assert sources[2:4] == ["repair", "repair"]
    assert sources.count("repair") == 2


@pytest.mark.parametrize("transport", ["sse", "streamable-http"])
def test_a_brain_down_while_its_task_ran_catches_up_at_start(
    transport: str, tmp_path: Path
) -> None:
    """The brain is down (503) while the task runs; its receiver starts and reconciles:
    every event, from get_task_events; then the poster's retries are duplicates."""
    callback_port = free_port()
    with sleeper(transport, f"http://127.0.0.1:{callback_port}/api/agent/events") as mcp_url:
        brain = Brain(tmp_path / "r.db", mcp_url, reconcile_every_s=None)
        front = Front(brain.receiver.asgi_app(), closed=True)
        started = asyncio.run(call(mcp_url, "sleep_task", {"duration_s": 0.6, "tick_s": 0.2}))
        task_id = started["task_id"]
        deadline = time.monotonic() + 30
        while asyncio.run(call(mcp_url, "get_task", {"task_id": task_id}))["state"] == "running":
            assert time.monotonic() < deadline
            time.sleep(0.1)
        expected = asyncio.run(server_events(mcp_url, task_id))
        with served(front, callback_port):  # its lifespan starts the receiver: reconciles
            brain.wait_for(lambda: len(brain.events_of(task_id)) == len(expected))
            front.closed = False
            # The poster's next retry of seq 1 (0.5, 2, 8 s after its first try).
            brain.wait_for(lambda: brain.receiver.stats.duplicates >= 1, timeout_s=30)
    assert brain.events_of(task_id) == expected
    assert set(brain.sources(task_id)) == {"reconcile"}
    assert brain.receiver.stats.accepted == 0


def test_the_bearer_token_goes_to_the_mcp_endpoint(tmp_path: Path) -> None:
    """A kit server behind a bearer check: with the token, reconciliation answers; with a
    wrong one it is reported unreachable, and the receiver keeps running."""
    from mcp.server.fastmcp import FastMCP

    from robot_mcp_kit import TaskManager, register_task_tools
    from robot_mcp_kit.testing import RecordingPoster

    seen: list[str | None] = []

    async def run() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        manager = TaskManager("sleeper", RecordingPoster())
        mcp = FastMCP("sleeper")
        register_task_tools(mcp, manager)
        inner = mcp.sse_app()

        async def gate(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                auth = dict(scope["headers"]).get(b"authorization")
                seen.append(None if auth is None else auth.decode())
                if auth != b"Bearer right-token":
                    await send({"type": "http.response.start", "status": 401, "headers": []})
                    await send({"type": "http.response.body", "body": b""})
                    return
            await inner(scope, receive, send)

        results = []
        with served(gate) as base:
            for token in ("right-token", "wrong-token"):
                receiver = Receiver(
                    [ServerConfig("sleeper", ("s",), mcp_url=f"{base}/sse", token=token)],
                    _ignore,
                    state=tmp_path / f"{token}.db",
                    reconcile_every_s=None,
                    reconcile_on_start=False,
                )
                async with receiver:
                    results.append(await receiver.reconcile())
                    results.append(receiver.status().to_dict())
        await manager.aclose()
        return results[0], results[2], results[3]

    right, wrong, status = asyncio.run(run())
    assert right == {"sleeper": {"tasks": 0, "caught_up": 0}}
    assert wrong["sleeper"]["error"] == "unreachable"
    assert status["servers"][0]["reachable"] is False
    assert "Bearer right-token" in seen
    assert "Bearer wrong-token" in seen
    assert "wrong-token" not in json.dumps(wrong)


async def _ignore(update: TaskUpdate) -> None:
    return None
