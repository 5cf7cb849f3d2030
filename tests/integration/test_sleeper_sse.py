"""The §5 sleeper as a real subprocess over real SSE, posting signed events to a receiver.

Acceptance (kit spec §7): the sleeper runs as an SSE server and, with RVC_CALLBACK_URL
pointed at a receiver, emits correctly signed events in order. The receiver lives behind
the single ``event_receiver`` fixture so it can be swapped for ``fake_rvc`` later.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.sse import sse_client

from robot_mcp_kit.models import TaskEvent
from robot_mcp_kit.signing import HEADER_SERVER, HEADER_SIGNATURE, HEADER_TIMESTAMP, check

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SLEEPER_PATH = REPO / "examples" / "sleeper.py"
SECRET = "sleeper-integration-secret"
EVENTS_PATH = "/api/agent/events"


# -- a tiny signature-checking receiver ---------------------------------------------------


@dataclass
class Received:
    """One POST as the receiver saw it."""

    headers: dict[str, str]
    body: bytes
    rejection: str | None  # None when the signature verified
    event: TaskEvent | None


@dataclass
class EventReceiver:
    """Stand-in for the brain's POST /api/agent/events: verifies and records events."""

    secrets: dict[str, str]
    url: str = ""
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, headers: dict[str, str], body: bytes) -> int:
        server = headers.get(HEADER_SERVER, "")
        secret = self.secrets.get(server)
        rejection: str | None = None
        event: TaskEvent | None = None
        if secret is None:
            rejection = f"unknown server {server!r}"
        else:
            try:
                check(
                    secret,
                    headers.get(HEADER_TIMESTAMP, ""),
                    body,
                    headers.get(HEADER_SIGNATURE, ""),
                )
            except Exception as exc:
                rejection = f"{type(exc).__name__}: {exc}"
        if rejection is None:
            try:
                event = TaskEvent.model_validate_json(body)
            except ValueError as exc:
                rejection = f"not a TaskEvent: {exc}"
        with self.lock:
            self.received.append(Received(headers, body, rejection, event))
        return 200 if rejection is None else 401

    def rejected(self) -> list[Received]:
        with self.lock:
            return [r for r in self.received if r.rejection is not None]

    def events(self, task_id: str) -> list[TaskEvent]:
        """Verified events of one task, deduplicated by event_id, in arrival order."""
        seen: set[str] = set()
        out: list[TaskEvent] = []
        with self.lock:
            for r in self.received:
                event = r.event
                if event is not None and event.task_id == task_id and event.event_id not in seen:
                    seen.add(event.event_id)
                    out.append(event)
        return out

    async def wait_for(self, task_id: str, type_: str, timeout_s: float = 20.0) -> TaskEvent:
        """Poll (bounded) until a verified event of ``type_`` for ``task_id`` arrived."""
        deadline = time.monotonic() + timeout_s
        while True:
            for event in self.events(task_id):
                if event.type == type_:
                    return event
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"no {type_} for {task_id} within {timeout_s} s; got "
                    f"{[e.type for e in self.events(task_id)]}, rejected "
                    f"{[r.rejection for r in self.rejected()]}"
                )
            await asyncio.sleep(0.02)


def _handler_for(receiver: EventReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            if self.path != EVENTS_PATH:
                status = 404
            else:
                status = receiver.record(dict(self.headers.items()), body)
            reply = json.dumps({"ok": status == 200}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture(scope="module")
def event_receiver() -> Iterator[EventReceiver]:
    """A loopback receiver on a free port that verifies X-RVC signatures with check()."""
    receiver = EventReceiver(secrets={"sleeper": SECRET})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(receiver))
    httpd.daemon_threads = True
    receiver.url = f"http://127.0.0.1:{httpd.server_address[1]}{EVENTS_PATH}"
    thread = threading.Thread(target=httpd.serve_forever, name="event-receiver", daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


# -- the sleeper subprocess -----------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(
                f"sleeper exited with {proc.returncode} before listening:\n{log.read_text()}"
            )
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(
        f"sleeper did not listen on {port} within {timeout_s} s:\n{log.read_text()}"
    )


@pytest.fixture(scope="module")
def sleeper_url(event_receiver: EventReceiver, tmp_path_factory) -> Iterator[str]:
    """Start examples/sleeper.py with MCP_TRANSPORT=sse on a free port; yield its SSE URL."""
    port = _free_port()
    log = tmp_path_factory.mktemp("sleeper") / "sleeper.log"
    env = {
        **os.environ,
        "MCP_TRANSPORT": "sse",
        "MCP_HOST": "127.0.0.1",
        "MCP_PORT": str(port),
        "RVC_CALLBACK_URL": event_receiver.url,
        "RVC_EVENT_SECRET": SECRET,
        "PYTHONUNBUFFERED": "1",
    }
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(SLEEPER_PATH)], env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        _wait_for_port(port, proc, log, timeout_s=30)
        yield f"http://127.0.0.1:{port}/sse"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@asynccontextmanager
