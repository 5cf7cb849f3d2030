"""The receiver's SQLite file, through the kit's store: its schema and every statement.

Two declared :attr:`~robot_mcp_kit.store.Kind.RECORD` tables (history, pruned by count and
age through :meth:`~robot_mcp_kit.store.SqliteStore.prune`, the one place rows go):

``receiver_events`` — every event the receiver acknowledged (or fetched to fill a gap), once
per ``(server, event_id)``, with its body as received. An event is *pending* while its
``seq`` is above its task's ``delivered_seq``. Pruning keeps the newest ``retain_events``
and every pending one.

``receiver_tasks`` — one row per task: its ``delivered_seq`` (the cursor: the last seq the
handler returned from, or that was passed over), the gaps noticed (``2-4,7``), its state
as the receiver knows it (``running``, ``succeeded``, ``failed``, ``cancelled``, ``lost``)
and the seq of its terminal event. Its ``highest_seq`` is written with the row's other
changes only (a new task, a gap, a terminal event); the highest seq seen is the larger of
it and the task's newest event row. Pruning removes finished tasks with no event waiting,
untouched for ``retain_tasks_s`` (a reconciliation that still finds the task on its
server touches it).

Every write is cold, on the caller's thread, in the open :class:`WriteBatch
<robot_mcp_kit.receiver._batch.WriteBatch>` of the event loop's turn (group commit): an
event is in the file before its POST is answered 2xx (the answer awaits the batch), and a
cursor before the next update of its task is handed over (the lane awaits it). The file is
WAL with ``synchronous=NORMAL``: a commit survives the process being killed; the last ones
may roll back on power loss.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from robot_mcp_kit.receiver._batch import WriteBatch
from robot_mcp_kit.store import Kind, Schema, SqliteStore, Table

__all__ = ["RECEIVER_SCHEMA", "EventRow", "ReceiverStore", "TaskRow"]

RECEIVER_EVENTS: Final = Table(
    "receiver_events",
    Kind.RECORD,
    "CREATE TABLE receiver_events ("
    " id INTEGER PRIMARY KEY,"
    " server TEXT NOT NULL,"
    " event_id TEXT NOT NULL,"
    " task_id TEXT NOT NULL,"
    " seq INTEGER NOT NULL,"
    " type TEXT NOT NULL,"
    " body BLOB NOT NULL,"
    " source TEXT NOT NULL,"
    " received_at REAL NOT NULL,"
    " traceparent TEXT,"
    " UNIQUE (server, event_id))",
    time_column="received_at",
    indexes=("CREATE INDEX receiver_events_task ON receiver_events (server, task_id, seq)",),
)
RECEIVER_TASKS: Final = Table(
    "receiver_tasks",
    Kind.RECORD,
    "CREATE TABLE receiver_tasks ("
    " server TEXT NOT NULL,"
    " task_id TEXT NOT NULL,"
    " tool TEXT NOT NULL DEFAULT '',"
    " state TEXT NOT NULL DEFAULT 'running',"
    " delivered_seq INTEGER NOT NULL DEFAULT 0,"
    " highest_seq INTEGER NOT NULL DEFAULT 0,"
    " terminal_seq INTEGER,"
    " gaps TEXT NOT NULL DEFAULT '',"
    " updated_at REAL NOT NULL,"
    " PRIMARY KEY (server, task_id))",
    time_column="updated_at",
    indexes=("CREATE INDEX receiver_tasks_state ON receiver_tasks (state, server)",),
)

RECEIVER_SCHEMA: Final = Schema(
    version=1,
    tables=(RECEIVER_EVENTS, RECEIVER_TASKS),
    pruned=frozenset({"receiver_events", "receiver_tasks"}),
)
"""The receiver file's schema (version 1)."""

