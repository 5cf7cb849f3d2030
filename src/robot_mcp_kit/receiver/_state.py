"""What the receiver knows of each task, in memory over its file: ingest, order, cursors.

:class:`ReceiverState` turns each verified event into an :class:`Ingested` verdict (new or
a duplicate, a gap noticed, late, already passed) and keeps, per task, the events waiting
for their turn. A task's *head* is what its handler gets next: the event at
``delivered_seq + 1``; a :class:`Skip` over seqs that will never come; or, when nothing is
waiting, a :class:`Final` (the server's word on the task). A task whose next seq is
missing while later ones wait is *blocked*: :meth:`TaskRecord.missing` names the hole, for
repair to fill.

The file is the truth: an event is in it before :meth:`ReceiverState.ingest` returns, a
cursor before :meth:`ReceiverState.commit` returns. Memory holds the tasks still running
or with work waiting (rebuilt from the file by :meth:`ReceiverState.load`); a finished,
idle task is dropped from memory and read back if an event of it comes again.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from robot_mcp_kit.log import get_logger
from robot_mcp_kit.models import TERMINAL_EVENT_TYPES, TaskEvent, TaskInfo, TaskState
from robot_mcp_kit.receiver._store import EventRow, ReceiverStore, TaskRow
from robot_mcp_kit.receiver._updates import UpdateKind, UpdateSource
from robot_mcp_kit.receiver._verdict import KNOWN_EVENT_TYPES, read_event

__all__ = [
    "LOST",
    "Final",
    "Ingested",
    "Item",
    "Pending",
    "ReceiverState",
    "Skip",
    "TaskKey",
    "TaskRecord",
]

LOST = "lost"
"""The state of a task its server no longer knows (beside the four :class:`TaskState` s)."""

TaskKey = tuple[str, str]
"""``(server, task_id)``: a task id is unique only within its server."""

_log = get_logger("robot_mcp_kit.receiver")

_MAX_GAP_RANGES = 100
_STATE_OF_TERMINAL = {"task_done": TaskState.SUCCEEDED.value, "task_failed": TaskState.FAILED.value}


@dataclass(slots=True)
class Pending:
    """A stored event waiting for its turn; ``event`` None: a type passed over unseen.

    ``ready`` is False until the write that stored it is committed: a task's lane never
    hands over an event that is not yet in the file.
    """

    seq: int
    event: TaskEvent | None
    source: UpdateSource
    traceparent: str | None = None
    maybe_seen: bool = False
    ready: bool = True


@dataclass(frozen=True, slots=True)
class Skip:
    """Seqs ``first``..``last`` that will never come: handed over as one GAP update."""

    first: int
    last: int
    source: UpdateSource = "repair"


@dataclass(frozen=True, slots=True)
class Final:
    """The server's word on a task, handed over after every event waiting: STATE or LOST."""

    kind: UpdateKind
    info: TaskInfo | None = None
    source: UpdateSource = "reconcile"


Item = Pending | Skip | Final


@dataclass(frozen=True, slots=True)
class Ingested:
    """What the receiver made of one verified event it stored, or found stored before.

    Attributes:
        new: False when this server's ``event_id`` was stored before (a duplicate, which
            is acknowledged and changes nothing).
        original: for a duplicate, the event first stored under the id (None when it is
            no longer kept).
        gap: the seqs found missing now, first and last (a later event arrived first).
        late: the seq is below the highest seen for the task (it arrived out of order).
        stale: the seq was already delivered or passed over: it will not be handed over.
        taken: another event with this seq is waiting: this one will not be handed over.
        after_terminal: the task's ``task_done`` / ``task_failed`` was stored before.
    """

    new: bool
    original: TaskEvent | None = None
    gap: tuple[int, int] | None = None
    late: bool = False
    stale: bool = False
    taken: bool = False
    after_terminal: bool = False


