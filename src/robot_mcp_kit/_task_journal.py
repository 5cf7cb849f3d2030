"""The task journal: the ``tasks`` table of the durable outbox file, as the manager sees it.

A :class:`TaskJournal` is a view handed out by the poster's
:class:`~robot_mcp_kit._backlog.DurableBacklog`, the one owner of the outbox file. The
manager saves and forgets tasks through it and, at construction, reads it back with
:meth:`TaskJournal.recover`, which returns plain data; the manager applies it itself.

See the "Task journal" paragraph of :mod:`robot_mcp_kit.tasks` for the contract.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from robot_mcp_kit._outbox import Outbox, OutboxRow
from robot_mcp_kit.log import get_logger
from robot_mcp_kit.models import TaskEvent, TaskFailure, TaskInfo, TaskState

__all__ = ["INTERRUPTED", "JournalOwner", "Recovered", "TaskJournal"]

_log = get_logger("robot_mcp_kit.tasks")

INTERRUPTED = "INTERRUPTED"
"""``error_code`` of a task the process died under, reported by the next start."""


@dataclass(frozen=True, slots=True)
class Recovered:
    """What a journal held at start, as plain data (see :meth:`TaskJournal.recover`)."""

    finished: list[tuple[TaskInfo, int]] = field(default_factory=list)
    """Finished tasks with their last seq, oldest first, at most ``max_finished`` of them."""
    running: list[tuple[TaskInfo, int]] = field(default_factory=list)
    """Tasks journalled as running (the process died under them), with their last seq."""
    events: list[TaskEvent] = field(default_factory=list)
    """The newest journalled events of those tasks, oldest first."""
    owners: dict[str, str] = field(default_factory=dict)
    """The owner (a principal's key) of each of those tasks that has one, by task id."""


class TaskJournal:
    """The task journal in one outbox file.

    Args:
        outbox: the file, owned (opened and closed) by the backlog that makes this view.
        on_pending: called with each event row :meth:`interrupt` committed, so the owner
            can queue it when it has already read its pending rows.

    Writes are hot (the store's writer thread) except :meth:`interrupt`, which commits.
    A task row's seq is written no higher than the task's newest event a receiver may have
    seen or gets after a restart: one known to be in the file, or one sent before its row
    was (the owner reports both through :meth:`reached`). The next start continues a
    task's seqs from there, whichever writes failed.
    """

    def __init__(self, outbox: Outbox, on_pending: Callable[[OutboxRow], None]) -> None:
        self._outbox = outbox
        self._on_pending = on_pending
        # Per journalled task, the highest seq known written or sent (see reached()).
        self._reached: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"<TaskJournal {str(self.path)!r}>"

    @property
    def path(self) -> Path:
        """The outbox file."""
        return self._outbox.path

    def save(self, info: TaskInfo, seq: int, owner: str = "") -> None:
        """Record a task's current state, last seq and owner (the principal's key that
        started it); a hot write, see the class docstring."""
        reached = self._reached.setdefault(info.task_id, 0)
        self._outbox.save_task(info, min(seq, reached), owner)

    def reached(self, task_id: str, seq: int) -> None:
        """Event ``seq`` of ``task_id`` is in the file, or was sent before its row was."""
        if task_id in self._reached and seq > self._reached[task_id]:
            self._reached[task_id] = seq

    def forget(self, task_id: str) -> None:
        """Forget a task the manager no longer remembers (hot write)."""
        self._reached.pop(task_id, None)
        self._outbox.forget_task(task_id)

    def recover(self, max_finished: int, max_events: int) -> Recovered:
        """Read the journal back: finished tasks, running ones, their newest events.

        Keeps the newest ``max_finished`` finished tasks and deletes the other task rows;
        reads at most ``max_events`` events. An unreadable journal is logged and read as
        empty. Never raises.
        """
        outbox = self._outbox
        try:
            rows = outbox.tasks()
        except Exception:
            _log.exception(
                "task_journal_unreadable", journal=str(outbox.path), then="starting without it"
            )
            return Recovered()
        rows = self._finish_from_terminal_events(rows)
        running = [(i, seq) for i, seq in rows if i.state == TaskState.RUNNING]
        finished = [(i, seq) for i, seq in rows if i.state != TaskState.RUNNING]
        finished = finished[len(finished) - max_finished :] if max_finished else []
        kept = {info.task_id for info, _ in finished + running}
        try:
            events = outbox.events(kept, max_events)
        except Exception:
            _log.exception("task_journal_unreadable", journal=str(outbox.path), then="no events")
            events = []
        try:
            owners = {t: o for t, o in outbox.task_owners().items() if t in kept}
        except Exception:
            # Unknown owners read as anonymous: with authentication only the task admins
            # see those tasks, never another principal.
            _log.exception("task_journal_unreadable", journal=str(outbox.path), then="no owners")
            owners = {}
        try:
            outbox.keep_tasks(kept)
        except Exception:
            _log.exception("task_journal_trim_failed", journal=str(outbox.path))
        return Recovered(finished=finished, running=running, events=events, owners=owners)

    def _finish_from_terminal_events(
        self, rows: list[tuple[TaskInfo, int]]
    ) -> list[tuple[TaskInfo, int]]:
        """A task journalled running whose newest event row is terminal did finish.

        Its last task row write failed (a full disk) after the terminal event was written,
        and so perhaps sent: it is restored from that event, not reported ``INTERRUPTED``
        (which would tell the receiver it failed after it succeeded).
        """
        running = [info.task_id for info, _ in rows if info.state == TaskState.RUNNING]
        if not running:
            return rows
        try:
            newest = self._outbox.newest_events(running)
        except Exception:
            _log.exception("task_journal_unreadable", journal=str(self.path), then="as journalled")
            return rows
        out: list[tuple[TaskInfo, int]] = []
        for info, seq in rows:
            event = newest.get(info.task_id) if info.state == TaskState.RUNNING else None
            finished = _finished_by(info, event) if event is not None else None
            if finished is None or event is None:
                out.append((info, seq))
                continue
            _log.warning(
                "task_journal_repaired",
                task_id=info.task_id,
                state=finished.state,
                seq=event.seq,
                reason="journalled running, but its terminal event is in the outbox",
            )
            out.append((finished, event.seq))
        return out

    def interrupt(
        self, event: TaskEvent, info: TaskInfo, enqueued_at: float, owner: str = ""
    ) -> None:
        """Commit an ``INTERRUPTED`` task's event (pending, to be sent) and its new state.

        One transaction; then the event row is handed to the owner (``on_pending``). The
        event keeps the trace of the task's newest event row, if it had one: the report
        belongs to the mission step that started the task.
        A failed write or hand-over is logged (``task_journal_write_failed``); never raises.
        """
        body = event.model_dump_json().encode()
        trace = None
        try:
            trace = self._outbox.newest_trace(event.task_id)
            self._outbox.interrupt(event, body, info, enqueued_at, trace, owner)
        except Exception:
            _log.exception("task_journal_write_failed", task_id=event.task_id, type=event.type)
            return
        try:
            self._on_pending(
                OutboxRow(event.event_id, event.task_id, event.seq, body, enqueued_at, trace)
            )
        except Exception:
            # Committed: the next start sends it even if the owner could not queue it now.
            _log.exception(
                "task_journal_write_failed",
                task_id=event.task_id,
                type=event.type,
                then="the event is in the outbox and goes out on the next start",
            )


def _finished_by(info: TaskInfo, event: TaskEvent) -> TaskInfo | None:
    """``info`` as ``event`` (task_done / task_failed) left it; None for other events."""
    try:
        if event.type == "task_done":
            result = event.payload.get("result")
            return info.model_copy(
                update={
                    "state": TaskState.SUCCEEDED,
                    "result": result if isinstance(result, dict) else None,
                    "updated_at": event.ts,
                }
            )
        if event.type == "task_failed":
            return info.model_copy(
                update={
                    "state": TaskState.FAILED,
                    "failure": TaskFailure.model_validate(event.payload),
                    "updated_at": event.ts,
                }
            )
    except ValueError:
        return None
    return None


@runtime_checkable
class JournalOwner(Protocol):
    """A sink that may own a task journal (an :class:`~robot_mcp_kit.events.EventPoster`
    with a durable outbox does); a manager built on it takes that journal by default."""

    @property
    def journal(self) -> TaskJournal | None:
        """The journal in the sink's outbox file, or None without one."""
        ...
