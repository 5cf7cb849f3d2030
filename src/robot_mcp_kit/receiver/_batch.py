"""Group commit: the receiver's writes of one turn of its event loop, in one transaction.

A receiver under load takes many posts at once, each needing its event committed before
its 2xx, and hands many updates over, each needing its cursor committed before the task's
next one. One transaction per write costs a commit each; :class:`WriteBatch` opens one
transaction at the first write of a turn of the event loop, runs every write of that turn
in it, and commits it when the turn ends (``loop.call_soon``). Whoever needs the write
durable awaits :meth:`WriteBatch.done` (a POST's answer, a lane's next update).

Failure: a write whose statement raises raises to its caller (nothing of it was written;
if SQLite rolled the whole transaction back with it, the batch fails). A batch whose
commit fails is rolled back: its ``undo`` callbacks run, newest first, and its waiters get
the error (a POST answers 503; its poster sends it again). After a commit its ``after``
callbacks run, oldest first, then its waiters wake.

Used from the event loop's thread only; with no running loop a write is its own
transaction, committed before it returns.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from robot_mcp_kit.log import get_logger
from robot_mcp_kit.store import SqliteStore

__all__ = ["WriteBatch"]

T = TypeVar("T")

_log = get_logger("robot_mcp_kit.receiver")


class WriteBatch:
    """One open transaction per turn of the event loop, over ``store``'s write connection."""

    def __init__(self, store: SqliteStore) -> None:
        self._store = store
        self._cm: AbstractContextManager[sqlite3.Connection] | None = None
        self._conn: sqlite3.Connection | None = None
        self._done: asyncio.Future[None] | None = None
        self._after: list[Callable[[], None]] = []
        self._undo: list[Callable[[], None]] = []
        self.commits = 0
        self.failures = 0
        self.before_commit: Callable[[], None] | None = None
        """Called in the open transaction just before it commits (the receiver writes the
        cursors moved since the last commit there)."""

    def __repr__(self) -> str:
        state = "open" if self._cm is not None else "idle"
        return f"<WriteBatch {state} commits={self.commits} failures={self.failures}>"

    def write(
        self,
        work: Callable[[sqlite3.Connection], T],
        *,
        after: Callable[[], None] | None = None,
        undo: Callable[[], None] | None = None,
    ) -> T:
        """Run ``work`` in this turn's transaction; ``after`` once it commits, ``undo`` if
        it is rolled back. Raises what ``work`` raises (then neither callback runs)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            with self._store.transaction() as conn:
                result = work(conn)
            if after is not None:
                after()
            return result
        conn = self._open(loop)
        try:
            result = work(conn)
        except Exception:
            if not conn.in_transaction:  # SQLite rolled the whole batch back with it
                self._fail(RuntimeError("the transaction was rolled back by a failed write"))
            raise
        if after is not None:
            self._after.append(after)
        if undo is not None:
            self._undo.append(undo)
        return result

    def hooks(
        self, *, after: Callable[[], None] | None = None, undo: Callable[[], None] | None = None
    ) -> None:
        """Add callbacks to the open batch (``after`` runs now when none is open: the
        writes it follows were committed already)."""
        if self._cm is None:
            if after is not None:
                after()
            return
        if after is not None:
            self._after.append(after)
        if undo is not None:
            self._undo.append(undo)

    def done(self) -> asyncio.Future[None]:
        """A future of the open batch's commit (raising its error), or a done one."""
        if self._done is not None:
            return self._done
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future

    def _open(self, loop: asyncio.AbstractEventLoop) -> sqlite3.Connection:
        if self._cm is None or self._conn is None:
            cm = self._store.transaction()
            self._conn = cm.__enter__()
            self._cm = cm
            self._done = loop.create_future()
            loop.call_soon(self.commit)
        return self._conn

    def commit(self) -> None:
        """Commit the open batch now (the end of the turn does it; ``aclose`` too)."""
        if self._cm is not None and self.before_commit is not None:
            try:
                self.before_commit()
            except Exception:  # what it wrote is kept to write again; the batch goes on
                _log.exception("receiver_before_commit_failed")
        cm, conn, done = self._cm, self._conn, self._done
        if cm is None or conn is None or done is None:
            return
        after, self._after = self._after, []
        undo, self._undo = self._undo, []
        self._cm = self._conn = self._done = None
        try:
            cm.__exit__(None, None, None)
        except Exception as exc:
            # The store's transaction leaves a failed COMMIT open: roll it back here (the
            # receiver's writes all go through this batch, on this thread).
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            self._rolled_back(exc, undo, done)
            return
        self.commits += 1
        for callback in after:
            try:
                callback()
            except Exception:
                _log.exception("receiver_after_commit_failed")
        if not done.done():
            done.set_result(None)

    def _fail(self, exc: Exception) -> None:
        cm, done = self._cm, self._done
        undo, self._undo = self._undo, []
        self._after = []
        self._cm = self._conn = self._done = None
        if cm is not None:
            cm.__exit__(type(exc), exc, None)
        if done is not None:
            self._rolled_back(exc, undo, done)

    def _rolled_back(
        self, exc: Exception, undo: list[Callable[[], None]], done: asyncio.Future[Any]
    ) -> None:
        self.failures += 1
        _log.error("receiver_commit_failed", error=type(exc).__name__)
        for callback in reversed(undo):
            try:
                callback()
            except Exception:
                _log.exception("receiver_undo_failed")
        if not done.done():
            done.set_exception(exc)
            done.exception()  # retrieved: a batch nobody awaits must not warn
