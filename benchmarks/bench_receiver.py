"""Throughput, added latency and memory of the brain's receiver against a bare endpoint.

    uv run python benchmarks/bench_receiver.py [--events N] [--chunk C] [--lanes L]
                                               [--memory-events M]

Two uvicorn child processes, the same settings, each on a free 127.0.0.1 port:

- bare:     a minimal ASGI app that reads the body, verifies its signature
            (``robot_mcp_kit.signing.verify``) and answers 200: the cheapest endpoint that
            still checks what it is given;
- receiver: ``Receiver(...).asgi_app()`` with a no-op handler and its state in a temp
            file: every check of contract §4, the event stored and committed (SQLite, WAL)
            before the 200, dedup, per-task order, the cursor committed after the handler.

The same poster load goes to each, alternating in chunks of C events (who goes first
alternates too, so both see the same machine): L tasks at once, each task's events one
after the other (the kit's poster keeps one lane per task), signed at send time. Printed:
events/s of each and the ratio receiver/bare (target >= 0.8), the answer latency of
each (p50, p99) and the p99 the receiver adds, and the receiver's post-to-handler latency
(from the event's ``ts`` to the handler's call). Then, in a third child, M events (default
100 000) go through ``receiver.receive()`` (no HTTP) with ``retain_events=10 000``: its
resident memory and state file at 10 % and at the end, and the growth between them.

The machine may be shared: figures move with its load; the ratio, measured in one run
with interleaved chunks, is the steadier one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time

import httpx

from robot_mcp_kit import TaskEvent
from robot_mcp_kit.models import new_event_id, utc_now
from robot_mcp_kit.signing import signed_headers

SECRET = "bench-secret"
SERVER = "navigation"
TARGET_RATIO = 0.8

CHILD = r"""
import asyncio, json, os, resource, socket, sys, tempfile, time
import uvicorn

mode = sys.argv[1]
latencies = []