@dataclass(slots=True)
class TaskRecord:
    """One task as the receiver knows it. Mutated only by :class:`ReceiverState`."""

    server: str
    task_id: str
    tool: str = ""
    state: str = TaskState.RUNNING.value
    delivered_seq: int = 0
    highest_seq: int = 0
    terminal_seq: int | None = None
    gaps: list[tuple[int, int]] = field(default_factory=list)
    pending: dict[int, Pending | Skip] = field(default_factory=dict)
    finals: list[Final] = field(default_factory=list)
    blocked_since: float | None = None
    """Loop time at which the task was first seen blocked (None: it is not)."""
    busy: bool = False
    """True while its lane is handing updates over."""
    resumed: bool = False
    """True from the start that loaded the task until its first update is handed over: a
    process that died while its handler ran may have handed that update over already."""
    last_event_at: float = 0.0
    """Unix time of the last event stored for it (reconciliation asks about quiet tasks)."""

    @property
    def key(self) -> TaskKey:
        """``(server, task_id)``."""
        return (self.server, self.task_id)

    @property
    def running(self) -> bool:
        """True while the receiver holds the task as running."""
        return self.state == TaskState.RUNNING.value

    def head(self) -> Item | None:
        """What the handler gets next, or None (nothing waiting, its next event not yet
        committed, or blocked by a gap)."""
        found = self.pending.get(self.delivered_seq + 1)
        if found is not None:
            return found if not isinstance(found, Pending) or found.ready else None
        if self.pending:
            return None
        return self.finals[0] if self.finals else None

    def missing(self) -> tuple[int, int] | None:
        """The hole that blocks the task, first and last seq; None when it is not blocked."""
        if not self.pending or (self.delivered_seq + 1) in self.pending:
            return None
        return (self.delivered_seq + 1, min(self.pending) - 1)

    def idle(self) -> bool:
        """True when nothing waits and no lane runs."""
        return not self.pending and not self.finals and not self.busy

    def row(self) -> TaskRow:
        """The task as its ``receiver_tasks`` row."""
        return TaskRow(
            server=self.server,
            task_id=self.task_id,
            tool=self.tool,
            state=self.state,
            delivered_seq=self.delivered_seq,
            highest_seq=self.highest_seq,
            terminal_seq=self.terminal_seq,
            gaps=format_gaps(self.gaps),
        )

    def noticed_gaps(self) -> list[int]:
        """Every seq found missing when a later one arrived, whether or not it came after."""
        return [seq for first, last in self.gaps for seq in range(first, last + 1)]


def format_gaps(gaps: list[tuple[int, int]]) -> str:
    """``[(2, 4), (7, 7)]`` → ``"2-4,7"``."""
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in gaps)


def parse_gaps(text: str) -> list[tuple[int, int]]:
    """``"2-4,7"`` → ``[(2, 4), (7, 7)]``; a part that is not a range is skipped."""
    out: list[tuple[int, int]] = []
    for part in filter(None, text.split(",")):
        first, _, last = part.partition("-")
        try:
            a, b = int(first), int(last or first)
        except ValueError:
            continue
        out.append((a, b))
    return out


def _from_row(row: TaskRow) -> TaskRecord:
    return TaskRecord(
        server=row.server,
        task_id=row.task_id,
        tool=row.tool,
        state=row.state,
        delivered_seq=row.delivered_seq,
        highest_seq=row.highest_seq,
        terminal_seq=row.terminal_seq,
        gaps=parse_gaps(row.gaps),
    )


def _pending_of(row: EventRow) -> Pending | None:
    try:
        found = read_event(json.loads(row.body))
    except ValueError:
        return None
    if found is None:
        return None
    event = found if found.type in KNOWN_EVENT_TYPES else None
    source: UpdateSource = (
        "repair"
        if row.source == "repair"
        else ("reconcile" if row.source == "reconcile" else "post")
    )
    return Pending(row.seq, event, source, row.traceparent)


