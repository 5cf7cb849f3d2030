"""The :class:`TaskManager`: starts task bodies and answers for their state and events."""

from __future__ import annotations

import asyncio
import builtins
import uuid
from collections import deque
from collections.abc import Callable, Collection
from datetime import datetime
from typing import Any, Literal

from robot_mcp_kit._exceptions import (
    ConfigurationError,
    InvalidArgument,
    ManagerClosed,
    TaskManagerError,
)
from robot_mcp_kit._outbox import Outbox
from robot_mcp_kit._task_book import EventSink, _Task
from robot_mcp_kit._task_context import TaskBody
from robot_mcp_kit._task_runner import TaskRunner
from robot_mcp_kit._triggers import GENERIC_TRIGGER_TYPES, _is_number
from robot_mcp_kit.log import get_logger
from robot_mcp_kit.models import (
    TERMINAL_STATES,
    TaskEventPage,
    TaskInfo,
    TaskState,
    utc_now,
)

__all__ = [
    "DEFAULT_CANCEL_GRACE_S",
    "DEFAULT_MAX_EVENTS_PER_TASK",
    "DEFAULT_MAX_EVENTS_RETAINED",
    "DEFAULT_MAX_FINISHED_RETAINED",
    "EVENTS_PAGE_MAX",
    "TaskManager",
    "new_task_id",
]

_log = get_logger("robot_mcp_kit.tasks")

DEFAULT_MAX_FINISHED_RETAINED = 200
DEFAULT_CANCEL_GRACE_S = 5.0
DEFAULT_MAX_EVENTS_PER_TASK = 256
"""Events retained per task for ``get_task_events`` (the newest)."""
DEFAULT_MAX_EVENTS_RETAINED = 10_000
"""Events retained over all tasks for ``get_task_events`` (the newest)."""
EVENTS_PAGE_MAX = 200
"""The most events one :meth:`TaskManager.events` call (one ``get_task_events``) answers."""

_ALL_STATES: frozenset[TaskState] = frozenset(TaskState)
_MAX_ID_ATTEMPTS = 100


def new_task_id(server_name: str) -> str:
    """Return a fresh task id, ``f"{server_name[:4]}-{6 hex}"`` (e.g. ``nav-7f3a2b``).

    Cosmetic: uniqueness comes from the manager, which draws again on a collision
    (``TaskManager(id_factory=...)`` replaces it; tests force collisions that way).
    """
    return f"{server_name[:4]}-{uuid.uuid4().hex[:6]}"


