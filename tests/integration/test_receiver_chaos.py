"""Chaos: the real sleeper and a brain built on the receiver, through everything that breaks.

Processes: the sleeper (``examples/sleeper.py``) and a brain (``_chaos_brain.py``: the
receiver's public API, a handler appending one JSON line per update), both killed with -9
and restarted on their ports; between them a chaos proxy (a fake at the HTTP boundary, in
this process) that acknowledges some posts and drops them, delivers others twice, and
answers 502 while the brain is down. The run:

1. three tasks; the brain is killed -9 mid-run and restarted 1.5 s later;
2. the sleeper is killed -9 mid-run and restarted with its outbox (``RVC_OUTBOX``): it sends
   what was pending and reports the running tasks INTERRUPTED;
3. two more tasks; the sleeper is killed -9 and restarted *without* its outbox: it has
   forgotten them;
4. two more tasks, a few posts dropped, and the sleeper frozen (SIGSTOP) for 3 s: the
   brain's repairs and polls time out (``server_unreachable``), then it recovers.

What must hold, per task: the events the handler got, each once (an update handed over
again after the brain's kill carries ``redelivered`` and the same key, as the handler
contract says), are exactly the server's ``get_task_events``; a task the server forgot is
handed over as far as the posts went, every missing seq accounted for by a GAP, then LOST.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from mcp import ClientSession
from mcp.client.sse import sse_client

from robot_mcp_kit.testing import ServiceProcess, free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
SLEEPER = REPO / "examples" / "sleeper.py"
BRAIN = Path(__file__).resolve().parent / "_chaos_brain.py"
SECRET = "chaos-secret"


class ChaosProxy:
    """Forwards the sleeper's posts to the brain: some acknowledged and dropped, some
    delivered twice, 502 while the brain cannot be reached. Keeps every event it saw."""

    def __init__(self, brain_url: str, seed: int = 34) -> None:
        self.brain_url = brain_url
        self.random = random.Random(seed)
        self.drop_rate = 0.12
        self.dup_rate = 0.12
        self.seen: dict[str, dict[int, str]] = {}
        self.decided: set[str] = set()
        self.dropped = 0
        self.doubled = 0
        self.refused = 0
        self.client: httpx.AsyncClient | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            if self.client is not None:
                await self.client.aclose()
            await send({"type": "lifespan.shutdown.complete"})
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        headers = {
            k.decode(): v.decode()
            for k, v in scope["headers"]
            if k.lower().startswith(b"x-rvc") or k == b"content-type"
        }
        event = json.loads(body)
        self.seen.setdefault(event["task_id"], {})[event["seq"]] = event["event_id"]
        status = 200
        if event["event_id"] not in self.decided:
            self.decided.add(event["event_id"])
            roll = self.random.random()
            if roll < self.drop_rate:
                self.dropped += 1
                await _answer(send, 200)  # acknowledged, never delivered
                return
            times = 2 if roll < self.drop_rate + self.dup_rate else 1
        else:
            times = 1
        if self.client is None:
            self.client = httpx.AsyncClient(timeout=5)
        for i in range(times):
            try:
                response = await self.client.post(self.brain_url, content=body, headers=headers)
                status = response.status_code if i == 0 else status
            except httpx.HTTPError:
                status = 502 if i == 0 else status
        if times == 2:
            self.doubled += 1
        if status >= 300:
            self.refused += 1
        await _answer(send, status)


async def _answer(send: Any, status: int) -> None:
    await send({"type": "http.response.start", "status": status, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


@contextlib.contextmanager
def served(app: Any, port: int) -> Iterator[None]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=lambda: server.run(sockets=[sock]), daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    try:
        yield
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()


class World:
    """The brain and the sleeper as restartable child processes."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.brain_port, self.sleeper_port, self.proxy_port = free_port(), free_port(), free_port()
        self.mcp_url = f"http://127.0.0.1:{self.sleeper_port}/sse"
        self.log = tmp / "handler.jsonl"
        self.brain_output = (tmp / "brain.out").open("ab")
        self.brain: ServiceProcess | None = None
        self.sleeper: ServiceProcess | None = None

    def start_brain(self) -> None:
        self.brain = ServiceProcess(
            "brain",
            [
                sys.executable,
                str(BRAIN),
                str(self.brain_port),
                str(self.tmp / "brain.db"),
                str(self.log),
            ],
            self.brain_port,
            env={
                "RVC_SERVERS": "sleeper",
                "RVC_SLEEPER_SECRET": SECRET,
                "RVC_SLEEPER_MCP_URL": self.mcp_url,
            },
            output=self.brain_output,
        )
        self.brain.start(ready_timeout_s=60)

    def start_sleeper(self, *, outbox: bool) -> None:
        self.sleeper = ServiceProcess(
            "sleeper",
            [sys.executable, str(SLEEPER)],
            self.sleeper_port,
            env={
                "MCP_TRANSPORT": "sse",
                "MCP_PORT": str(self.sleeper_port),
                "RVC_CALLBACK_URL": f"http://127.0.0.1:{self.proxy_port}/api/agent/events",
                "RVC_EVENT_SECRET": SECRET,
                "RVC_OUTBOX": str(self.tmp / "outbox.db") if outbox else "",
            },
        )
        self.sleeper.start(ready_timeout_s=60)

    @staticmethod
    def kill9(service: ServiceProcess | None) -> None:
        assert service is not None
        assert service.proc is not None
        service.proc.send_signal(signal.SIGKILL)
        service.proc.wait(10)
        service.close()

    def close(self) -> None:
        for service in (self.brain, self.sleeper):
            if service is not None:
                with contextlib.suppress(Exception):
                    if service.proc is not None and service.proc.poll() is None:
                        os.kill(service.proc.pid, signal.SIGCONT)
                service.close()
        self.brain_output.close()

    def call(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        async def go() -> dict[str, Any]:
            async with sse_client(self.mcp_url) as (r, w), ClientSession(r, w) as session:
                await session.initialize()
                result = await session.call_tool(tool, args)
            data: dict[str, Any] = json.loads(result.content[0].text)  # type: ignore[union-attr]
            return data

        return asyncio.run(go())

    def start_task(self, duration_s: float) -> str:
        return str(self.call("sleep_task", {"duration_s": duration_s, "tick_s": 0.2})["task_id"])

    def server_events(self, task_id: str) -> list[tuple[int, str]]:
        page = self.call("get_task_events", {"task_id": task_id})
        assert "error" not in page, page
        return [(e["seq"], e["event_id"]) for e in page["events"]]

    def lines(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]

    def wait(self, check: Any, what: str, timeout_s: float = 90.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not check():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.2)


def handed_over(lines: list[dict[str, Any]], task_id: str) -> list[dict[str, Any]]:
    """The task's updates, each once: a repeat must be flagged redelivered (then dropped)."""
    keys: set[str] = set()
    once = []
    for line in lines:
        if line["task_id"] != task_id:
            continue
        if line["key"] in keys:
            assert line["redelivered"], f"handed over twice without redelivered: {line}"
            continue
        keys.add(line["key"])
        once.append(line)
    return once


def events_of(updates: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return [(u["seq"], u["event_id"]) for u in updates if u["kind"] == "event"]


def finished(world: World, task_ids: list[str]) -> bool:
    lines = world.lines()
    return all(
        any(u["type"] in ("task_done", "task_failed") for u in handed_over(lines, t))
        for t in task_ids
    )


def test_every_task_reaches_the_handler_once_in_order_through_kills_and_loss(
    tmp_path: Path,
) -> None:
    world = World(tmp_path)
    proxy = ChaosProxy(f"http://127.0.0.1:{world.brain_port}/api/agent/events")
    try:
        with served(proxy, world.proxy_port):
            world.start_brain()
            world.start_sleeper(outbox=True)

            # 1. Tasks run; the brain is killed -9 and comes back.
            first = [world.start_task(6.0) for _ in range(3)]
            time.sleep(0.8)
            World.kill9(world.brain)
            time.sleep(1.5)
            world.start_brain()
            # 2. The sleeper is killed -9 mid-run and restarted with its outbox.
            time.sleep(0.5)
            World.kill9(world.sleeper)
            world.start_sleeper(outbox=True)
            world.wait(lambda: finished(world, first), "the first tasks to finish")
            expected_first = {t: world.server_events(t) for t in first}
            world.wait(
                lambda: all(
                    events_of(handed_over(world.lines(), t)) == expected_first[t] for t in first
                ),
                "the brain to hold the first tasks' events",
            )

            # 3. Two tasks on a sleeper that then forgets them (no outbox).
            forgotten = [world.start_task(3.0) for _ in range(2)]
            time.sleep(1.0)
            World.kill9(world.sleeper)
            world.start_sleeper(outbox=False)
            world.wait(
                lambda: all(
                    any(u["kind"] == "lost" for u in handed_over(world.lines(), t))
                    for t in forgotten
                ),
                "the forgotten tasks to be handed over as lost",
            )

            # 4. The sleeper is unreachable for a while; posts are lost meanwhile.
            proxy.drop_rate = 0.3
            last = [world.start_task(2.0) for _ in range(2)]
            time.sleep(0.7)
            assert world.sleeper is not None
            assert world.sleeper.proc is not None
            os.kill(world.sleeper.proc.pid, signal.SIGSTOP)
            time.sleep(3.0)
            os.kill(world.sleeper.proc.pid, signal.SIGCONT)
            proxy.drop_rate = 0.12
            world.wait(lambda: finished(world, last), "the last tasks to finish")
            expected_last = {t: world.server_events(t) for t in last}
            world.wait(
                lambda: all(
                    events_of(handed_over(world.lines(), t)) == expected_last[t] for t in last
                ),
                "the brain to hold the last tasks' events",
            )
            lines = world.lines()
            brain_log = world.brain_output.name
    finally:
        world.close()

    # Known tasks: exactly the server's sequence, each once, nothing synthetic.
    for task_id, expected in {**expected_first, **expected_last}.items():
        updates = handed_over(lines, task_id)
        assert events_of(updates) == expected, task_id
        assert {u["kind"] for u in updates} == {"event"}, updates
    # Forgotten tasks: what was posted, in order, each missing seq a GAP, then LOST.
    for task_id in forgotten:
        updates = handed_over(lines, task_id)
        assert updates[-1]["kind"] == "lost", updates
        covered: list[int] = []
        for u in updates[:-1]:
            if u["kind"] == "event":
                assert proxy.seen[task_id][u["seq"]] == u["event_id"]
                covered.append(u["seq"])
            else:
                assert u["kind"] == "gap", u
                covered.extend(range(u["missing"][0], u["missing"][1] + 1))
        assert covered == list(range(1, len(covered) + 1)), updates
    # The chaos happened, and the brain saw the server unreachable and recovered.
    assert proxy.dropped >= 3
    assert proxy.doubled >= 3
    sources = {u["source"] for u in lines if u["kind"] == "event"}
    assert "repair" in sources, sources
    interrupted = [u for u in lines if u["type"] == "task_failed"]
    assert interrupted, "the sleeper's restart with its outbox reported no INTERRUPTED task"
    text = Path(brain_log).read_text(errors="replace")
    assert "server_unreachable" in text
    assert "server_reachable_again" in text
