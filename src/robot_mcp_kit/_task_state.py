"""The manager's record of one task, and :class:`EventRetention`, its memory of events.

:class:`EventRetention` keeps each task's newest events (``per_task``) and at most
``total`` over all tasks, the oldest forgotten first; it answers ``get_task_events`` pages.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from robot_mcp_kit.models import InputAnswer, TaskEvent, TaskFailure, TaskInfo, TaskState

__all__ = ["EventPage", "EventRetention", "PendingInput", "TaskRecord"]


@dataclass(slots=True, eq=False)
class PendingInput:
    """One input request a task body is waiting on (``TaskContext.request_input``).

    ``request`` is what both faces show: ``{"method": "elicitation/create", "params":
    {...}}``; ``answer`` resolves with the :class:`~robot_mcp_kit.models.InputAnswer`.
    """

    request: dict[str, Any]
    answer: asyncio.Future[InputAnswer]


@dataclass(slots=True, eq=False)
class TaskRecord:
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
    """The last ``seq`` allocated to one of this task's events (0: none yet)."""
    cancel_requested: bool = False
    fired: set[str] = field(default_factory=set)
    """Keys of the non-repeating triggers already fired (see ``_triggers.trigger_key``)."""
    handle: asyncio.Task[None] | None = None
    inputs: dict[str, PendingInput] = field(default_factory=dict)
    """The input requests the body is waiting on, by request id, oldest first."""
    inputs_asked: int = 0
    """How many input requests the body has made (request ids are never reused)."""
    owner: str = ""
    """The :attr:`~robot_mcp_kit.tasks.Principal.key` of the principal that started it
    (``""``: anonymous, a server without authentication)."""

    @classmethod
    def from_info(cls, info: TaskInfo, seq: int, owner: str = "") -> TaskRecord:
        """A record restored from a journalled ``TaskInfo``, its last ``seq`` and owner."""
        return cls(
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
            owner=owner,
        )

    def info(self, server_name: str) -> TaskInfo:
        """A snapshot of the record as the wire's ``TaskInfo`` (copies, never aliases)."""
        # model_construct: the fields are already valid, and start() must stay cheap.
        return TaskInfo.model_construct(
            task_id=self.task_id,
            server=server_name,
            tool=self.tool,
            state=self.state,
            created_at=self.created_at,
            updated_at=self.updated_at,
            triggers=[dict(t) for t in self.triggers],
            est_duration_s=self.est_duration_s,
            progress=None if self.progress is None else dict(self.progress),
            result=None if self.result is None else dict(self.result),
            failure=self.failure,
        )


@dataclass(frozen=True, slots=True)
class EventPage:
    """One page of a task's retained events (see :meth:`EventRetention.page`)."""

    events: list[TaskEvent]
    first_retained_seq: int | None
    more: bool


class EventRetention:
    """The retained events of every task: ``per_task`` newest each, ``total`` over all.

    Args:
        per_task: events kept per task (the newest); 0 keeps none.
        total: events kept over all tasks; beyond it the oldest overall goes first.

    Not thread-safe; the manager uses it from its event loop.
    """

    def __init__(self, per_task: int, total: int) -> None:
        self.per_task = per_task
        self.total = total
        self._events: dict[str, deque[tuple[int, TaskEvent]]] = {}
        # One entry (number, task id) per retained event, oldest first; entries of events
        # the per-task bound (or forget) already let go are stale and skipped, and the
        # deque is rebuilt when stale entries pile up.
        self._order: deque[tuple[int, str]] = deque()
        self._count = 0
        self._n = 0

    def __len__(self) -> int:
        return self._count

    def tasks(self) -> int:
        """How many tasks have events retained (each with at least one)."""
        return len(self._events)

    def retain(self, task_id: str, event: TaskEvent) -> None:
        """Keep ``event`` (the newest of its task), within the per-task and total bounds."""
        if self.per_task == 0 or self.total == 0:
            return
        events = self._events.setdefault(task_id, deque())
        if len(events) >= self.per_task:
            events.popleft()
            self._count -= 1
        self._n += 1
        events.append((self._n, event))
        self._count += 1
        order = self._order
        order.append((self._n, task_id))
        while self._count > self.total:
            n, oldest_id = order.popleft()
            oldest = self._events.get(oldest_id)
            if oldest and oldest[0][0] == n:
                oldest.popleft()
                self._count -= 1
                if not oldest:
                    del self._events[oldest_id]
        if len(order) > 2 * self.total + 64:
            merged = sorted((n, tid) for tid, evs in self._events.items() for n, _ in evs)
            self._order = deque(merged)

    def forget(self, task_id: str) -> None:
        """Forget every retained event of ``task_id`` (the task itself was forgotten)."""
        events = self._events.pop(task_id, None)
        if events:
            self._count -= len(events)

    def last_seq(self, task_id: str) -> int | None:
        """The ``seq`` of the newest retained event of ``task_id``, or None."""
        events = self._events.get(task_id)
        return events[-1][1].seq if events else None

    def page(self, task_id: str, after_seq: int, limit: int) -> EventPage:
        """The retained events of ``task_id`` with ``seq > after_seq``, oldest first.

        At most ``limit`` (a negative one counts as 0); ``more`` says whether further
        retained events follow. Read-only.
        """
        events = self._events.get(task_id) or deque()
        after = [e for _, e in events if e.seq > after_seq]
        limit = max(0, limit)
        return EventPage(
            events=after[:limit],
            first_retained_seq=events[0][1].seq if events else None,
            more=len(after) > limit,
        )
