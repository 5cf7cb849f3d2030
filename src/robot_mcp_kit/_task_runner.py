"""Running a task body to its terminal state, and cancelling running tasks.

The table of outcomes (what the body does, the state, the event) is in
:mod:`robot_mcp_kit.tasks`.
"""

from __future__ import annotations

import asyncio
import builtins

from robot_mcp_kit._task_book import _Task
from robot_mcp_kit._task_context import TaskBody, TaskContext, TaskError
from robot_mcp_kit._task_journal import TaskJournal
from robot_mcp_kit.log import get_logger
from robot_mcp_kit.models import TaskFailure, TaskState

__all__ = ["TaskRunner"]

_log = get_logger("robot_mcp_kit.tasks")


class TaskRunner(TaskJournal):
    """The running of bodies for a :class:`~robot_mcp_kit.tasks.TaskManager`."""

    cancel_grace_s: float

    async def _run(self, task: _Task, body: TaskBody) -> None:
        try:
            await self._run_body(task, body)
        finally:
            # Only now: while the terminal event is being handed over, the handle is the
            # strong reference that keeps this asyncio task alive (the loop's is weak).
            task.handle = None

    async def _run_body(self, task: _Task, body: TaskBody) -> None:
        ctx = TaskContext(self, task)
        try:
            outcome = await body(ctx)
        except asyncio.CancelledError:
            self._finish(task, TaskState.CANCELLED)
            return
        except TaskError as exc:
            if task.cancel_requested:
                self._finish_cancelled_anyway(task, f"raised TaskError {exc.error_code}")
                return
            if self._finish(task, TaskState.FAILED, failure=exc.to_failure()):
                await self._emit(
                    task, "task_failed", exc.to_failure().model_dump(mode="json"), terminal=True
                )
            return
        except Exception as exc:
            _log.exception(
                "task_body_raised", task_id=task.task_id, tool=task.tool, error=type(exc).__name__
            )
            if task.cancel_requested:
                self._finish_cancelled_anyway(task, f"raised {type(exc).__name__}")
                return
            await self._fail_internal(task, str(exc) or type(exc).__name__)
            return
        except BaseException:
            # KeyboardInterrupt / SystemExit: leave a consistent record, then propagate.
            self._finish(
                task,
                TaskState.FAILED,
                failure=TaskFailure(
                    error_code="INTERNAL",
                    message="The server stopped while the task was running.",
                    recoverable=False,
                ),
            )
            raise
        if task.cancel_requested:
            self._finish_cancelled_anyway(task, "returned normally")
            return
        if not isinstance(outcome, dict):
            _log.error(
                "task_body_returned_non_dict",
                task_id=task.task_id,
                tool=task.tool,
                returned=type(outcome).__name__,
            )
            await self._fail_internal(
                task,
                f"The task body for tool {task.tool!r} returned a {type(outcome).__name__}, "
                "but a task result must be a dict; this is a bug in the server.",
            )
            return
        result = dict(outcome)
        if self._finish(task, TaskState.SUCCEEDED, result=result):
            await self._emit(task, "task_done", {"result": result}, terminal=True)

    async def _fail_internal(self, task: _Task, message: str) -> None:
        failure = TaskFailure(error_code="INTERNAL", message=message, recoverable=False)
        if self._finish(task, TaskState.FAILED, failure=failure):
            await self._emit(task, "task_failed", failure.model_dump(mode="json"), terminal=True)

    def _finish_cancelled_anyway(self, task: _Task, what: str) -> None:
        if task.state == TaskState.RUNNING:
            _log.warning(
                "task_cancelled_anyway", task_id=task.task_id, body=what, state="cancelled"
            )
        self._finish(task, TaskState.CANCELLED)

    async def _cancel_and_wait(self, tasks: builtins.list[_Task]) -> None:
        handles: set[asyncio.Task[None]] = set()
        for task in tasks:
            task.cancel_requested = True
            if task.handle is not None and not task.handle.done():
                task.handle.cancel()
                handles.add(task.handle)
        if handles:
            _, pending = await asyncio.wait(handles, timeout=self.cancel_grace_s)
            for handle in pending:
                _log.warning(
                    "task_did_not_unwind", task=handle.get_name(), grace_s=self.cancel_grace_s
                )
        for task in tasks:
            # Covers bodies that outlived the grace period and tasks whose asyncio task
            # had not started yet (cancelled before their first step).
            self._finish(task, TaskState.CANCELLED)