async def session_to(url: str) -> AsyncIterator[ClientSession]:
    async with sse_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert not result.isError, result.content
    return json.loads(result.content[0].text)  # type: ignore[union-attr]


# -- scenarios ----------------------------------------------------------------------------


async def test_eta_below_task_yields_signed_ordered_events(sleeper_url, event_receiver):
    """Signed events, seq 1..n, the eta_below trigger once, unknown trigger never, task_done."""
    trigger = {"type": "eta_below", "seconds": 0.25}
    async with session_to(sleeper_url) as session:
        info = await call(
            session,
            "sleep_task",
            duration_s=0.5,
            tick_s=0.1,
            triggers=[trigger, {"type": "warp_drive"}],
        )
        assert info["state"] == "running"
        task_id = info["task_id"]
        done = await event_receiver.wait_for(task_id, "task_done")
        final = await call(session, "get_task", task_id=task_id)

    events = event_receiver.events(task_id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [e.type for e in events].count("progress") == 5
    fired = [e for e in events if e.type == "trigger_fired"]
    assert len(fired) == 1
    assert fired[0].payload["trigger"] == trigger
    assert fired[0].payload["eta_s"] < 0.25
    assert events[-1] == done
    assert done.payload == {"result": {"slept_s": 0.5}}
    assert all(e.server == "sleeper" and e.tool == "sleep_task" for e in events)
    assert event_receiver.rejected() == []
    for r in event_receiver.received:
        assert r.headers[HEADER_SERVER] == "sleeper"
        assert r.headers[HEADER_SIGNATURE].startswith("sha256=")
    assert final["state"] == "succeeded"


async def test_cancelled_task_emits_no_task_failed(sleeper_url, event_receiver):
    """cancel_task over MCP: answers cancelled, get_task agrees, no terminal event is posted."""
    async with session_to(sleeper_url) as session:
        info = await call(session, "sleep_task", duration_s=60, tick_s=0.1)
        task_id = info["task_id"]
        await event_receiver.wait_for(task_id, "progress")
        cancelled = await call(session, "cancel_task", task_id=task_id)
        again = await call(session, "cancel_task", task_id=task_id)
        final = await call(session, "get_task", task_id=task_id)
        running = await call(session, "list_tasks", states=["running"])
        # The poster sends from one FIFO queue: once a later task's task_done has arrived,
        # anything the cancelled task could have posted has arrived too.
        marker = await call(session, "sleep_task", duration_s=0.1, tick_s=0.1)
        await event_receiver.wait_for(marker["task_id"], "task_done")

    assert cancelled == again == {"task_id": task_id, "state": "cancelled"}
    assert final["state"] == "cancelled"
    assert task_id not in [t["task_id"] for t in running["tasks"]]
    types = [e.type for e in event_receiver.events(task_id)]
    assert "task_failed" not in types
    assert "task_done" not in types
    assert event_receiver.rejected() == []


async def test_failing_task_emits_task_failed(sleeper_url, event_receiver):
    """fail=True: a signed task_failed with FAKE_FAILURE ends the task's events."""
    async with session_to(sleeper_url) as session:
        info = await call(session, "sleep_task", duration_s=0.2, tick_s=0.1, fail=True)
        task_id = info["task_id"]
        failed = await event_receiver.wait_for(task_id, "task_failed")
        final = await call(session, "get_task", task_id=task_id)

    assert failed.payload["error_code"] == "FAKE_FAILURE"
    assert failed.payload["suggestions"] == ["retry_without_fail"]
    events = event_receiver.events(task_id)
    assert [e.type for e in events] == ["progress", "progress", "task_failed"]
    assert [e.seq for e in events] == [1, 2, 3]
    assert final["state"] == "failed"
    assert final["failure"]["error_code"] == "FAKE_FAILURE"
    assert event_receiver.rejected() == []


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"MCP_TRANSPORT": "carrier-pigeon"}, "MCP_TRANSPORT must be one of"),
        ({"MCP_TRANSPORT": "sse", "MCP_PORT": "ninety"}, "MCP_PORT must be an integer"),
        (
            {"MCP_TRANSPORT": "sse", "RVC_CALLBACK_URL": "http://127.0.0.1:9/x"},
            "RVC_EVENT_SECRET",
        ),
    ],
)
def test_bad_configuration_exits_with_one_line(overrides, fragment):
    """Misconfiguration stops the sleeper at once with a one-line reason, not a traceback."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_", "RVC_"))}
    env.update(overrides)
    proc = subprocess.run(
        [sys.executable, str(SLEEPER_PATH)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode != 0
    assert fragment in proc.stderr
    assert "Traceback" not in proc.stderr
