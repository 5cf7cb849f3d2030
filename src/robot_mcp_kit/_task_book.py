"""The manager's book of tasks: their records, events, terminal transitions and retention.

Each task's record, its events handed to the :class:`EventSink` in ``seq`` order, the move
to a terminal state, and the bounded memory of finished tasks and retained events.

:class:`TaskBook` is the base of :class:`~robot_mcp_kit.tasks.TaskManager`; the manager's
``__init__`` sets the attributes declared here.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from robot_mcp_kit._outbox import Outbox
from robot_mcp_kit.log import get_logger
from robot_mcp_kit.models import (
    EventType,
    TaskEvent,
    TaskFailure,
    TaskInfo,
    TaskState,
    new_event_id,
)

__all__ = ["EventSink", "TaskBook"]

_log = get_logger("robot_mcp_kit.tasks")


@runtime_checkable
class EventSink(Protocol):
    """Where a :class:`TaskManager` hands its events.

    :class:`~robot_mcp_kit.events.EventPoster` is the production sink;
    :class:`~robot_mcp_kit.testing.RecordingPoster` records them for tests. ``post`` must
    enqueue quickly and must not raise: it is awaited under the manager's lock (that is how
    per-task ``seq`` order is kept), so a slow sink slows every task of the server.
    """

    async def post(self, event: TaskEvent) -> None:
        """Accept one event for delivery."""
        ...


@dataclass(slots=True, eq=False)
class _Task:
    """The manager's record of one task (mutable; never handed out)."""

    task_id: str
    tool: str
    created_at: datetime
    updated_at: datetime
    triggers: list[dict[str, Any]]
    est_duration_s: float | None
    state: TaskState = TaskState.RUNNING
    progress: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    failure: TaskFailure | None = None
    seq: int = 0
    cancel_requested: bool = False
    fired: set[str] = field(default_factory=set)
    handle: asyncio.Task[None] | None = None
    events: deque[tuple[int, TaskEvent]] = field(default_factory=deque)
    """Retained events, oldest first, each with its number in the manager's global order."""


class TaskBook:
    """Task records and their events; the state a :class:`TaskManager` keeps.

    Not thread-safe (see :class:`~robot_mcp_kit.tasks.TaskManager`).
    """

    server_name: str
    poster: EventSink
    max_finished_retained: int
    max_events_per_task: int
    max_events_retained: int
    journal: Outbox | None
    _clock: Callable[[], datetime]
    _tasks: dict[str, _Task]
    _finished: deque[str]
    _lock: asyncio.Lock
    _closing: bool
    _counts: dict[str, int]
    _event_order: deque[tuple[int, _Task]]
    _events_total: int
    _event_n: int

    def _info(self, task: _Task) -> TaskInfo:
        # model_construct: the fields are already valid, and start() must stay cheap.
        return TaskInfo.model_construct(
            task_id=task.task_id,
            server=self.server_name,
            tool=task.tool,
            state=task.state,
            created_at=task.created_at,
            updated_at=task.updated_at,
            triggers=[dict(t) for t in task.triggers],
            est_duration_s=task.est_duration_s,
            progress=None if task.progress is None else dict(task.progress),
            result=None if task.result is None else dict(task.result),
            failure=task.failure,
        )

    async def _emit(
        self,
        task: _Task,
        type_: EventType,
        payload: dict[str, Any],
        *,
        terminal: bool = False,
    ) -> None:
        async with self._lock:
            if task.state != TaskState.RUNNING and not terminal:
                _log.warning(
                    "late_event_dropped",
                    task_id=task.task_id,
                    state=task.state.value,
                    type=type_,
                )
                return
            task.seq += 1
            now = self._clock()
            task.updated_at = now
            event = TaskEvent(
                event_id=new_event_id(),
                task_id=task.task_id,
                server=self.server_name,
                tool=task.tool,
                type=type_,
                seq=task.seq,
                ts=now,
                payload=payload,
            )
            # Still under the lock: the sink sees this task's events in seq order.
            try:
                await self.poster.post(event)
            except Exception:
                _log.exception(
                    "event_sink_failed",
                    task_id=task.task_id,
                    type=type_,
                    seq=event.seq,
                    then="the event is lost",
                )
            self._retain(task, event)
            if self.journal is not None:
                self.journal.save_task(self._info(task), task.seq)

    def _finish(
        self,
        task: _Task,
        state: TaskState,
        *,
        result: dict[str, Any] | None = None,
        failure: TaskFailure | None = None,
    ) -> bool:
        """Move ``task`` to a terminal state; False if it already was terminal."""
        if task.state != TaskState.RUNNING:
            return False
        state = TaskState(state)
        task.state = state
        task.result = result
        task.failure = failure
        task.updated_at = self._clock()
        self._counts[state] += 1
        if self.journal is not None and not (state == TaskState.CANCELLED and self._closing):
            self.journal.save_task(self._info(task), task.seq)
        self._remember_finished(task)
        return True

    def _remember_finished(self, task: _Task) -> None:
        self._finished.append(task.task_id)
        while len(self._finished) > self.max_finished_retained:
            evicted = self._finished.popleft()
            self._tasks.pop(evicted, None)
            if self.journal is not None:
                self.journal.forget_task(evicted)

    def _retain(self, task: _Task, event: TaskEvent) -> None:
        """Keep ``event`` for :meth:`events`, within the per-task and total bounds."""
        if self.max_events_per_task == 0 or self.max_events_retained == 0:
            return
        events = task.events
        if len(events) >= self.max_events_per_task:
            events.popleft()
            self._events_total -= 1
        self._event_n += 1
        events.append((self._event_n, event))
        self._events_total += 1
        order = self._event_order
        order.append((self._event_n, task))
        while self._events_total > self.max_events_retained:
            # The oldest event overall is the oldest of its task, unless stale (see
            # ``_event_order`` in ``TaskManager.__init__``).
            n, oldest = order.popleft()
            if oldest.events and oldest.events[0][0] == n:
                oldest.events.popleft()
                self._events_total -= 1
        if len(order) > 2 * self.max_events_retained + 64:
            live = {id(t): t for _, t in order}.values()
            merged = sorted((n, t) for t in live for n, _ in t.events)
            self._event_order = deque(merged)
