"""A child process for test_outbox_full_disk: an EventPoster whose outbox's disk fills up.

``python _full_disk_poster.py URL SECRET DIR DISK [close-while-full]``, the outbox being
``DIR/outbox.db``. Through the public API only:

1. posts 20 events of task ``sleep-a`` and waits until they are delivered;
2. fills the disk: ``DISK=tmpfs``: ``DIR`` is a 2 MiB tmpfs (the test mounts it in a user and
   mount namespace) and a ballast file takes its last free byte, so writes fail with
   ``ENOSPC``; ``DISK=rlimit``: ``RLIMIT_FSIZE`` drops to the outbox's current size, with
   ``SIGXFSZ`` ignored, so writes past it fail with ``EFBIG``;
3. posts 50 new events over two tasks (``sleep-a`` 21..45, ``sleep-b`` 1..25, interleaved),
   waits up to 15 s for them to be delivered, and prints one JSON line (phase ``full``):
   the poster's ``stats`` and ``repr`` and the outbox's rows (event id → state);
4. with ``close-while-full``, closes the poster at once, the disk still full, prints the
   phase ``closed`` and exits; otherwise waits for a line on stdin, frees the space (the
   ballast deleted, or the limit lifted), waits up to 30 s for every row to be written and
   prints the phase ``recovered``, then closes the poster and prints ``closed``.

With ``idle-mark`` instead (the receiver holds the first post of task ``held`` for a few
seconds): after step 1 it posts one event of ``held``, waits until its row is in the file,
fills the disk while the post is held, waits until it is delivered and 1 s more (its
settlement cannot be written), prints ``full``, frees the space, posts nothing, waits up
to 10 s for the outbox to be healthy and prints ``idle`` (with the held event's id), then
closes the poster and prints ``closed``.

The file is read by this process (a tmpfs mounted in its namespace is gone when it exits).
Logs go to stderr (a pipe: neither the limit nor the tmpfs applies to it).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import json
import logging
import os
import resource
import signal
import sqlite3
import sys
from pathlib import Path
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


def rows_of(outbox: Path) -> dict[str, str]:
    uri = f"{outbox.as_uri()}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
        return dict(conn.execute("SELECT event_id, state FROM outbox_events ORDER BY id"))


def report(phase: str, poster: EventPoster, outbox: Path, **extra: Any) -> None:
    stats = dataclasses.asdict(poster.stats)
    line = {"phase": phase, "stats": stats, "repr": repr(poster), "rows": rows_of(outbox)}
    print(json.dumps({**line, **extra}), flush=True)


class Disk:
    """Fills the outbox's disk and frees it again, the way ``kind`` says."""

    def __init__(self, kind: str, outbox: Path) -> None:
        self.kind = kind
        self.outbox = outbox
        self.ballast = outbox.with_name("ballast")
        self.hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]

    def fill(self) -> int:
        """Make the outbox's next growth fail; return the bytes left free (or the limit)."""
        if self.kind == "rlimit":
            limit = max(os.path.getsize(f"{self.outbox}{tail}") for tail in ("", "-wal"))
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, self.hard))
            return limit
        fd = os.open(self.ballast, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            for size in (64 * 1024, 4096, 512, 1):
                try:
                    while True:
                        os.write(fd, b"\0" * size)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
        finally:
            os.close(fd)
        return os.statvfs(self.outbox.parent).f_bavail

    def free(self) -> None:
        if self.kind == "rlimit":
            resource.setrlimit(resource.RLIMIT_FSIZE, (self.hard, self.hard))
        else:
            self.ballast.unlink()


async def wait_until(poster: EventPoster, ok: Any, timeout_s: float) -> None:
    for _ in range(int(timeout_s / 0.05)):
        if ok(dataclasses.asdict(poster.stats)):  # a dict: counters main lacks read as absent
            return
        await asyncio.sleep(0.05)


async def idle_mark(poster: EventPoster, outbox: Path, disk: Disk) -> None:
    """A settlement that fails on the full disk, then an idle poster (see the docstring)."""
    held = event("held", 1)
    await poster.post(held)
    for _ in range(100):
        if held.event_id in rows_of(outbox):
            break
        await asyncio.sleep(0.05)
    disk.fill()
    await wait_until(poster, lambda s: s["sent"] >= 21, 15)
    await asyncio.sleep(1.0)
    report("full", poster, outbox, held=held.event_id)
    disk.free()
    await wait_until(poster, lambda s: not s["outbox_failing"], 10)
    report("idle", poster, outbox, held=held.event_id)
    await poster.aclose()
    report("closed", poster, outbox)


async def main(url: str, secret: str, directory: str, disk_kind: str, mode: str = "") -> None:
    outbox = Path(directory) / "outbox.db"
    poster = EventPoster("sleeper", url, secret, outbox=outbox, close_grace_s=0.5)
    await poster.start()
    for seq in range(1, 21):
        await poster.post(event("sleep-a", seq))
    await poster.flush()
    disk = Disk(disk_kind, outbox)
    if mode == "idle-mark":
        await idle_mark(poster, outbox, disk)
        return
    left = disk.fill()
    for seq in range(21, 46):
        await poster.post(event("sleep-a", seq))
        await poster.post(event("sleep-b", seq - 20))
    await wait_until(poster, lambda s: s["sent"] >= 70 and s["outbox_write_failures"] >= 3, 15)
    await asyncio.sleep(0.5)  # writes keep failing: more attempts, no more log lines
    report("full", poster, outbox, left=left)
    if mode == "close-while-full":
        await poster.aclose()
        report("closed", poster, outbox)
        return
    await asyncio.to_thread(sys.stdin.readline)
    disk.free()
    await wait_until(
        poster, lambda s: not s["outbox_failing"] and s.get("outbox_unwritten") == 0, 30
    )
    report("recovered", poster, outbox)
    await poster.aclose()
    report("closed", poster, outbox)


if __name__ == "__main__":
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of the default kill
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    asyncio.run(main(*sys.argv[1:6]))
