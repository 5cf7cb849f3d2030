"""A child process for test_receiver_full_disk: a receiver whose state file fills up.

``python _full_disk_receiver.py STATE``. Through the public API only: it takes 10 posts,
lowers its own ``RLIMIT_FSIZE`` to the largest of the state files (with ``SIGXFSZ``
ignored, every write past it fails with ``EFBIG``: a full disk, for these files), posts 50
more events of 4 KiB, lifts the limit (the disk has room again), posts again those it was
answered 503 for (as a poster would), and prints one JSON line: the statuses of each
round and the seqs the handler got, in order.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import signal
import sys
import time

from robot_mcp_kit.models import TaskEvent, new_event_id, utc_now
from robot_mcp_kit.receiver import Receiver, ServerConfig, TaskUpdate
from robot_mcp_kit.signing import signed_headers


def body(seq: int) -> bytes:
    event = TaskEvent(
        event_id=new_event_id(),
        task_id="slee-000001",
        server="sleeper",
        tool="sleep_task",
        type="progress",
        seq=seq,
        ts=utc_now(),
        payload={"pad": "x" * (4096 if seq > 10 else 10)},
    )
    return event.model_dump_json().encode()


async def main(path: str) -> None:
    got: list[int] = []

    async def handle(update: TaskUpdate) -> None:
        got.append(update.seq)

    receiver = Receiver(
        [ServerConfig("sleeper", ("s",))], handle, state=path, reconcile_every_s=None
    )
    bodies = {seq: body(seq) for seq in range(1, 61)}

    async def post(seq: int) -> int:
        data = bodies[seq]
        headers = signed_headers("sleeper", "s", data, int(time.time()))
        return (await receiver.receive(headers, data)).status

    async with receiver:
        first = [await post(seq) for seq in range(1, 11)]
        while len(got) < 10:
            await asyncio.sleep(0.01)
        sizes = [os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p)]
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (max(sizes), hard))
        full = {seq: await post(seq) for seq in range(11, 61)}
        await asyncio.sleep(0.5)
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        again = {seq: await post(seq) for seq, status in full.items() if status != 200}
        deadline = time.monotonic() + 20
        while len(got) < 60 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        stats = receiver.stats.to_dict()
    print(json.dumps({"first": first, "full": full, "again": again, "got": got, "stats": stats}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
