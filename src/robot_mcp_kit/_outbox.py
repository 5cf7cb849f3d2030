"""The durable outbox and task journal: one SQLite file through the kit's store.

Opt-in: ``EventPoster(..., outbox=path)`` or ``RVC_OUTBOX=path``. The poster then keeps
every event in the ``outbox_events`` table before it is sent, and a
:class:`~robot_mcp_kit.tasks.TaskManager` built on that poster keeps its tasks in the
``tasks`` table of the same file (the *task journal*). Both tables are declared
:attr:`~robot_mcp_kit.store.Kind.RECORD` s: history, written hot (one writer thread,
bounded queue), trimmed by count.

``outbox_events`` — one row per event, in the order the poster accepted them (``id``):

=============  ===========================================================================
``state``      meaning
=============  ===========================================================================
``pending``    accepted, not yet acknowledged; sent again after a restart, in ``id`` order
``delivered``  a receiver answered 2xx; kept as the bounded delivered tail (replay, and
               ``get_task_events`` after a restart)
``given_up``   the 10-minute retry budget ran out
``dropped``    pushed out of a full outbox (the size cap is the poster's ``queue_max``)
=============  ===========================================================================

Trimming keeps every ``pending`` row, the newest row of each task in the journal (its
last ``seq``, see :meth:`Outbox.tasks`) and the newest ``delivered_tail`` settled ones (the
store's ``prune(keep_last=..., spare=..., spare_where=...)``, the one chokepoint that
deletes by count). Settled rows are not in ``id`` order (the poster delivers each task's
lane on its own, so an old event of a refused task can stay pending while newer ones
settle), which is why the pending rows are spared rather than assumed the newest; the
poster's ``queue_max`` bounds how many there are.

``tasks`` — one row per task the manager remembers: its last ``TaskInfo`` as JSON, the
last ``seq`` it allocated and the principal that started it (``owner``, a
:attr:`~robot_mcp_kit.tasks.Principal.key`; ``""`` without authentication). A task found
``running`` at the next start was interrupted by the process dying; the manager reports it
``task_failed`` / ``INTERRUPTED``.

Durability: rows are written by the store's writer thread. Before an event's first
attempt the poster tries to make its row durable: one flush covering every event accepted
so far, then a read of which of them are in the file (:meth:`Outbox.missing`); a row the
store could not write (a full disk, a read-only file, a full hot queue) is written again in
one cold transaction with every other unwritten one, in acceptance order
(:meth:`Outbox.write_events`). If that fails too, delivery comes first: the event is sent
all the same, *not durable*, and its row is written (with the state its event reached by
then) once the file takes it. So a receiver may see an event the file lacks only while the
file cannot be written; a crash then loses the undelivered ones, and the next start
continues each task's seqs from the newest the file knows of (see :meth:`Outbox.tasks`).
An event accepted but not yet sent when the process is killed is lost with its ``seq``;
the next start reuses that ``seq`` for the ``INTERRUPTED`` event, so the receiver sees no
gap.

One process per file: the outbox holds an exclusive lock on ``<file>.lock`` from before
the file is opened until it is closed (:mod:`robot_mcp_kit._lockfile`); a second process
is refused at start with :class:`~robot_mcp_kit.OutboxLocked` naming the file and the
holder's pid. Opening also checks the file whole: its size against its pages,
``PRAGMA integrity_check``, and every row (each event body must be the event its row
names, each task row a task), refusing a damaged file with
:class:`~robot_mcp_kit.store.StoreUnreadable` rather than sending what it holds.

See ``docs/decisions/0012-durable-outbox.md`` and
``docs/decisions/0019-outbox-lock-integrity-and-failed-writes.md``.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from robot_mcp_kit._exceptions import ConfigurationError, StoreUnreadable
from robot_mcp_kit._lockfile import LockFile
from robot_mcp_kit.log import get_logger
from robot_mcp_kit.models import TaskEvent, TaskInfo
from robot_mcp_kit.store import Kind, Schema, SqliteStore, Table
from robot_mcp_kit.telemetry import observe

__all__ = [
    "ENV_OUTBOX",
    "OUTBOX_SCHEMA",
    "Outbox",
    "OutboxRow",
    "OutboxState",
]
# EventRow is imported by _backlog (same package); not re-exported.

ENV_OUTBOX: Final = "RVC_OUTBOX"
"""Environment variable naming the outbox file; unset or empty: no outbox."""

OutboxState = Literal["pending", "delivered", "given_up", "dropped"]

_log = get_logger("robot_mcp_kit.outbox")

OUTBOX_EVENTS = Table(
    "outbox_events",
    Kind.RECORD,
    "CREATE TABLE outbox_events ("
    " id INTEGER PRIMARY KEY,"
    " event_id TEXT NOT NULL UNIQUE,"
    " task_id TEXT NOT NULL,"
    " seq INTEGER NOT NULL,"
    " body BLOB NOT NULL,"
    " enqueued_at REAL NOT NULL,"
    " state TEXT NOT NULL DEFAULT 'pending',"
    " traceparent TEXT,"
    " tracestate TEXT)",
    indexes=(
        "CREATE INDEX outbox_events_state ON outbox_events (state, id)",
        "CREATE INDEX outbox_events_task ON outbox_events (task_id, seq)",
    ),
)
TASKS = Table(
    "tasks",
    Kind.RECORD,
    "CREATE TABLE tasks ("
    " task_id TEXT PRIMARY KEY,"
    " state TEXT NOT NULL,"
    " seq INTEGER NOT NULL,"
    " updated_at TEXT NOT NULL,"
    " info TEXT NOT NULL,"
    " owner TEXT NOT NULL DEFAULT '')",
)


def _add_trace_columns(conn: sqlite3.Connection) -> None:
    """Version 2: each event row keeps the W3C trace context it was posted in."""
    conn.execute("ALTER TABLE outbox_events ADD COLUMN traceparent TEXT")
    conn.execute("ALTER TABLE outbox_events ADD COLUMN tracestate TEXT")


def _add_owner_column(conn: sqlite3.Connection) -> None:
    """Version 3: each task row keeps the principal that started it (``""``: anonymous)."""
    conn.execute("ALTER TABLE tasks ADD COLUMN owner TEXT NOT NULL DEFAULT ''")


OUTBOX_SCHEMA = Schema(
    version=3,
    tables=(OUTBOX_EVENTS, TASKS),
    pruned=frozenset({"outbox_events"}),
    migrations={2: _add_trace_columns, 3: _add_owner_column},
)
"""The outbox file's schema (version 2: the trace columns; 3: the tasks' owners; older
files migrate)."""

_INSERT_EVENT = (
    "INSERT OR IGNORE INTO outbox_events "
    "(event_id, task_id, seq, body, enqueued_at, state, traceparent, tracestate) "
    "VALUES (?, ?, ?, ?, ?, 'pending', ?, ?)"
)
_MARK_EVENT = "UPDATE outbox_events SET state = ? WHERE event_id = ?"
_UPSERT_TASK = (
    "INSERT INTO tasks (task_id, state, seq, updated_at, info, owner) "
    "VALUES (?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (task_id) DO UPDATE SET state = excluded.state, seq = excluded.seq, "
    "updated_at = excluded.updated_at, info = excluded.info, owner = excluded.owner"
)
_FORGET_TASK = "DELETE FROM tasks WHERE task_id = ?"

# A journalled task's newest event row holds its last seq: trimming spares it. Rows of a
# task are in seq order by id (the poster writes them in acceptance order).
_NEWEST_OF_EACH_TASK = (
    "id IN (SELECT max(e.id) FROM outbox_events e "
    "WHERE e.task_id IN (SELECT task_id FROM tasks) GROUP BY e.task_id)"
)
_IDS_PER_QUERY = 500  # well under sqlite's bound on ? placeholders in one statement

_LOCKED_REMEDY = (
    "Stop that process, or give this one its own outbox file (RVC_OUTBOX, or "
    "EventPoster(outbox=...))."
)


def _damaged_remedy(path: Path) -> str:
    return (
        f"Move it aside (e.g. to {path.name}.broken) and start again with a fresh one: the "
        "events still pending in it are then not sent, and the brain's reconciliation poll "
        "(list_tasks) covers their tasks; or restore it from a backup."
    )


def _sizes(outbox: Outbox) -> list[tuple[float, dict[str, str]]]:
    """The ``robot_mcp.outbox.size`` observations of ``outbox`` (read at each collection)."""
    name = {"robot_mcp.outbox": outbox.path.name}
    return [(n, {**name, "state": state}) for state, n in outbox.counts().items()]


def _by_seq(row: OutboxRow) -> int:
    return row.seq


@dataclass(frozen=True, slots=True)
class OutboxRow:
    """One pending event read back from the file."""

    event_id: str
    task_id: str
    seq: int
    body: bytes
    enqueued_at: float
    trace: tuple[str, str] | None = None
    """The ``(traceparent, tracestate)`` the event was posted in (telemetry on), or None."""


EventRow = tuple[str, str, int, bytes, float, str | None, str | None]
"""An event row to write: event_id, task_id, seq, body, enqueued_at, traceparent, tracestate."""


def _trace_of(traceparent: str | None, tracestate: str | None) -> tuple[str, str] | None:
    return None if not traceparent else (traceparent, tracestate or "")


class Outbox:
    """The outbox file: pending events for the poster, the task journal for the manager.

    Args:
        path: the SQLite file (created with its directory if missing).
        delivered_tail: how many settled (delivered, given up, dropped) events to keep
            beyond the pending ones, for replay and ``get_task_events`` after a restart.
        hot_queue_max: bound of the store's hot-write queue.

    Raises:
        OutboxLocked: another process (or another open in this one) holds the file.
        robot_mcp_kit.store.StoreUnreadable: the file is damaged: cut short, failing
            ``integrity_check``, or a row that is not what it says (see the store for the
            other reasons a file cannot be opened).

    Thread-safe like the store. Owned by the poster's
    :class:`~robot_mcp_kit._backlog.DurableBacklog`, which opens and closes it.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        delivered_tail: int = 1_000,
        hot_queue_max: int = 100_000,
    ) -> None:
        if delivered_tail < 0:
            raise ConfigurationError(f"delivered_tail must be >= 0, got {delivered_tail}.")
        self.path = Path(path)
        self.delivered_tail = delivered_tail
        self._lock = LockFile(self.path, what="outbox", remedy=_LOCKED_REMEDY)
        self._lock.acquire()  # before the file is opened: a holder may be writing it
        try:
            self.store = SqliteStore(
                self.path,
                OUTBOX_SCHEMA,
                hot_queue_max=hot_queue_max,
                full_check=True,
                check_rows=self._check_rows,
            )
        except BaseException:
            self._lock.release()
            raise
        self.enqueue_refusals = 0
        """Hot writes the store refused (its queue was full, or it was closed); logged."""
        self.cold_write_failures = 0
        """Cold writes (and durability checks) that raised: each is logged by its caller."""
        observe("robot_mcp.outbox.size", self, _sizes)

    def __repr__(self) -> str:
        return f"<Outbox {str(self.path)!r} {self.store!r}>"

    # -- the poster's side --------------------------------------------------------------

    def add(self, row: EventRow) -> bool:
        """Queue the event's row (hot write); False when the store refused it (logged)."""
        return self._enqueue(_INSERT_EVENT, row)

    def mark(self, event_id: str, state: OutboxState) -> None:
        """Record how an event was settled (hot write)."""
        self._enqueue(_MARK_EVENT, (state, event_id))

    def pending(self) -> list[OutboxRow]:
        """The undelivered events, oldest first, each task's in ``seq`` order (a read)."""
        rows = [
            OutboxRow(r[0], r[1], int(r[2]), bytes(r[3]), float(r[4]), _trace_of(r[5], r[6]))
            for r in self.store.query(
                "SELECT event_id, task_id, seq, body, enqueued_at, traceparent, tracestate "
                "FROM outbox_events WHERE state = 'pending' ORDER BY id"
            )
        ]
        # Rows are in acceptance order but for a rewrite after a failed write; a task's
        # events must still go in seq order, so each task's rows are sorted by seq in the
        # places its rows hold.
        places: dict[str, list[int]] = {}
        for i, row in enumerate(rows):
            places.setdefault(row.task_id, []).append(i)
        ordered = list(rows)
        for indexes in places.values():
            for i, row in zip(
                indexes, sorted((rows[i] for i in indexes), key=_by_seq), strict=True
            ):
                ordered[i] = row
        return ordered

    def counts(self) -> dict[str, int]:
        """Event rows in the file by state (a read)."""
        return {
            str(state): int(n)
            for state, n in self.store.query(
                "SELECT state, count(*) FROM outbox_events GROUP BY state"
            )
        }

    def missing(self, event_ids: Iterable[str]) -> set[str]:
        """Flush the hot queue, then return which of ``event_ids`` have no row (blocking).

        Raises what the flush or the read raises (counted in ``cold_write_failures``).
        """
        wanted = list(event_ids)
        try:
            self.store.flush()
            found: set[str] = set()
            for start in range(0, len(wanted), _IDS_PER_QUERY):
                chunk = wanted[start : start + _IDS_PER_QUERY]
                marks = ",".join("?" * len(chunk))
                found.update(
                    r[0]
                    for r in self.store.query(
                        f"SELECT event_id FROM outbox_events WHERE event_id IN ({marks})",  # noqa: S608 - placeholders
                        chunk,
                    )
                )
        except Exception:
            self.cold_write_failures += 1
            raise
        return set(wanted) - found

    def write_events(
        self, rows: Iterable[EventRow], marks: Mapping[str, OutboxState] | None = None
    ) -> None:
        """Write event rows (see :data:`EventRow`), then settlements, in one transaction.

        A cold write, for events whose rows the file may lack: any row one of them already
        has is replaced, so the rows end up in the order given (acceptance order) even
        when the store wrote some of them and not others; each is written ``pending``, and
        ``marks`` (event id → state) then set the state of those that were settled
        meanwhile (and of any other row they name). Raises what the write raises (counted
        in ``cold_write_failures``); then nothing of it was written.
        """
        rows = list(rows)
        try:
            with self.store.transaction() as conn:
                conn.executemany(
                    "DELETE FROM outbox_events WHERE event_id = ?", [(r[0],) for r in rows]
                )
                conn.executemany(_INSERT_EVENT, rows)
                conn.executemany(_MARK_EVENT, [(st, e) for e, st in (marks or {}).items()])
        except Exception:
            self.cold_write_failures += 1
            raise

    @property
    def write_failures(self) -> int:
        """Writes to the file that failed: hot ones (the store's) and cold ones."""
        return self.store.stats.failed + self.cold_write_failures

    @property
    def hot_write_failures(self) -> int:
        """Hot writes the store executed and that failed (not those it refused)."""
        return self.store.stats.failed

    @property
    def failing(self) -> bool:
        """True while the store's hot writes fail (its last batch wrote nothing)."""
        return self.store.stats.failing

    def trim(self) -> int:
        """Keep every pending row, each journalled task's newest row and the newest
        ``delivered_tail`` others; return how many went.

        A cold write through the store's ``prune``.
        """
        try:
            return self.store.prune(
                "outbox_events",
                keep_last=self.delivered_tail,
                spare={"state": "pending"},
                spare_where=_NEWEST_OF_EACH_TASK,
            )
        except Exception:
            self.cold_write_failures += 1
            raise

    # -- the manager's side -------------------------------------------------------------

    def save_task(self, info: TaskInfo, seq: int, owner: str = "") -> None:
        """Record a task's current state, last seq and owner (hot write)."""
        self._enqueue(
            _UPSERT_TASK,
            (
                info.task_id,
                info.state,
                seq,
                info.updated_at.isoformat(),
                info.model_dump_json(),
                owner,
            ),
        )

    def task_owners(self) -> dict[str, str]:
        """The owner of each journalled task that has one (not ``""``), by task id (a read)."""
        rows = self.store.query("SELECT task_id, owner FROM tasks WHERE owner != ''")
        return {str(task_id): str(owner) for task_id, owner in rows}

    def forget_task(self, task_id: str) -> None:
        """Forget a task the manager evicted from its retention ring (hot write)."""
        self._enqueue(_FORGET_TASK, (task_id,))

    def tasks(self) -> list[tuple[TaskInfo, int]]:
        """Every journalled task with its last seq, oldest update first (a read).

        The last seq is the higher of the task row's and its newest event row's (trimming
        spares that row). The journal writes a task row's seq no higher than the newest
        event a receiver may have seen or will get after a restart: one in the file, or
        one sent before its row was (:class:`TaskJournal
        <robot_mcp_kit._task_journal.TaskJournal>`). So a task row written where its event
        rows were not (a nearly full disk) neither makes the next seq skip one nor repeat
        one the receiver saw.
        """
        rows = self.store.query(
            "SELECT t.info, max(t.seq, coalesce((SELECT max(e.seq) FROM outbox_events e "
            "WHERE e.task_id = t.task_id), 0)) FROM tasks t ORDER BY t.updated_at, t.rowid"
        )
        out: list[tuple[TaskInfo, int]] = []
        for info_json, seq in rows:
            try:
                out.append((TaskInfo.model_validate_json(info_json), int(seq)))
            except ValueError:
                _log.error("outbox_row_skipped", outbox=str(self.path), table="tasks")
        return out

    def newest_events(self, task_ids: Iterable[str]) -> dict[str, TaskEvent]:
        """The newest event row of each of ``task_ids`` that has one (a read)."""
        found: dict[str, TaskEvent] = {}
        for task_id in task_ids:
            row = self.store.query_one(
                "SELECT body FROM outbox_events WHERE task_id = ? ORDER BY id DESC LIMIT 1",
                (task_id,),
            )
            if row is None:
                continue
            try:
                found[task_id] = TaskEvent.model_validate_json(bytes(row[0]))
            except ValueError:
                _log.error("outbox_row_skipped", outbox=str(self.path), table="outbox_events")
        return found

    def events(self, task_ids: Iterable[str], limit: int) -> list[TaskEvent]:
        """The newest ``limit`` journalled events of ``task_ids``, oldest first (a read)."""
        wanted = set(task_ids)
        if not wanted or limit <= 0:
            return []
        rows = self.store.query(
            "SELECT task_id, body FROM outbox_events ORDER BY id DESC LIMIT ?", (limit * 4,)
        )
        found: list[TaskEvent] = []
        for task_id, body in rows:
            if task_id not in wanted:
                continue
            try:
                found.append(TaskEvent.model_validate_json(bytes(body)))
            except ValueError:
                _log.error("outbox_row_skipped", outbox=str(self.path), table="outbox_events")
            if len(found) >= limit:
                break
        found.reverse()
        return found

    def newest_trace(self, task_id: str) -> tuple[str, str] | None:
        """The trace context of ``task_id``'s newest event row, or None (a read)."""
        row = self.store.query_one(
            "SELECT traceparent, tracestate FROM outbox_events WHERE task_id = ? "
            "ORDER BY id DESC LIMIT 1",
            (task_id,),
        )
        return None if row is None else _trace_of(row[0], row[1])

    def interrupt(
        self,
        event: TaskEvent,
        body: bytes,
        info: TaskInfo,
        enqueued_at: float,
        trace: tuple[str, str] | None = None,
        owner: str = "",
    ) -> None:
        """Write an ``INTERRUPTED`` event (pending) and its task's new state, together.

        ``trace`` is the ``(traceparent, tracestate)`` the event is sent with; ``owner`` the
        task's.

        A cold write: one transaction, committed before this returns; raises what the
        write raises (counted in ``cold_write_failures``).
        """
        try:
            with self.store.transaction() as conn:
                parent, state = trace if trace is not None else (None, None)
                conn.execute(
                    _INSERT_EVENT,
                    (event.event_id, event.task_id, event.seq, body, enqueued_at, parent, state),
                )
                conn.execute(
                    _UPSERT_TASK,
                    (
                        info.task_id,
                        info.state,
                        event.seq,
                        info.updated_at.isoformat(),
                        info.model_dump_json(),
                        owner,
                    ),
                )
        except Exception:
            self.cold_write_failures += 1
            raise

    def keep_tasks(self, task_ids: Iterable[str]) -> int:
        """Delete the task rows not in ``task_ids`` (a cold write); return how many went."""
        keep = set(task_ids)
        gone = [r[0] for r in self.store.query("SELECT task_id FROM tasks") if r[0] not in keep]
        if gone:
            with self.store.transaction() as conn:
                conn.executemany(_FORGET_TASK, [(t,) for t in gone])
        return len(gone)

    # -- closing ------------------------------------------------------------------------

    def close(self) -> None:
        """Write what is queued, close the file and release its lock. Idempotent."""
        try:
            self.store.close()
        finally:
            self._lock.release()

    def _check_rows(self, conn: sqlite3.Connection) -> None:
        """Refuse a file whose rows are not what they say (a read of every row, at open).

        Bounded: the poster keeps at most ``queue_max + delivered_tail`` event rows (plus
        one per journalled task) and the manager its running and retained tasks.
        """
        for rowid, event_id, task_id, seq, body in conn.execute(
            "SELECT id, event_id, task_id, seq, body FROM outbox_events ORDER BY id"
        ):
            try:
                event = TaskEvent.model_validate_json(bytes(body))
            except ValueError:
                raise self._damaged("outbox_events", rowid, "its body is not an event") from None
            if (event.event_id, event.task_id, event.seq) != (event_id, task_id, seq):
                raise self._damaged(
                    "outbox_events", rowid, f"its body is another event than {event_id!r}"
                )
        for rowid, task_id, info_json in conn.execute(
            "SELECT rowid, task_id, info FROM tasks ORDER BY rowid"
        ):
            try:
                info = TaskInfo.model_validate_json(info_json)
            except ValueError:
                raise self._damaged("tasks", rowid, "its info is not a task") from None
            if info.task_id != task_id:
                raise self._damaged("tasks", rowid, f"its info is another task than {task_id!r}")

    def _damaged(self, table: str, rowid: int, what: str) -> StoreUnreadable:
        remedy = _damaged_remedy(self.path)
        return StoreUnreadable(
            f"The outbox {self.path} is damaged: row {rowid} of {table}: {what}. {remedy}",
            path=str(self.path),
            remedy=remedy,
        )

    def _enqueue(self, sql: str, params: tuple[Any, ...]) -> bool:
        try:
            ok = self.store.enqueue(sql, params)
        except Exception:  # a closed store: the caller's path must not raise
            _log.exception("outbox_write_refused", outbox=str(self.path))
            ok = False
        if not ok:
            self.enqueue_refusals += 1
        return ok
