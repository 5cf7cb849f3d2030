"""Benchmark TaskManager: start() cost per task and memory per retained finished task.

Run: ``uv run python benchmarks/bench_tasks.py``

Targets: ``start()`` at most 100 µs per task; a retained finished task at most
4 KiB. Both are measured with a no-op event sink, so only the manager is counted.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import sys
import time
import tracemalloc
from typing import Any

from robot_mcp_kit import TaskContext, TaskManager
from robot_mcp_kit.models import TaskEvent

START_TARGET_US = 100.0
MEMORY_TARGET_BYTES = 4 * 1024


class NullSink:
    """An event sink that drops everything, counting task_done to know when to stop."""

    def __init__(self, expected_done: int) -> None:
        self.expected_done = expected_done
        self.done_count = 0
        self.all_done = asyncio.Event()

    async def post(self, event: TaskEvent) -> None:
        if event.type == "task_done":
            self.done_count += 1
            if self.done_count >= self.expected_done:
                self.all_done.set()


async def quick_body(ctx: TaskContext) -> dict[str, Any]:
    return {"slept_s": 1.0}


async def realistic_body(ctx: TaskContext) -> dict[str, Any]:
    await ctx.progress({"eta_s": 0.0, "elapsed_s": 1.0, "percent": 100.0})
    return {"slept_s": 1.0}


async def bench_start(tasks_per_round: int, rounds: int) -> list[float]:
    """Return the mean start() cost in µs of each round (bodies run after the timing)."""
    triggers = [{"type": "eta_below", "seconds": 10}]
    per_task_us: list[float] = []
    for _ in range(rounds):
        sink = NullSink(tasks_per_round)
        manager = TaskManager("sleeper", sink, max_finished_retained=tasks_per_round)
        gc.collect()
        begin = time.perf_counter_ns()
        for _ in range(tasks_per_round):
            manager.start("sleep_task", quick_body, triggers, est_duration_s=1.0)
        elapsed_ns = time.perf_counter_ns() - begin
        per_task_us.append(elapsed_ns / tasks_per_round / 1000)
        # Let the bodies run and finish before the next round.
        await sink.all_done.wait()
        await manager.aclose()
    return per_task_us


async def bench_memory(count: int) -> float:
    """Return the bytes held per retained finished task (tracemalloc, after gc)."""
    triggers = [{"type": "eta_below", "seconds": 10}]
    sink = NullSink(1)
    manager = TaskManager("sleeper", sink, max_finished_retained=count)
    # Warm caches (pydantic, asyncio) before the baseline; the warm-up task is evicted by
    # the ring once `count` more have finished, so it is not counted.
    manager.start("sleep_task", realistic_body, triggers, est_duration_s=1.0)
    await sink.all_done.wait()
    sink.all_done.clear()
    sink.done_count = 0
    sink.expected_done = count
    gc.collect()
    tracemalloc.start()
    baseline, _ = tracemalloc.get_traced_memory()
    for _ in range(count):
        manager.start("sleep_task", realistic_body, triggers, est_duration_s=1.0)
    await sink.all_done.wait()
    # One more cycle so finished asyncio tasks and their frames are released.
    await asyncio.sleep(0)
    gc.collect()
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    retained = len(manager.list(["succeeded"]))
    assert retained == count, f"expected {count} retained tasks, found {retained}"
    return (current - baseline) / count


async def main() -> int:
    rounds = bench_start(tasks_per_round=5_000, rounds=7)
    start_us = await rounds
    median_us = statistics.median(start_us)
    worst_us = max(start_us)
    per_task_bytes = await bench_memory(count=5_000)

    print(f"python {sys.version.split()[0]}")
    print(
        f"TaskManager.start(): median {median_us:.1f} µs/task over {len(start_us)} rounds of "
        f"5000 (worst round {worst_us:.1f} µs); target <= {START_TARGET_US:.0f} µs: "
        f"{'OK' if median_us <= START_TARGET_US else 'MISSED'}"
    )
    print(
        f"retained finished task: {per_task_bytes:.0f} B/task ({per_task_bytes / 1024:.2f} KiB, "
        f"1 trigger, progress and result dicts); target <= "
        f"{MEMORY_TARGET_BYTES // 1024} KiB: "
        f"{'OK' if per_task_bytes <= MEMORY_TARGET_BYTES else 'MISSED'}"
    )
    ok = median_us <= START_TARGET_US and per_task_bytes <= MEMORY_TARGET_BYTES
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
