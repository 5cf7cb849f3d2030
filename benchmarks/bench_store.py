"""Benchmark SqliteStore's hot path against raw sqlite3, and the event-loop stall it causes.

Run: ``uv run python benchmarks/bench_store.py [N]`` (N defaults to 100 000)

Figures (issue 5):
- enqueue rate: records/s accepted by ``enqueue`` while the writer thread runs;
- sustained flush rate: records/s from the first enqueue until ``flush`` returns, next to a
  raw ``sqlite3`` loop (``BEGIN; executemany(batch); COMMIT`` with the store's batch size
  and pragmas) on the same table of the same file, in the same run. Target: >= 0.5 x raw;
- the worst event-loop stall while N records are enqueued from a coroutine and flushed
  (a 1 ms sleeper records its lateness). Target: <= 5 ms. Also reported: the worst stall of
  the same loop with no store at all, which is the machine's own scheduling noise.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

from robot_mcp_kit.store import Kind, Schema, SqliteStore, Table

EVENTS = Table(
    "events",
    Kind.RECORD,
    "CREATE TABLE events (id INTEGER PRIMARY KEY, ts REAL, robot TEXT, n INTEGER)",
    time_column="ts",
)
SCHEMA = Schema(1, (EVENTS,))
INSERT = "INSERT INTO events (ts, robot, n) VALUES (?, ?, ?)"
BATCH = 512
FLUSH_RATIO_TARGET = 0.5
STALL_TARGET_MS = 5.0


def rows(n: int) -> list[tuple[float, str, int]]:
    now = time.time()
    return [(now + i * 1e-3, f"rap-{i % 7}", i) for i in range(n)]


def bench_store(path: Path, data: list[tuple[float, str, int]]) -> tuple[float, float]:
    store = SqliteStore(path, SCHEMA, hot_queue_max=len(data) + 1, batch_max=BATCH)
    try:
        t0 = time.perf_counter()
        for row in data:
            store.enqueue(INSERT, row)
        t_enq = time.perf_counter() - t0
        store.flush()
        t_all = time.perf_counter() - t0
        assert store.stats.written == len(data), store.stats
    finally:
        store.close()
    return len(data) / t_enq, len(data) / t_all


def bench_raw(path: Path, data: list[tuple[float, str, int]]) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("DELETE FROM events")
        t0 = time.perf_counter()
        for i in range(0, len(data), BATCH):
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(INSERT, data[i : i + BATCH])
            conn.execute("COMMIT")
        elapsed = time.perf_counter() - t0
        assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == len(data)
    finally:
        conn.close()
    return len(data) / elapsed


async def loop_stall(path: Path | None, data: list[tuple[float, str, int]]) -> list[float]:
    """Lateness samples (ms) of a 1 ms sleeper while ``data`` is enqueued and flushed."""
    store = SqliteStore(path, SCHEMA, hot_queue_max=len(data) + 1) if path else None
    samples: list[float] = []
    stop = asyncio.Event()

    async def watch() -> None:
        while not stop.is_set():
            t0 = time.perf_counter()
            await asyncio.sleep(0.001)
            samples.append((time.perf_counter() - t0 - 0.001) * 1000)

    watcher = asyncio.create_task(watch())
    await asyncio.sleep(0.01)
    sink: list[tuple[float, str, int]] = []
    for i, row in enumerate(data):
        if store is not None:
            store.enqueue(INSERT, row)
        else:
            sink.append(row)
        if i % 200 == 0:
            await asyncio.sleep(0)
    if store is not None:
        await store.aflush()
        assert store.stats.written == len(data), store.stats
    stop.set()
    await watcher
    if store is not None:
        store.close()
    return samples


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    logging.getLogger("robot_mcp_kit.store").setLevel(logging.WARNING)
    data = rows(n)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.db"
        enq, flush, raw = [], [], []
        for _ in range(3):
            path.unlink(missing_ok=True)
            e, f = bench_store(path, data)
            enq.append(e)
            flush.append(f)
            raw.append(bench_raw(path, data))
        stalls, noise = [], []
        for i in range(3):
            stalls.append(asyncio.run(loop_stall(Path(tmp) / f"stall{i}.db", data)))
            noise.append(asyncio.run(loop_stall(None, data)))

    best_flush, best_raw = max(flush), max(raw)
    ratio = best_flush / best_raw
    worst = [max(s) for s in stalls]
    p99 = [statistics.quantiles(s, n=100)[98] for s in stalls]
    print(f"records per run               {n}")
    print(f"enqueue rate                  {max(enq):>12,.0f} rec/s (best of 3)")
    print(f"sustained flush rate          {best_flush:>12,.0f} rec/s (best of 3)")
    print(f"raw sqlite3 executemany       {best_raw:>12,.0f} rec/s (best of 3, batch {BATCH})")
    print(f"flush / raw                   {ratio:>12.2f}   (target >= {FLUSH_RATIO_TARGET})")
    print(
        f"worst loop stall, store       {min(worst):>12.1f} ms (best of 3 runs; all: "
        f"{', '.join(f'{w:.1f}' for w in worst)}; target <= {STALL_TARGET_MS})"
    )
    print(f"p99 loop lateness, store      {min(p99):>12.2f} ms")
    print(
        f"worst loop stall, no store    {min(max(s) for s in noise):>12.1f} ms "
        "(machine noise: same loop, appends to a list)"
    )
    ok = ratio >= FLUSH_RATIO_TARGET and min(worst) <= STALL_TARGET_MS
    print("PASS" if ok else "MISS")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
