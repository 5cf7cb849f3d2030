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
from robot_mcp_kit.models import TaskEvent, TaskInfo, TaskState

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


class TaskJournal:
    """The task journal in one outbox file.

    Args:
        outbox: the file, owned (opened and closed) by the backlog that makes this view.
        on_pending: called with each event row :meth:`interrupt` committed, so the owner
            can queue it when it has already read its pending rows.

    Writes are hot (the store's writer thread) except :meth:`interrupt`, which commits.
    """

    def __init__(self, outbox: Outbox, on_pending: Callable[[OutboxRow], None]) -> None:
        self._outbox = outbox
        self._on_pending = on_pending

    def __repr__(self) -> str:
        return f"<TaskJournal {str(self.path)!r}>"

    @property
    def path(self) -> Path:
        """The outbox file."""
        return self._outbox.path

    def save(self, info: TaskInfo, seq: int) -> None:
        """Record a task's current state and last seq (hot write)."""
        self._outbox.save_task(info, seq)

    def forget(self, task_id: str) -> None:
        """Forget a task the manager no longer remembers (hot write)."""
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
            outbox.keep_tasks(kept)
        except Exception:
            _log.exception("task_journal_trim_failed", journal=str(outbox.path))
        return Recovered(finished=finished, running=running, events=events)

    def interrupt(self, event: TaskEvent, info: TaskInfo, enqueued_at: float) -> None:
        """Commit an ``INTERRUPTED`` task's event (pending, to be sent) and its new state.

        One transaction; then the event row is handed to the owner (``on_pending``).
        A failed write or hand-over is logged (``task_journal_write_failed``); never raises.
        """
        body = event.model_dump_json().encode()
        try:
            self._outbox.interrupt(event, body, info, enqueued_at)
        except Exception:
            _log.exception("task_journal_write_failed", task_id=event.task_id, type=event.type)
            return
        try:
            self._on_pending(OutboxRow(event.event_id, event.task_id, event.seq, body, enqueued_at))
        except Exception:
            # Committed: the next start sends it even if the owner could not queue it now.
            _log.exception(
                "task_journal_write_failed",
                task_id=event.task_id,
                type=event.type,
                then="the event is in the outbox and goes out on the next start",
            )


@runtime_checkable
class JournalOwner(Protocol):
    """A sink that may own a task journal (an :class:`~robot_mcp_kit.events.EventPoster`
    with a durable outbox does); a manager built on it takes that journal by default."""

    @property
    def journal(self) -> TaskJournal | None:
        """The journal in the sink's outbox file, or None without one."""
        ...