class ReceiverState:
    """The tasks, their waiting events and cursors, over a :class:`ReceiverStore`.

    Not thread-safe: the receiver calls it from its event loop only. Writes join the
    store's batch: an event stored by :meth:`ingest` is handed over only once its batch is
    committed, and a batch rolled back puts memory back as it was (its POSTs answer 503,
    so their posters send them again). A write that raises leaves memory as it was.
    """

    def __init__(
        self, store: ReceiverStore, on_ready: Callable[[TaskRecord], None] | None = None
    ) -> None:
        self.store = store
        self.on_ready = on_ready
        """Called with a task once an event stored for it is committed (wakes its lane)."""
        self._tasks: dict[TaskKey, TaskRecord] = {}
        self.cursor_delay_s = 0.1
        """How long a moved cursor may wait for a commit to join before it gets its own."""
        self._moves: dict[TaskKey, TaskRecord] = {}
        """Tasks whose cursor moved and is not yet written (:meth:`write_moves`)."""
        self._moved_at = 0.0
        self._moves_timer: asyncio.TimerHandle | None = None

    def __repr__(self) -> str:
        waiting = sum(len(t.pending) for t in self._tasks.values())
        return f"<ReceiverState tasks={len(self._tasks)} waiting={waiting}>"

    @property
    def tasks(self) -> dict[TaskKey, TaskRecord]:
        """The tasks in memory (running, or with work waiting), by key. Read-only use."""
        return self._tasks

    def waiting(self) -> int:
        """Events stored and not yet handed over (or passed over), over all tasks."""
        return sum(len(t.pending) for t in self._tasks.values())

    # -- start ------------------------------------------------------------------------------

    def load(self) -> list[TaskRecord]:
        """Read the open tasks and their waiting events from the file; return them.

        The event each task would hand over first is marked ``maybe_seen``: the process
        may have stopped while its handler ran.
        """
        loaded: list[TaskRecord] = []
        for row in self.store.open_tasks():
            record = _from_row(row)
            for event_row in self.store.pending(row.server, row.task_id, row.delivered_seq):
                pending = _pending_of(event_row)
                if pending is not None and pending.seq not in record.pending:
                    record.pending[pending.seq] = pending
            head = record.pending.get(record.delivered_seq + 1)
            if isinstance(head, Pending):
                head.maybe_seen = True
            record.resumed = True
            self._tasks[record.key] = record
            loaded.append(record)
        return loaded

    def find(self, key: TaskKey) -> TaskRecord | None:
        """The task, from memory or the file; None if the receiver never heard of it."""
        found = self._tasks.get(key)
        if found is not None:
            return found
        row = self.store.task(*key)
        return None if row is None else _from_row(row)

    # -- ingest -----------------------------------------------------------------------------

    def ingest(
        self,
        server: str,
        found: TaskEvent,
        body: bytes,
        *,
        source: UpdateSource,
        now: float,
        traceparent: str | None = None,
    ) -> tuple[Ingested, TaskRecord | None]:
        """Store a verified event (or find it stored); return the verdict and its task.

        The task is None for a duplicate of an event whose task the receiver no longer
        keeps. Raises what the write raises; then nothing changed.
        """
        key = (server, found.task_id)
        record = self.find(key)
        fresh = record is None
        if record is None:
            record = TaskRecord(server=server, task_id=found.task_id, tool=found.tool)
        seq = found.seq
        gap = (record.highest_seq + 1, seq - 1) if seq > record.highest_seq + 1 else None
        gaps = record.gaps
        if gap is not None and len(gaps) < _MAX_GAP_RANGES:
            gaps = [*gaps, gap]
        terminal = found.type in TERMINAL_EVENT_TYPES
        terminal_seq = record.terminal_seq
        if terminal_seq is None and terminal:
            terminal_seq = seq
        row = TaskRow(
            server=server,
            task_id=found.task_id,
            tool=record.tool or found.tool,
            state=record.state,
            delivered_seq=record.delivered_seq,
            highest_seq=max(record.highest_seq, seq),
            terminal_seq=terminal_seq,
            gaps=format_gaps(gaps),
        )
        event_row = EventRow(
            server=server,
            event_id=found.event_id,
            task_id=found.task_id,
            seq=seq,
            type=found.type,
            body=body,
            source=source,
            received_at=now,
            traceparent=traceparent,
        )
        # The row changes only for a new task, a gap, a terminal event or a tool named
        # anew; the highest seq seen is otherwise read back from the events.
        changed = (
            fresh
            or gap is not None
            or terminal_seq != record.terminal_seq
            or row.tool != record.tool
        )
        if not self.store.add_event(event_row, row if changed else None, now):
            return Ingested(new=False, original=self.original(server, found.event_id)), (
                None if fresh else record
            )
        verdict = Ingested(
            new=True,
            gap=gap,
            late=seq <= record.highest_seq,
            stale=seq <= record.delivered_seq,
            taken=seq > record.delivered_seq and seq in record.pending,
            after_terminal=record.terminal_seq is not None,
        )
        before = (record.tool, record.highest_seq, record.terminal_seq, record.gaps)
        before_event_at = record.last_event_at
        record.tool = row.tool
        record.highest_seq = row.highest_seq
        record.terminal_seq = terminal_seq
        record.gaps = gaps
        record.last_event_at = now
        item: Pending | None = None
        if not verdict.stale and not verdict.taken:
            event = found if found.type in KNOWN_EVENT_TYPES else None
            item = Pending(seq, event, source, traceparent, ready=False)
            record.pending[seq] = item
        self._tasks[key] = record
        stored = record

        def committed() -> None:
            if item is not None:
                item.ready = True
            if self.on_ready is not None:
                self.on_ready(stored)

        def rolled_back() -> None:
            stored.tool, stored.highest_seq, stored.terminal_seq, stored.gaps = before
            stored.last_event_at = before_event_at
            if item is not None and stored.pending.get(seq) is item:
                del stored.pending[seq]
            if fresh and self._tasks.get(key) is stored and stored.idle():
                del self._tasks[key]

        self.store.batch.hooks(after=committed, undo=rolled_back)
        return verdict, record

    def original(self, server: str, event_id: str) -> TaskEvent | None:
        """The event stored under ``event_id`` from ``server``, if it is still kept."""
        body = self.store.body(server, event_id)
        if body is None:
            return None
        try:
            return read_event(json.loads(body))
        except ValueError:
            return None

    def learn(self, server: str, info: TaskInfo, now: float) -> TaskRecord:
        """Keep a task the receiver knows only from its server (reconciliation)."""
        record = TaskRecord(server=server, task_id=info.task_id, tool=info.tool)
        self.store.save_task(record.row(), now)
        self._tasks[record.key] = record

        def rolled_back() -> None:
            if self._tasks.get(record.key) is record and record.idle():
                del self._tasks[record.key]

        self.store.batch.hooks(undo=rolled_back)
        return record

    # -- delivery ---------------------------------------------------------------------------

    def commit(self, record: TaskRecord, item: Item, now: float) -> None:
        """Record ``item`` as handed over (or passed over): move the cursor, set the state.

        Memory moves at once (the handler has run; it must not get the item again from
        this process). The file follows with the next commit of the store's batch (the
        next post's, usually), or after ``cursor_delay_s`` when none comes: await
        :meth:`durable` before handing over the task's next update.
        """
        state = record.state
        delivered = record.delivered_seq
        if isinstance(item, Pending):
            delivered = item.seq
            if item.event is not None and item.event.type in _STATE_OF_TERMINAL:
                state = _STATE_OF_TERMINAL[item.event.type]
        elif isinstance(item, Skip):
            delivered = item.last
        else:
            state = LOST if item.kind is UpdateKind.LOST else _state_of(item.info, state)
        if isinstance(item, Final):
            if record.finals and record.finals[0] is item:
                record.finals.pop(0)
        else:
            record.pending.pop(item.seq if isinstance(item, Pending) else item.first, None)
        record.delivered_seq = delivered
        record.state = state
        for seq in [s for s in record.pending if s <= delivered]:
            del record.pending[seq]
        if record.missing() is None:
            record.blocked_since = None
        self._moves[record.key] = record
        self._moved_at = now
        self._schedule_moves()

    def _schedule_moves(self) -> None:
        if self._moves_timer is not None or not self._moves:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.write_moves()
            return
        self._moves_timer = loop.call_later(self.cursor_delay_s, self._timed_moves)

    def _timed_moves(self) -> None:
        self._moves_timer = None
        try:
            self.write_moves()
        except Exception as exc:  # kept to write again; the next commit retries
            _log.error(
                "receiver_cursor_unwritten", tasks=len(self._moves), error=type(exc).__name__
            )
            self._schedule_moves()

    def write_moves(self) -> None:
        """Write every cursor moved and not yet written, into the store's open batch.

        Raises what the write raises (they stay to write again); a batch rolled back puts
        them back too.
        """
        if not self._moves:
            return
        moves = dict(self._moves)
        rows = [(r.server, r.task_id, r.delivered_seq, r.state) for r in moves.values()]
        self.store.advance(rows, self._moved_at)
        self._moves.clear()

        def rolled_back() -> None:
            for key, record in moves.items():
                self._moves.setdefault(key, record)
            self._schedule_moves()

        self.store.batch.hooks(undo=rolled_back)

    async def durable(self, record: TaskRecord) -> None:
        """Return once ``record``'s cursor is in the file.

        Raises what writing it raises (it stays to write again).
        """
        if record.key in self._moves:
            self.write_moves()
        await self.store.batch.done()

    def save(self, now: float) -> int:
        """Write the cursors not yet written now; return how many are left (0).

        Raises what the write raises (they stay unwritten).
        """
        self._moved_at = max(self._moved_at, now)
        self.write_moves()
        return len(self._moves)

    def close(self) -> None:
        """Stop the timed cursor writes (before the store closes)."""
        if self._moves_timer is not None:
            self._moves_timer.cancel()
            self._moves_timer = None

    def skip(self, record: TaskRecord, first: int, last: int, source: UpdateSource) -> None:
        """Give up on seqs ``first``..``last`` (they will never come): a GAP goes next."""
        if first == record.delivered_seq + 1 and last >= first and first not in record.pending:
            record.pending[first] = Skip(first, last, source)

    def finish(self, record: TaskRecord, final: Final) -> None:
        """Queue the server's word on the task, handed over after everything waiting.

        Only for a task held as running, once per kind: a repair and a poll that both find
        the task gone queue one LOST, and none once it is handed over.
        """
        if record.running and not any(f.kind is final.kind for f in record.finals):
            record.finals.append(final)

    def forget_if_idle(self, record: TaskRecord) -> None:
        """Drop a finished task with nothing waiting from memory (the file keeps it)."""
        if not record.running and record.idle() and record.key not in self._moves:
            self._tasks.pop(record.key, None)

    def running(self, server: str) -> list[TaskRecord]:
        """The tasks of ``server`` the receiver holds as running."""
        return [t for t in self._tasks.values() if t.server == server and t.running]

    def forget_all(self) -> None:
        """Forget every task and event, in memory and in the file."""
        self.store.forget_all()
        self._tasks.clear()

    # -- inspection -------------------------------------------------------------------------

    def inspect(self, server: str, task_id: str) -> dict[str, Any]:
        """The contract's inspection view (§5.5): events stored, in order; gaps noticed."""
        record = self.find((server, task_id))
        events = [
            {"event_id": event_id, "seq": seq, "type": type_}
            for event_id, seq, type_ in self.store.processed(server, task_id)
        ]
        return {
            "server": server,
            "task_id": task_id,
            "events": events,
            "gaps": [] if record is None else record.noticed_gaps(),
            "delivered_seq": 0 if record is None else record.delivered_seq,
            "state": None if record is None else record.state,
        }


def _state_of(info: TaskInfo | None, current: str) -> str:
    return current if info is None else info.state.value