_INSERT_EVENT = (
    "INSERT INTO receiver_events "
    "(server, event_id, task_id, seq, type, body, source, received_at, traceparent) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (server, event_id) DO NOTHING"
)
_UPSERT_TASK = (
    "INSERT INTO receiver_tasks "
    "(server, task_id, tool, state, delivered_seq, highest_seq, terminal_seq, gaps, updated_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (server, task_id) DO UPDATE SET "
    "tool = excluded.tool, state = excluded.state, delivered_seq = excluded.delivered_seq, "
    "highest_seq = excluded.highest_seq, terminal_seq = excluded.terminal_seq, "
    "gaps = excluded.gaps, updated_at = excluded.updated_at"
)
_ADVANCE = (
    "UPDATE receiver_tasks SET delivered_seq = ?, state = ?, updated_at = ? "
    "WHERE server = ? AND task_id = ?"
)
_TASK_COLUMNS = (
    "server, task_id, tool, state, delivered_seq, max(highest_seq, coalesce((SELECT "
    "max(e.seq) FROM receiver_events e WHERE e.server = t.server AND e.task_id = t.task_id), "
    "0)), terminal_seq, gaps"
)
# An event is pending while its seq is above its task's cursor: pruning spares it.
_PENDING = (
    "seq > coalesce((SELECT t.delivered_seq FROM receiver_tasks t WHERE "
    "t.server = receiver_events.server AND t.task_id = receiver_events.task_id), -1)"
)
_UNFINISHED = (
    "state = 'running' OR EXISTS (SELECT 1 FROM receiver_events e WHERE "
    "e.server = receiver_tasks.server AND e.task_id = receiver_tasks.task_id AND "
    "e.seq > receiver_tasks.delivered_seq)"
)


@dataclass(frozen=True, slots=True)
class TaskRow:
    """One ``receiver_tasks`` row."""

    server: str
    task_id: str
    tool: str
    state: str
    delivered_seq: int
    highest_seq: int
    terminal_seq: int | None
    gaps: str


@dataclass(frozen=True, slots=True)
class EventRow:
    """One ``receiver_events`` row to write, or read back as pending."""

    server: str
    event_id: str
    task_id: str
    seq: int
    type: str
    body: bytes
    source: str
    received_at: float
    traceparent: str | None = None

    def values(self) -> tuple[Any, ...]:
        return (
            self.server,
            self.event_id,
            self.task_id,
            self.seq,
            self.type,
            self.body,
            self.source,
            self.received_at,
            self.traceparent,
        )


def _task_row(row: sqlite3.Row | tuple[Any, ...]) -> TaskRow:
    return TaskRow(
        server=str(row[0]),
        task_id=str(row[1]),
        tool=str(row[2]),
        state=str(row[3]),
        delivered_seq=int(row[4]),
        highest_seq=int(row[5]),
        terminal_seq=None if row[6] is None else int(row[6]),
        gaps=str(row[7]),
    )


