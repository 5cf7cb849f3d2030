"""The task journal (issue 14): tasks read back from the poster's durable outbox.

At construction the manager restores its tasks and their events from the journal, and
reports each task the last process died under as ``INTERRUPTED``.

See the "Task journal" paragraph of :mod:`robot_mcp_kit.tasks` for the contract.
"""

from __future__ import annotations

import builtins

from robot_mcp_kit._outbox import Outbox
from robot_mcp_kit._task_book import TaskBook, _Task
from robot_mcp_kit.log import get_logger
from robot_mcp_kit.models import TaskEvent, TaskFailure, TaskState, new_event_id

__all__ = ["INTERRUPTED", "TaskJournal"]

_log = get_logger("robot_mcp_kit.tasks")

INTERRUPTED = "INTERRUPTED"
"""``error_code`` of a task the process died under, reported by the next start."""
_INTERRUPTED_MESSAGE = (
    "The server stopped (crash, kill or restart) while this task was running, so its work "
    "did not finish; it may be started again."
)


class TaskJournal(TaskBook):
    """The journal's part of a :class:`~robot_mcp_kit.tasks.TaskManager`."""

    def _recover(self, journal: Outbox) -> None:
        """Read the journal back at construction (see :mod:`robot_mcp_kit.tasks`)."""
        try:
            rows = journal.tasks()
        except Exception:
            _log.exception(
                "task_journal_unreadable", journal=str(journal.path), then="starting without it"
            )
            return
        running = [(i, seq) for i, seq in rows if i.state == TaskState.RUNNING]
        finished = [(i, seq) for i, seq in rows if i.state != TaskState.RUNNING]
        finished = finished[len(finished) - self.max_finished_retained :]
        restored: builtins.list[_Task] = []
        for info, seq in finished + running:
            task = _Task(
                task_id=info.task_id,
                tool=info.tool,
                created_at=info.created_at,
                updated_at=info.updated_at,
                triggers=[dict(t) for t in info.triggers],
                est_duration_s=info.est_duration_s,
                state=info.state,
                progress=info.progress,
                result=info.result,
                failure=info.failure,
                seq=seq,
            )
            self._tasks[task.task_id] = task
            restored.append(task)
        keep = self.max_events_retained
        for event in journal.events(self._tasks, keep):
            task = self._tasks[event.task_id]
            if event.seq <= task.seq and (not task.events or task.events[-1][1].seq < event.seq):
                self._retain(task, event)
        for task in restored:
            if task.state != TaskState.RUNNING:
                self._finished.append(task.task_id)
        try:
            journal.keep_tasks(self._tasks)
        except Exception:
            _log.exception("task_journal_trim_failed", journal=str(journal.path))
        for task in restored:
            if task.state == TaskState.RUNNING:
                self._interrupt(journal, task)
        if restored:
            _log.warning(
                "task_journal_restored",
                journal=str(journal.path),
                tasks=len(restored),
                interrupted=len(running),
            )

    def _interrupt(self, journal: Outbox, task: _Task) -> None:
        """Report a task the last process died under: failed, ``INTERRUPTED``, next seq."""
        failure = TaskFailure(
            error_code=INTERRUPTED,
            message=_INTERRUPTED_MESSAGE,
            recoverable=True,
            suggestions=["retry"],
        )
        now = self._clock()
        task.state = TaskState.FAILED
        task.failure = failure
        task.updated_at = now
        task.seq += 1
        self._counts[TaskState.FAILED] += 1
        event = TaskEvent(
            event_id=new_event_id(),
            task_id=task.task_id,
            server=self.server_name,
            tool=task.tool,
            type="task_failed",
            seq=task.seq,
            ts=now,
            payload=failure.model_dump(mode="json"),
        )
        try:
            journal.interrupt(
                event, event.model_dump_json().encode(), self._info(task), now.timestamp()
            )
        except Exception:
            _log.exception("task_journal_write_failed", task_id=task.task_id, type="task_failed")
        self._retain(task, event)
        self._remember_finished(task)
        _log.warning(
            "task_interrupted",
            task_id=task.task_id,
            tool=task.tool,
            error_code=INTERRUPTED,
            seq=task.seq,
        )