if mode == "bare":
    from robot_mcp_kit.signing import verify

    SECRET = sys.argv[2]

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        headers = dict(scope["headers"])
        if scope["method"] == "GET":
            usage = resource.getrusage(resource.RUSAGE_SELF)
            body = json.dumps({"cpu_s": usage.ru_utime + usage.ru_stime}).encode()
            status = 200
        else:
            ok = verify(
                SECRET,
                headers.get(b"x-rvc-timestamp", b"").decode(),
                b"".join(chunks),
                headers.get(b"x-rvc-signature", b"").decode(),
            )
            status, body = (200, b'{"ok":true}') if ok else (401, b'{"error":"bad"}')
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
else:
    from robot_mcp_kit.receiver import Receiver, ServerConfig

    async def handle(update):
        latencies.append(time.time() - update.event.ts.timestamp())

    state = tempfile.mkdtemp(prefix="bench-receiver-")
    receiver = Receiver(
        [ServerConfig(sys.argv[3], (sys.argv[2],))], handle,
        state=os.path.join(state, "receiver.db"), reconcile_every_s=None,
    )
    inner = receiver.asgi_app()

    async def app(scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "GET":
            stats = receiver.stats.to_dict()
            lat = sorted(latencies)
            stats["handler_p50_ms"] = 1000 * lat[len(lat) // 2] if lat else None
            stats["handler_p99_ms"] = 1000 * lat[int(len(lat) * 0.99)] if lat else None
            usage = resource.getrusage(resource.RUSAGE_SELF)
            stats["cpu_s"] = usage.ru_utime + usage.ru_stime
            stats["commits"] = receiver._store.batch.commits
            body = json.dumps(stats).encode()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await inner(scope, receive, send)

sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
sock.bind(("127.0.0.1", 0))
print(sock.getsockname()[1], flush=True)
config = uvicorn.Config(app, lifespan="on", log_level="warning", access_log=False, ws="none")
uvicorn.Server(config).run(sockets=[sock])
"""

MEMORY = r"""
import asyncio, json, os, sys, tempfile, time
from robot_mcp_kit.models import TaskEvent, new_event_id, utc_now
from robot_mcp_kit.receiver import Receiver, ServerConfig
from robot_mcp_kit.signing import signed_headers

total = int(sys.argv[1])
delivered = 0

def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

async def handle(update):
    global delivered
    delivered += 1

async def main():
    tmp = tempfile.mkdtemp(prefix="bench-receiver-mem-")
    path = os.path.join(tmp, "receiver.db")
    receiver = Receiver([ServerConfig("navigation", ("s",))], handle, state=path,
                        reconcile_every_s=None, retain_events=10_000)
    marks = {}
    async with receiver:
        now = int(time.time())
        for i in range(total):
            event = TaskEvent(event_id=new_event_id(), task_id=f"nav-{i // 100:06x}",
                              server="navigation", tool="navigate_to", type="progress",
                              seq=i % 100 + 1, ts=utc_now(), payload={"percent": i % 100})
            body = event.model_dump_json().encode()
            receipt = await receiver.receive(signed_headers("navigation", "s", body, now), body)
            assert receipt.status == 200, receipt.body
            if (i + 1) % 1000 == 0:
                while delivered < i + 1:
                    await asyncio.sleep(0)
                now = int(time.time())
            if i + 1 in (total // 10, total):
                files = sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
                marks[i + 1] = {"rss_mib": rss_mib(), "file_mib": files / 2**20,
                                "rows": receiver._store.counts()}
    print(json.dumps({"marks": marks, "delivered": delivered}))

asyncio.run(main())
"""


def make_events(n: int, lanes: int) -> list[list[TaskEvent]]:
    """``lanes`` lists of events; lane j holds tasks j, j+lanes, ... of 100 events each."""
    per_lane: list[list[TaskEvent]] = [[] for _ in range(lanes)]
    for i in range(n):
        task = i // 100
        per_lane[task % lanes].append(
            TaskEvent(
                event_id=new_event_id(),
                task_id=f"nav-{task:06x}",
                server=SERVER,
                tool="navigate_to",
                type="progress",
                seq=i % 100 + 1,
                ts=utc_now(),
                payload={"eta_s": 22.4, "distance_m": 14.1, "percent": i % 100},
            )
        )
    return per_lane


class Side:
    """One endpoint: posts a chunk of each lane's events, lanes concurrently."""

    def __init__(self, name: str, base: str, lanes: list[list[TaskEvent]]) -> None:
        self.name = name
        self.base = base
        self.url = f"{base}/api/agent/events"
        self.lanes = lanes
        self.client = httpx.AsyncClient(
            trust_env=False, timeout=30, limits=httpx.Limits(max_connections=len(lanes))
        )
        self.latencies: list[float] = []
        self.wall = 0.0
        self.sent = 0

    async def _lane(self, events: list[TaskEvent]) -> None:
        for event in events:
            # Made now: the receiver's post-to-handler latency is measured from its ts.
            body = event.model_copy(update={"ts": utc_now()}).model_dump_json().encode()
            headers = signed_headers(SERVER, SECRET, body, int(time.time()))
            t0 = time.perf_counter()
            response = await self.client.post(self.url, content=body, headers=headers)
            self.latencies.append(time.perf_counter() - t0)
            if response.status_code != 200:
                raise SystemExit(f"{self.name} answered {response.status_code}: {response.text}")

    async def run(self, lo: int, hi: int) -> None:
        t0 = time.perf_counter()
        await asyncio.gather(*(self._lane(lane[lo:hi]) for lane in self.lanes))
        self.wall += time.perf_counter() - t0
        self.sent += sum(len(lane[lo:hi]) for lane in self.lanes)

    def quantile_ms(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return 1000 * ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def start_child(*args: str) -> tuple[subprocess.Popen[str], str]:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, *args], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    return child, f"http://127.0.0.1:{int(child.stdout.readline())}"


async def throughput(n: int, chunk: int, lanes: int, bare: str, receiver: str) -> dict[str, float]:
    async with httpx.AsyncClient(trust_env=False, timeout=5) as probe:
        for base in (bare, receiver):
            deadline = time.monotonic() + 30
            while True:
                try:
                    await probe.get(base + "/")
                    break
                except httpx.TransportError:
                    if time.monotonic() > deadline:
                        raise SystemExit(f"{base} did not answer within 30 s") from None
                    await asyncio.sleep(0.05)
    sides = [
        Side("bare", bare, make_events(n, lanes)),
        Side("receiver", receiver, make_events(n, lanes)),
    ]
    per_lane = max(len(lane) for lane in sides[0].lanes)
    step = max(1, chunk // lanes)
    cpu_before: dict[str, float] = {}
    try:
        for side in sides:  # warm up: connections, first writes
            await side.run(0, 1)
            side.latencies.clear()
            side.wall, side.sent = 0.0, 0
            cpu_before[side.name] = (await side.client.get(side.base + "/stats")).json()["cpu_s"]
        for i, lo in enumerate(range(1, per_lane, step)):
            order = sides if i % 2 == 0 else sides[::-1]
            for side in order:
                await side.run(lo, min(lo + step, per_lane))
        async with httpx.AsyncClient(trust_env=False, timeout=30) as probe:
            deadline = time.monotonic() + 60
            while True:
                stats = (await probe.get(receiver + "/stats")).json()
                if stats["delivered"] >= n or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.1)
            bare_cpu = (await probe.get(bare + "/stats")).json()["cpu_s"] - cpu_before["bare"]
        receiver_cpu = stats["cpu_s"] - cpu_before["receiver"]
    finally:
        for side in sides:
            await side.client.aclose()
    bare_side, recv_side = sides
    if stats["accepted"] != n or stats["delivered"] != n:
        raise SystemExit(f"the receiver did not take every event: {stats}")
    return {
        "bare_rate": bare_side.sent / bare_side.wall,
        "receiver_rate": recv_side.sent / recv_side.wall,
        "bare_p50": bare_side.quantile_ms(0.5),
        "bare_p99": bare_side.quantile_ms(0.99),
        "receiver_p50": recv_side.quantile_ms(0.5),
        "receiver_p99": recv_side.quantile_ms(0.99),
        "handler_p50": stats["handler_p50_ms"],
        "handler_p99": stats["handler_p99_ms"],
        "sent": recv_side.sent,
        "bare_cpu_us": 1e6 * bare_cpu / bare_side.sent,
        "commits_per_event": stats["commits"] / n,
        "receiver_cpu_us": 1e6 * receiver_cpu / recv_side.sent,
    }


def memory(total: int) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", MEMORY, str(total)],
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"the memory run failed:\n{proc.stderr[-3000:]}")
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def cli() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000, help="events per endpoint")
    parser.add_argument("--chunk", type=int, default=400, help="events per alternation")
    parser.add_argument("--lanes", type=int, default=8, help="tasks posted at once")
    parser.add_argument("--memory-events", type=int, default=100_000)
    args = parser.parse_args()
    children = [start_child("bare", SECRET, SERVER), start_child("receiver", SECRET, SERVER)]
    try:
        got = asyncio.run(
            throughput(args.events, args.chunk, args.lanes, children[0][1], children[1][1])
        )
    finally:
        for child, _ in children:
            child.terminate()
            try:
                child.wait(15)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
    ratio = got["receiver_rate"] / got["bare_rate"]
    print(
        f"events per endpoint: {int(got['sent'])} over {args.lanes} concurrent tasks, "
        f"interleaved in chunks of {args.chunk}; the receiver handed every one over"
    )
    print(
        f"bare verify-and-200: {got['bare_rate']:7.0f} ev/s   answer p50 "
        f"{got['bare_p50']:.2f} ms  p99 {got['bare_p99']:.2f} ms"
    )
    print(
        f"receiver:            {got['receiver_rate']:7.0f} ev/s   answer p50 "
        f"{got['receiver_p50']:.2f} ms  p99 {got['receiver_p99']:.2f} ms"
    )
    print(
        f"added by the receiver: p50 {got['receiver_p50'] - got['bare_p50']:+.2f} ms, "
        f"p99 {got['receiver_p99'] - got['bare_p99']:+.2f} ms per event; post-to-handler "
        f"p50 {got['handler_p50']:.2f} ms, p99 {got['handler_p99']:.2f} ms"
    )
    cpu_ratio = got["bare_cpu_us"] / got["receiver_cpu_us"]
    print(
        f"server CPU per event: bare {got['bare_cpu_us']:.0f} µs, receiver "
        f"{got['receiver_cpu_us']:.0f} µs (bare/receiver {cpu_ratio:.2f}: the throughput "
        "ratio the receiver's own work allows on an idle core); "
        f"{got['commits_per_event']:.2f} commits per event"
    )
    verdict = "OK" if ratio >= TARGET_RATIO else "BELOW TARGET"
    print(f"ratio receiver/bare: {ratio:.2f}  (target >= {TARGET_RATIO})  {verdict}")
    mem = memory(args.memory_events)
    marks = {int(k): v for k, v in mem["marks"].items()}  # type: ignore[attr-defined]
    first, last = min(marks), max(marks)
    grow = marks[last]["rss_mib"] - marks[first]["rss_mib"]
    print(
        f"memory, {last} events through receive() (retain_events=10 000): RSS "
        f"{marks[first]['rss_mib']:.1f} MiB at {first}, {marks[last]['rss_mib']:.1f} MiB at "
        f"{last} (growth {grow:+.1f} MiB); state file {marks[first]['file_mib']:.1f} → "
        f"{marks[last]['file_mib']:.1f} MiB; rows at the end {marks[last]['rows']}"
    )
    return 0 if ratio >= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(cli())