class TaskManager(TaskRunner):
    """Runs task bodies as asyncio tasks and keeps their state for ``get_task``.

    Args:
        server_name: the server's name; stamped on every event and ``TaskInfo`` and
            cut to four characters for task ids.
        poster: the :class:`EventSink` events are handed to.
        max_finished_retained: how many finished tasks stay queryable; beyond that the
            oldest finished one is forgotten. Running tasks are never evicted.
        known_trigger_types: trigger types this server implements (see
            :mod:`robot_mcp_kit.tasks`); ``progress_above`` is always known. None: do not
            judge types.
        cancel_grace_s: how long :meth:`cancel` / :meth:`aclose` wait for a body to
            unwind after cancelling it before marking it cancelled anyway.
        clock: returns the current aware UTC datetime (tests inject one).
        id_factory: draws a task id for a server name; :func:`new_task_id` by default.
            A drawn id already in use is drawn again, never overwritten.
        max_events_per_task: events retained per task for :meth:`events`.
        max_events_retained: events retained over all tasks.
        journal: the task journal; by default the poster's durable outbox when it has
            one (``poster.outbox``), else none. ``False``: none.

    Not thread-safe: use it from the event loop that runs the server. The poster is the
    caller's to close.
    """

    def __init__(
        self,
        server_name: str,
        poster: EventSink,
        *,
        max_finished_retained: int = DEFAULT_MAX_FINISHED_RETAINED,
        known_trigger_types: Collection[str] | None = None,
        cancel_grace_s: float = DEFAULT_CANCEL_GRACE_S,
        clock: Callable[[], datetime] | None = None,
        id_factory: Callable[[str], str] | None = None,
        max_events_per_task: int = DEFAULT_MAX_EVENTS_PER_TASK,
        max_events_retained: int = DEFAULT_MAX_EVENTS_RETAINED,
        journal: Outbox | Literal[False] | None = None,
    ) -> None:
        if not server_name:
            raise ConfigurationError("server_name must be a non-empty string.")
        if max_finished_retained < 0:
            raise ConfigurationError(
                f"max_finished_retained must be >= 0, got {max_finished_retained!r}."
            )
        if not cancel_grace_s >= 0:
            raise ConfigurationError(f"cancel_grace_s must be >= 0, got {cancel_grace_s!r}.")
        if max_events_per_task < 0 or max_events_retained < 0:
            raise ConfigurationError(
                f"max_events_per_task and max_events_retained must be >= 0, got "
                f"{max_events_per_task!r} and {max_events_retained!r}."
            )
        self.server_name = server_name
        self.poster = poster
        self.max_finished_retained = max_finished_retained
        self.known_trigger_types: frozenset[str] | None = (
            None if known_trigger_types is None else frozenset(known_trigger_types)
        )
        self.cancel_grace_s = cancel_grace_s
        self._clock = clock or utc_now
        self._new_id = id_factory or new_task_id
        self._tasks: dict[str, _Task] = {}
        self._finished: deque[str] = deque()
        self._lock = asyncio.Lock()
        self._closed = False
        self._counts: dict[str, int] = {
            "started": 0,
            **{state: 0 for state in TERMINAL_STATES},
        }
        self.max_events_per_task = max_events_per_task
        self.max_events_retained = max_events_retained
        # One entry (number, task) per retained event, oldest first; entries of events the
        # per-task bound already let go are stale and skipped (compacted when too many).
        self._event_order: deque[tuple[int, _Task]] = deque()
        self._events_total = 0
        self._event_n = 0
        self._closing = False
        if journal is None:
            found = getattr(poster, "outbox", None)
            journal = found if isinstance(found, Outbox) else False
        self.journal: Outbox | None = journal or None
        if self.journal is not None:
            self._recover(self.journal)

    # -- public API ------------------------------------------------------------------

    def start(
        self,
        tool: str,
        body: TaskBody,
        triggers: builtins.list[dict[str, Any]] | None = None,
        est_duration_s: float | None = None,
        *,
        known_trigger_types: Collection[str] | None = None,
    ) -> TaskInfo:
        """Create a task, spawn ``body`` as an asyncio task, return at once (``running``).

        Must be called with a running event loop (from a tool handler, typically). The
        lifecycle is in :mod:`robot_mcp_kit.tasks`. ``known_trigger_types`` overrides the
        manager's for this task. Malformed or unknown triggers are kept in the
        ``TaskInfo`` (as passed in) but logged once at WARNING and never fired by the kit;
        entries that are not dicts are dropped.

        Raises:
            ManagerClosed: the manager was closed (:meth:`aclose`); a ``RuntimeError``.
            TaskManagerError: no running event loop, or no unused task id could be drawn;
                a ``RuntimeError``.
        """
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise TaskManagerError(
                "TaskManager.start() needs a running asyncio event loop; call it from a "
                "coroutine such as an async MCP tool handler."
            ) from None
        if self._closed:
            raise ManagerClosed(
                f"TaskManager for {self.server_name!r} is closed; no task can be started."
            )
        task_id = self._new_unique_id()
        now = self._clock()
        task = _Task(
            task_id=task_id,
            tool=tool,
            created_at=now,
            updated_at=now,
            triggers=self._accept_triggers(task_id, triggers, known_trigger_types),
            est_duration_s=est_duration_s,
        )
        self._tasks[task_id] = task
        self._counts["started"] += 1
        task.handle = loop.create_task(self._run(task, body), name=f"robot-mcp-task:{task_id}")
        info = self._info(task)
        if self.journal is not None:
            self.journal.save_task(info, 0)
        return info

    def get(self, task_id: str) -> TaskInfo | None:
        """Return a snapshot of the task, or None if it is unknown or was evicted."""
        task = self._tasks.get(task_id)
        return None if task is None else self._info(task)

    def list(self, states: Collection[TaskState] | None = None) -> builtins.list[TaskInfo]:
        """Return snapshots of the known tasks, oldest first, optionally only ``states``.

        Raises:
            InvalidArgument: ``states`` names a state that does not exist (a ``ValueError``).
        """
        if states is None:
            return [self._info(t) for t in self._tasks.values()]
        wanted = set(states)
        unknown = wanted - _ALL_STATES
        if unknown:
            raise InvalidArgument(
                f"unknown task state(s) {sorted(unknown)!r}; valid states are "
                f"{sorted(s.value for s in _ALL_STATES)!r}."
            )
        return [self._info(t) for t in self._tasks.values() if t.state in wanted]

    def events(
        self, task_id: str, after_seq: int = 0, limit: int = EVENTS_PAGE_MAX
    ) -> TaskEventPage | None:
        """Return the task's retained events with ``seq > after_seq``, oldest first.

        At most ``limit`` (capped at :data:`EVENTS_PAGE_MAX`); ``more`` says whether
        further retained events follow. None if the task is unknown or was evicted. What
        is retained is bounded per task and in total (see :mod:`robot_mcp_kit.tasks`).
        Read-only.
        """
        task = self._tasks.get(task_id)
        if task is None:
            return None
        limit = max(0, min(limit, EVENTS_PAGE_MAX))
        after = [e for _, e in task.events if e.seq > after_seq]
        return TaskEventPage(
            task_id=task_id,
            events=after[:limit],
            last_seq=task.seq,
            first_retained_seq=task.events[0][1].seq if task.events else None,
            more=len(after) > limit,
        )

    async def cancel(self, task_id: str) -> TaskInfo | None:
        """Cancel a running task and return its state; None if the id is unknown.

        The body's asyncio task is cancelled and awaited for up to ``cancel_grace_s``;
        the task then is ``cancelled`` (even if the body swallowed the cancellation or
        outlived the grace period) and emits no terminal event. Idempotent. A task that
        already finished is returned unchanged in its terminal state.
        """
        task = self._tasks.get(task_id)
        if task is None:
            return None
        if task.state == TaskState.RUNNING:
            await self._cancel_and_wait([task])
        return self._info(task)

    async def aclose(self) -> None:
        """Cancel every running task and wait for them (server shutdown). Idempotent.

        After this, :meth:`start` raises. The poster is not closed here. With a journal,
        the tasks cancelled here stay ``running`` in it, so the next start reports them
        ``INTERRUPTED``.
        """
        self._closed = True
        self._closing = True
        running = [t for t in self._tasks.values() if t.state == TaskState.RUNNING]
        if running:
            await self._cancel_and_wait(running)

    @property
    def closed(self) -> bool:
        """True once :meth:`aclose` was called."""
        return self._closed

    def __repr__(self) -> str:
        running = sum(1 for t in self._tasks.values() if t.state == TaskState.RUNNING)
        c = self._counts
        return (
            f"<TaskManager server={self.server_name!r} running={running} "
            f"started={c['started']} succeeded={c['succeeded']} failed={c['failed']} "
            f"cancelled={c['cancelled']} retained_finished={len(self._finished)}"
            f"{' closed' if self._closed else ''}>"
        )

    # -- internals -------------------------------------------------------------------

    def _new_unique_id(self) -> str:
        for _ in range(_MAX_ID_ATTEMPTS):
            candidate = self._new_id(self.server_name)
            if candidate not in self._tasks:
                return candidate
            _log.debug("task_id_collided", server=self.server_name, task_id=candidate)
        raise TaskManagerError(
            f"could not draw a unique task id for {self.server_name!r} in "
            f"{_MAX_ID_ATTEMPTS} attempts; is the id factory returning a constant?"
        )

    def _accept_triggers(
        self,
        task_id: str,
        triggers: builtins.list[dict[str, Any]] | None,
        known_override: Collection[str] | None,
    ) -> builtins.list[dict[str, Any]]:
        if not triggers:
            return []
        known = self.known_trigger_types if known_override is None else frozenset(known_override)
        accepted: builtins.list[dict[str, Any]] = []
        for trigger in triggers:
            if not isinstance(trigger, dict):
                _log.warning(
                    "trigger_ignored",
                    task_id=task_id,
                    trigger=trigger,
                    reason="a trigger must be a dict with a 'type'",
                )
                continue
            accepted.append(dict(trigger))
            kind = trigger.get("type")
            if not isinstance(kind, str):
                _log.warning(
                    "trigger_ignored",
                    task_id=task_id,
                    trigger=trigger,
                    reason="it has no string 'type'",
                )
            elif kind == "progress_above":
                if not _is_number(trigger.get("percent")):
                    _log.warning(
                        "trigger_ignored",
                        task_id=task_id,
                        trigger=trigger,
                        reason="'percent' must be a number",
                    )
            elif known is not None and kind not in known:
                _log.warning(
                    "trigger_ignored",
                    task_id=task_id,
                    type=kind,
                    reason="unknown type",
                    known=sorted(known | GENERIC_TRIGGER_TYPES),
                )
        return accepted