class ReceiverStore:
    """The receiver's file: the statements of the receiver, over one :class:`SqliteStore`.

    The receiver calls it from its event loop only. Every write joins :attr:`batch`
    (committed at the end of the loop's turn; with no running loop, before it returns).

    Args:
        path: the SQLite file (created with its directory if missing).

    Raises:
        robot_mcp_kit.store.StoreError: the file cannot be opened (see
            :class:`~robot_mcp_kit.store.SqliteStore`).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.store = SqliteStore(path, RECEIVER_SCHEMA)
        self.path = self.store.path
        self.batch = WriteBatch(self.store)

    def __repr__(self) -> str:
        return f"<ReceiverStore {str(self.path)!r}>"

    # -- writes ---------------------------------------------------------------------------

    def add_event(self, event: EventRow, task: TaskRow | None, now: float) -> bool:
        """Write a new event, and its task's row when given, together; False (nothing
        written) when the server already sent an event with this ``event_id``."""

        def work(conn: sqlite3.Connection) -> bool:
            if conn.execute(_INSERT_EVENT, event.values()).rowcount == 0:
                return False
            if task is not None:
                conn.execute(_UPSERT_TASK, (*_task_values(task), now))
            return True

        return self.batch.write(work)

    def save_task(self, task: TaskRow, now: float) -> None:
        """Write a task's row (a task learnt from its server, before any event of it)."""
        self.batch.write(lambda conn: conn.execute(_UPSERT_TASK, (*_task_values(task), now)))

    def advance(self, moves: Iterable[tuple[str, str, int, str]], now: float) -> None:
        """Move cursors: each ``(server, task_id, delivered_seq, state)``."""
        rows = [(seq, state, now, server, task_id) for server, task_id, seq, state in moves]
        self.batch.write(lambda conn: conn.executemany(_ADVANCE, rows))

    def touch(self, server: str, task_ids: Iterable[str], now: float) -> None:
        """Mark tasks a server still lists as seen now (pruning spares them)."""
        rows = [(now, server, task_id) for task_id in task_ids]
        self.batch.write(
            lambda conn: conn.executemany(
                "UPDATE receiver_tasks SET updated_at = ? WHERE server = ? AND task_id = ?", rows
            )
        )

    def prune(self, *, retain_events: int, retain_tasks_s: float) -> int:
        """Drop delivered events beyond the newest ``retain_events`` and finished tasks
        untouched for ``retain_tasks_s``; return how many rows went."""
        gone = self.store.prune("receiver_events", keep_last=retain_events, spare_where=_PENDING)
        gone += self.store.prune(
            "receiver_tasks", older_than_s=retain_tasks_s, spare_where=_UNFINISHED
        )
        return gone

    def forget_all(self) -> None:
        """Delete every event and task (``fake_rvc``'s reset)."""

        def work(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM receiver_events")
            conn.execute("DELETE FROM receiver_tasks")

        self.batch.write(work)

    # -- reads ----------------------------------------------------------------------------

    def task(self, server: str, task_id: str) -> TaskRow | None:
        """One task's row (``highest_seq``: the highest seq seen), or None."""
        row = self.store.query_one(
            f"SELECT {_TASK_COLUMNS} FROM receiver_tasks t "  # noqa: S608 - constant
            "WHERE server = ? AND task_id = ?",
            (server, task_id),
        )
        return None if row is None else _task_row(row)

    def open_tasks(self) -> list[TaskRow]:
        """The tasks still running or with events not yet delivered (loaded at start)."""
        return [
            _task_row(r)
            for r in self.store.query(
                f"SELECT {_TASK_COLUMNS} FROM receiver_tasks t "  # noqa: S608 - constant
                f"WHERE {_UNFINISHED.replace('receiver_tasks.', 't.')} ORDER BY updated_at"
            )
        ]

    def pending(self, server: str, task_id: str, after_seq: int) -> Iterator[EventRow]:
        """A task's stored events with seq above ``after_seq``, by seq then arrival."""
        for r in self.store.query(
            "SELECT server, event_id, task_id, seq, type, body, source, received_at, "
            "traceparent FROM receiver_events WHERE server = ? AND task_id = ? AND seq > ? "
            "ORDER BY seq, id",
            (server, task_id, after_seq),
        ):
            yield EventRow(
                str(r[0]),
                str(r[1]),
                str(r[2]),
                int(r[3]),
                str(r[4]),
                bytes(r[5]),
                str(r[6]),
                float(r[7]),
                r[8],
            )

    def body(self, server: str, event_id: str) -> bytes | None:
        """The stored body of a server's event, or None."""
        row = self.store.query_one(
            "SELECT body FROM receiver_events WHERE server = ? AND event_id = ?",
            (server, event_id),
        )
        return None if row is None else bytes(row[0])

    def processed(self, server: str, task_id: str) -> list[tuple[str, int, str]]:
        """A task's stored events as ``(event_id, seq, type)``, in the order stored."""
        return [
            (str(r[0]), int(r[1]), str(r[2]))
            for r in self.store.query(
                "SELECT event_id, seq, type FROM receiver_events "
                "WHERE server = ? AND task_id = ? ORDER BY id",
                (server, task_id),
            )
        ]

    def counts(self) -> dict[str, int]:
        """Rows per table."""
        return self.store.counts()

    def close(self) -> None:
        """Commit the open batch and close the file. Idempotent."""
        self.batch.commit()
        self.store.close()


def _task_values(task: TaskRow) -> tuple[Any, ...]:
    return (
        task.server,
        task.task_id,
        task.tool,
        task.state,
        task.delivered_seq,
        task.highest_seq,
        task.terminal_seq,
        task.gaps,
    )
