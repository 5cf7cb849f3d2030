"""Throughput of EventPoster against a raw httpx loop, both to one loopback receiver.

    uv run python benchmarks/bench_poster.py [--events N] [--chunk C]

A uvicorn subprocess serves a minimal ASGI app on a free 127.0.0.1 port that answers 200
to every POST and counts them (GET /count). In the same run, alternating in chunks of C
events (who goes first alternates too, so both sides see the same machine load):

- raw:    one httpx.AsyncClient posts the N bodies sequentially, with the same signed
          headers, bodies and headers prepared beforehand (the fastest honest baseline);
- poster: C ``await poster.post(event)`` calls, then ``await poster.flush()``; the poster
          serializes, queues, signs at send time and delivers through its worker.
- outbox: the same with ``EventPoster(..., outbox=<temp file>)``: each event is
          also written to SQLite (hot writes, one flush per burst before sending) and
          marked delivered.

All figures are end-to-end events/s over all chunks (the receiver counts every event),
with the ratios poster/raw (target >= 0.7) and outbox/poster (target >= 0.5). The
client's CPU time per event is printed too: on a shared, noisy machine it is the steadier
figure.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from robot_mcp_kit import EventPoster, TaskEvent
from robot_mcp_kit.models import new_event_id, utc_now
from robot_mcp_kit.signing import signed_headers

SECRET = "bench-secret"
TARGET_RATIO = 0.7
TARGET_OUTBOX_RATIO = 0.5

RECEIVER = r"""
import socket, sys
import uvicorn

count = 0

async def app(scope, receive, send):
    global count
    if scope["type"] != "http":
        return
    while True:
        message = await receive()
        if not message.get("more_body"):
            break
    if scope["method"] == "POST":
        count += 1
        body = b""
    else:
        body = str(count).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})

