"""The hot-write path: one dedicated thread draining a bounded queue into SQLite.

``enqueue`` never blocks: it appends to a bounded deque under a short lock and returns
False (counting a drop) when the deque is full. The writer thread wakes, takes up to
``batch_max`` jobs, and writes them in ONE transaction while holding the store's write
lock — so a cold write on another thread waits at most one bounded batch. Consecutive jobs
with the same SQL go through one ``executemany``. A job that raises is counted in
``failed``; it never kills the thread, and the other jobs of its batch are still
written. Shutdown is by a stop flag: the thread drains everything queued, then exits.

Failures are logged once per episode, not once per job (a full disk fails every job
until space comes back): ``store_hot_write_failed`` (ERROR) when batches start failing,
``store_hot_write_recovered`` (WARNING) when one commits again, folded as
:class:`~robot_mcp_kit._failures.FailureEpisodes` says. A batch that both writes and
fails some jobs (a bad statement among good ones) is logged each time. ``stats.failing``
is True from a batch that wrote nothing and failed until one commits.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from robot_mcp_kit._exceptions import ConfigurationError, FlushTimeout
from robot_mcp_kit._failures import FailureEpisodes
from robot_mcp_kit.log import get_logger
from robot_mcp_kit.telemetry import set_attributes, span

__all__ = ["HotWriter", "Params", "StoreStats"]

_log = get_logger("robot_mcp_kit.store")

Params: TypeAlias = Sequence[Any] | Mapping[str, Any]
_Job: TypeAlias = tuple[str, Params]

# Log the first drop of a streak, then every this-many drops, so a flood of drops is
# visible without writing one line per dropped record.
_DROP_LOG_EVERY = 1000


@dataclass(frozen=True)
class StoreStats:
    """A snapshot of the hot path's counters.

    ``enqueued``: accepted by ``enqueue``; ``written``: committed; ``dropped``: refused
    because the queue was full; ``failed``: raised when executed, or lost with their
    batch's failed commit (logged once per streak); ``queued``: accepted and not yet
    processed; ``failing``: the last batch wrote nothing and failed (a full disk, a
    read-only file), until one commits again.
    """

    enqueued: int
    written: int
    dropped: int
    failed: int
    queued: int
    failing: bool = False


class HotWriter:
    """The writer thread and its bounded queue. Thread-safe; owned by ``SqliteStore``."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        lock: threading.RLock,
        *,
        queue_max: int,
        batch_max: int,
        name: str,
    ) -> None:
        if queue_max < 1:
            raise ConfigurationError(f"hot_queue_max must be >= 1, got {queue_max}")
        if batch_max < 1:
            raise ConfigurationError(f"batch_max must be >= 1, got {batch_max}")
        self._conn = conn
        self._lock = lock
        self._queue_max = queue_max
        self._batch_max = batch_max
        self._jobs: deque[_Job] = deque()
        self._qlock = threading.Lock()
        self._wake = threading.Event()
        self._done = threading.Condition()
        self._stopping = False
        self._enqueued = 0
        self._processed = 0
        self._written = 0
        self._dropped = 0
        self._failed = 0
        self._drop_streak = 0
        self._episodes = FailureEpisodes()  # the writer thread's alone
        self._span_attributes = {"robot_mcp.store": name}
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    # --- producer side -------------------------------------------------------------

    def enqueue(self, sql: str, params: Params) -> bool:
        """Queue one statement; False (and one more drop) when the queue is full or closing."""
        with self._qlock:
            # Checked under the lock stop() takes: a job accepted here is one the thread
            # will still drain; one arriving after stop() began is a counted drop, never a
            # silent loss.
            if self._stopping or len(self._jobs) >= self._queue_max:
                self._dropped += 1
                self._drop_streak += 1
                streak = self._drop_streak
            else:
                self._jobs.append((sql, params))
                self._enqueued += 1
                self._drop_streak = 0
                streak = 0
        if streak:
            if streak == 1 or streak % _DROP_LOG_EVERY == 0:
                _log.error("store_hot_queue_full", dropped=self._dropped, queue_max=self._queue_max)
            return False
        if not self._wake.is_set():
            self._wake.set()
        return True

    def flush(self, timeout_s: float | None) -> None:
        """Block until every job accepted before this call has been processed.

        Raises:
            FlushTimeout: when ``timeout_s`` elapses first (a ``TimeoutError``).
        """
        with self._qlock:
            target = self._enqueued
        self._wake.set()
        with self._done:
            ok = self._done.wait_for(lambda: self._processed >= target, timeout=timeout_s)
        if not ok:
            raise FlushTimeout(
                f"store flush timed out after {timeout_s} s with "
                f"{target - self._processed} queued records still unwritten"
            )

    def stop(self, timeout_s: float) -> bool:
        """Drain what is queued, stop the thread; False if it did not stop in time."""
        with self._qlock:
            self._stopping = True
        self._wake.set()
        self.thread.join(timeout_s)
        return not self.thread.is_alive()

    def stats(self) -> StoreStats:
        with self._qlock:
            return StoreStats(
                enqueued=self._enqueued,
                written=self._written,
                dropped=self._dropped,
                failed=self._failed,
                queued=len(self._jobs),
                failing=self._episodes.failing,
            )

    # --- the thread --------------------------------------------------------------

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            while True:
                batch = self._take()
                if not batch:
                    break
                # One span per flush (telemetry on): how many writes, how many failed.
                with span("store.flush", self._span_attributes) as flush:
                    try:
                        written, failed, error = self._write(batch)
                    except Exception as exc:  # never let one batch kill the thread
                        if not isinstance(exc, sqlite3.Error):  # a bug, not the disk: loud
                            _log.exception("store_writer_batch_failed", jobs=len(batch))
                        written, failed, error = 0, len(batch), f"{type(exc).__name__}: {exc}"
                    if flush is not None:
                        set_attributes(
                            flush,
                            **{
                                "robot_mcp.store.batch_size": len(batch),
                                "robot_mcp.store.written": written,
                                "robot_mcp.store.failed": failed,
                            },
                        )
                # Only this thread writes these counters: no lock needed.
                self._written += written
                self._failed += failed
                self._log_outcome(written, failed, error)
                with self._done:
                    self._processed += len(batch)
                    self._done.notify_all()
            if self._stopping and not self._jobs:
                return

    def _take(self) -> list[_Job]:
        # No lock here: this thread is the only consumer and deque.popleft is atomic. A
        # lock shared with enqueue would make the event loop, blocked on it for a moment,
        # wait a whole GIL switch interval (5 ms) to run again.
        jobs = self._jobs
        batch: list[_Job] = []
        popleft = jobs.popleft
        try:
            for _ in range(self._batch_max):
                batch.append(popleft())
        except IndexError:
            pass
        return batch

    def _log_outcome(self, written: int, failed: int, error: str) -> None:
        """Log a failing batch once per episode (see the module docstring)."""
        episodes = self._episodes
        if written:
            if failed:  # a bad job among good ones: not an episode, logged every time
                _log.error("store_hot_write_failed", error=error, failed=failed, written=written)
            if episodes.succeeded():
                _log.warning(
                    "store_hot_write_recovered",
                    failed=episodes.failures,
                    seconds=episodes.seconds(),
                )
        elif failed and episodes.failed(failed):
            _log.error(
                "store_hot_write_failed",
                error=error,
                failed=episodes.failures,
                then="logged again when writes work again (store_hot_write_recovered)",
            )

    def _write(self, batch: list[_Job]) -> tuple[int, int, str]:
        conn = self._conn
        with self._lock:
            try:
                conn.execute("BEGIN IMMEDIATE")
                i = 0
                while i < len(batch):
                    sql = batch[i][0]
                    j = i + 1
                    while j < len(batch) and batch[j][0] == sql:
                        j += 1
                    if j - i == 1:
                        conn.execute(sql, batch[i][1])
                    else:
                        conn.executemany(sql, [job[1] for job in batch[i:j]])
                    i = j
                conn.execute("COMMIT")
                return len(batch), 0, ""
            except sqlite3.Error:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            # Slow path, only after an error: one job at a time so a bad job costs itself.
            return self._write_one_by_one(batch)

    def _write_one_by_one(self, batch: list[_Job]) -> tuple[int, int, str]:
        """Each job on its own in one transaction: (written, failed, the first error)."""
        conn = self._conn
        failed = pending = 0
        error = ""
        conn.execute("BEGIN IMMEDIATE")
        for sql, params in batch:
            try:
                conn.execute(sql, params)
                pending += 1
            except sqlite3.Error as exc:
                failed += 1
                error = error or f"{exc} (in {sql[:120]})"
                if not conn.in_transaction:  # the error rolled the whole transaction back
                    failed += pending
                    pending = 0
                    conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            return 0, failed + pending, error or f"{exc} (at COMMIT)"
        return pending, failed, error
