"""A child process for test_sleeper_outbox_guards: an EventPoster whose outbox file fills up.

``python _full_disk_poster.py URL SECRET OUTBOX [close-while-failing]``. Through the public
API only: it posts 20 events (all delivered), lowers its own ``RLIMIT_FSIZE`` to the
outbox's current size (with ``SIGXFSZ`` ignored, every write past it fails with ``EFBIG``: a
full disk, for this file), posts 200 more over two tasks, and prints its ``stats`` and
``repr`` as one JSON line. It then waits for a line on stdin, lifts the limit (the disk has
room again), flushes, prints the stats again, closes the poster and prints them a last
time; with ``close-while-failing`` it closes the poster at once instead, the limit still
on, and prints the stats. Logs go to stderr (a pipe: the limit applies to regular files
only).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import resource
import signal
import sys
from typing import Any

from robot_mcp_kit import EventPoster, TaskEvent
from robot_mcp_kit.models import new_event_id, utc_now


def event(task_id: str, seq: int) -> TaskEvent:
    return TaskEvent(
        event_id=new_event_id(),
        task_id=task_id,
        server="sleeper",
        tool="sleep_task",
        type="progress",
        seq=seq,
        ts=utc_now(),
        payload={"percent": seq, "pad": "x" * 2000},
    )


def report(phase: str, poster: EventPoster, **extra: Any) -> None:
    stats = dataclasses.asdict(poster.stats)
    print(json.dumps({"phase": phase, "stats": stats, "repr": repr(poster), **extra}), flush=True)


async def main(url: str, secret: str, outbox: str, mode: str = "") -> None:
    poster = EventPoster("sleeper", url, secret, outbox=outbox, close_grace_s=0.5)
    await poster.start()
    for seq in range(1, 21):
        await poster.post(event("sleep-a", seq))
    await poster.flush()
    limit = max(os.path.getsize(outbox + tail) for tail in ("", "-wal"))
    hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    for seq in range(21, 121):
        await poster.post(event("sleep-a", seq))
        await poster.post(event("sleep-b", seq - 20))
    for _ in range(500):  # read as a dict: a poster without these counters still reports
        stats = dataclasses.asdict(poster.stats)
        if stats.get("outbox_failing") and stats.get("outbox_write_failures", 0) >= 3:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.5)  # writes keep failing: more attempts, no more log lines
    report("failing", poster, limit=limit)
    if mode == "close-while-failing":
        await poster.aclose()
        report("closed", poster)
        return
    await asyncio.to_thread(sys.stdin.readline)
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
    await poster.flush()
    report("recovered", poster)
    await poster.aclose()
    report("closed", poster)


if __name__ == "__main__":
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of the default kill
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    asyncio.run(main(*sys.argv[1:5]))