sock = socket.socket()
sock.bind(("127.0.0.1", 0))
print(sock.getsockname()[1], flush=True)
config = uvicorn.Config(app, lifespan="off", log_level="warning", access_log=False, ws="none")
uvicorn.Server(config).run(sockets=[sock])
"""


def make_events(n: int) -> list[TaskEvent]:
    return [
        TaskEvent(
            event_id=new_event_id(),
            task_id=f"nav-{i // 100:06x}",
            server="navigation",
            tool="navigate_to",
            type="progress",
            seq=i % 100 + 1,
            ts=utc_now(),
            payload={"eta_s": 22.4, "distance_m": 14.1, "percent": i % 100},
        )
        for i in range(n)
    ]


async def received(client: httpx.AsyncClient, base: str) -> int:
    return int((await client.get(f"{base}/count")).text)


class Raw:
    """The baseline: one client posting prepared bodies and headers, one after the other."""

    def __init__(self, url: str, events: list[TaskEvent]) -> None:
        self.url = url
        now = int(time.time())
        self.prepared = [
            (body, signed_headers("navigation", SECRET, body, now))
            for body in (e.model_dump_json().encode() for e in events)
        ]
        self.client = httpx.AsyncClient(trust_env=False, timeout=10)

    async def run(self, lo: int, hi: int) -> None:
        for body, headers in self.prepared[lo:hi]:
            response = await self.client.post(self.url, content=body, headers=headers)
            if response.status_code != 200:
                raise SystemExit(f"raw post answered {response.status_code}")


class Poster:
    """The poster: post() every event of the chunk, then flush() until all are delivered."""

    def __init__(self, url: str, events: list[TaskEvent], outbox: Path | None = None) -> None:
        self.events = events
        self.poster = EventPoster(
            "navigation",
            url,
            SECRET,
            queue_max=len(events) + 1,
            outbox=outbox if outbox is not None else False,
        )

    async def run(self, lo: int, hi: int) -> None:
        for event in self.events[lo:hi]:
            await self.poster.post(event)
        await self.poster.flush()


async def main(n: int, chunk: int, port: int) -> int:
    with tempfile.TemporaryDirectory(prefix="bench-outbox-") as tmp:
        return await _main(n, chunk, port, Path(tmp) / "outbox.db")


async def _main(n: int, chunk: int, port: int, outbox_path: Path) -> int:
    base = f"http://127.0.0.1:{port}"
    url = f"{base}/api/agent/events"
    events = make_events(n)
    async with httpx.AsyncClient(trust_env=False, timeout=10) as probe:
        deadline = time.monotonic() + 20
        while True:
            try:
                await received(probe, base)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise SystemExit("receiver did not answer within 20 s") from None
                await asyncio.sleep(0.05)

        raw, poster = Raw(url, events), Poster(url, events)
        outbox = Poster(url, events, outbox_path)
        names = ("raw", "poster", "outbox")
        wall = dict.fromkeys(names, 0.0)
        cpu = dict.fromkeys(names, 0.0)
        chunk_rates: dict[str, list[float]] = {name: [] for name in names}
        try:
            await raw.run(0, 1)  # connect all three before timing
            await poster.run(0, 1)
            await outbox.run(0, 1)
            before = await received(probe, base)
            for i, lo in enumerate(range(0, n, chunk)):
                hi = min(lo + chunk, n)
                sides: list[tuple[str, Raw | Poster]] = [
                    ("raw", raw),
                    ("poster", poster),
                    ("outbox", outbox),
                ]
                # Rotate who goes first: the same machine load for each side.
                order = sides[i % 3 :] + sides[: i % 3]
                for name, side in order:
                    t0, c0 = time.perf_counter(), time.process_time()
                    await side.run(lo, hi)
                    dt = time.perf_counter() - t0
                    wall[name] += dt
                    cpu[name] += time.process_time() - c0
                    chunk_rates[name].append((hi - lo) / dt)
            got = await received(probe, base) - before
            stats = poster.poster.stats
            outbox_stats = outbox.poster.stats
        finally:
            await raw.client.aclose()
            await poster.poster.aclose()
            await outbox.poster.aclose()
    for side_stats in (stats, outbox_stats):
        if got != 3 * n or side_stats.sent != n + 1 or side_stats.dropped or side_stats.given_up:
            raise SystemExit(f"events lost: receiver counted {got} of {3 * n}; {side_stats}")

    rate = {k: n / v for k, v in wall.items()}
    us = {k: v / n * 1e6 for k, v in cpu.items()}
    ratio = rate["poster"] / rate["raw"]
    outbox_ratio = rate["outbox"] / rate["poster"]
    print(f"events per side: {n}, interleaved in chunks of {chunk}; receiver counted all")
    for name, label in (
        ("raw", "raw httpx loop    "),
        ("poster", "EventPoster       "),
        ("outbox", "EventPoster+outbox"),
    ):
        print(
            f"{label}: {rate[name]:8.0f} ev/s  (chunk median "
            f"{statistics.median(chunk_rates[name]):.0f}; client CPU {us[name]:.0f} µs/event)"
        )
    verdict = "OK" if ratio >= TARGET_RATIO else "BELOW TARGET"
    print(f"ratio poster/raw: {ratio:.2f}  (target >= {TARGET_RATIO})  {verdict}")
    outbox_verdict = "OK" if outbox_ratio >= TARGET_OUTBOX_RATIO else "BELOW TARGET"
    print(
        f"ratio outbox/poster: {outbox_ratio:.2f}  (target >= {TARGET_OUTBOX_RATIO})  "
        f"{outbox_verdict}"
    )
    return 0 if ratio >= TARGET_RATIO and outbox_ratio >= TARGET_OUTBOX_RATIO else 1


def cli() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=3000, help="events per round")
    parser.add_argument("--chunk", type=int, default=200, help="events per alternation")
    args = parser.parse_args()
    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True)
    try:
        assert receiver.stdout is not None
        port = int(receiver.stdout.readline())
        return asyncio.run(main(args.events, args.chunk, port))
    finally:
        receiver.terminate()
        try:
            receiver.wait(10)
        except subprocess.TimeoutExpired:
            receiver.kill()
            receiver.wait()


if __name__ == "__main__":
    sys.exit(cli())
