"""TaskManager, TaskContext, TaskError: the server side of the Async Task Contract.

(Kit spec §4.2, DESIGN §3.)

A long-running tool calls :meth:`TaskManager.start` with an async *body*; ``start``
returns a :class:`~robot_mcp_kit.models.TaskInfo` in state ``running`` at once and the body
runs as an asyncio task. The body reports through the :class:`TaskContext` it is handed
(``progress``, ``fire_trigger``, ``emit``); each report becomes a
:class:`~robot_mcp_kit.models.TaskEvent` handed to the manager's :class:`EventSink`
(normally an :class:`~robot_mcp_kit.events.EventPoster`). When the body ends:

=============================  ==============  ==========================================
body                           state           event
=============================  ==============  ==========================================
returns a dict                 ``succeeded``   ``task_done`` ``{"result": <dict>}``
raises :class:`TaskError`      ``failed``      ``task_failed`` (a ``TaskFailure``)
raises ``CancelledError``      ``cancelled``   none
raises anything else           ``failed``      ``task_failed``, ``error_code="INTERNAL"``
returns something not a dict   ``failed``      ``task_failed``, ``error_code="INTERNAL"``
=============================  ==============  ==========================================

Ordering: ``seq`` is per task, starts at 1 and is allocated under the manager's lock
immediately before the event is handed to the sink, still under the lock, so the sink
receives one task's events in ``seq`` order with no gaps.

Triggers are opaque dicts with a ``type`` (kit spec §3.2). The manager implements only
``progress_above`` itself (evaluated in :meth:`TaskContext.progress`); every other type is
the server's business. Because the manager cannot know which types a server implements,
the server declares them with ``known_trigger_types`` (on the manager, or per
:meth:`TaskManager.start` call; the per-call value wins). A trigger whose type is not
known is ignored with one WARNING when the task starts. With ``known_trigger_types=None``
(the default) the manager does not judge types, and warns only about malformed triggers
(not a dict, or without a string ``type``).

Retained events (for ``get_task_events``, gap repair): the manager keeps each task's
last ``max_events_per_task`` events (default 256) and at most ``max_events_retained``
(default 10 000) over all tasks, the oldest forgotten first; :meth:`TaskManager.events`
answers them after a given ``seq``, at most ``limit`` (default and cap 200) per call.

Task journal (issue 14): when the poster has a durable outbox
(``EventPoster(outbox=...)``), the manager journals its tasks in the same file. At
construction it reads the journal back: finished tasks answer ``get_task`` again (within
``max_finished_retained``), their retained events answer ``get_task_events``, and each
task journalled as ``running`` — the process died under it — becomes ``failed`` with
``error_code="INTERRUPTED"``, ``recoverable=True``, and a ``task_failed`` event with the
task's next ``seq`` goes out before anything new. A shutdown through :meth:`aclose`
journals nothing for the tasks it cancels, so they too are reported ``INTERRUPTED`` by the
next start (nobody had asked for their cancellation).

Nothing here imports ``mcp``; logging goes to the stdlib logger ``robot_mcp_kit.tasks`` as
event names with key-value fields (``trigger_ignored task_id='nav-1a2b3c' ...``).
"""

from __future__ import annotations

import asyncio
import builtins
import json
import math
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, TypeGuard, runtime_checkable

from robot_mcp_kit._exceptions import (
    ConfigurationError,
    InvalidArgument,
    ManagerClosed,
    TaskManagerError,
)
from robot_mcp_kit._log import get_logger
from robot_mcp_kit._outbox import Outbox
from robot_mcp_kit.models import (
    TERMINAL_STATES,
    EventType,
    TaskEvent,
    TaskEventPage,
    TaskFailure,
    TaskInfo,
    TaskState,
    new_event_id,
    utc_now,
)

__all__ = [
    "DEFAULT_CANCEL_GRACE_S",
    "DEFAULT_MAX_EVENTS_PER_TASK",
    "DEFAULT_MAX_EVENTS_RETAINED",
    "DEFAULT_MAX_FINISHED_RETAINED",
    "EVENTS_PAGE_MAX",
    "GENERIC_TRIGGER_TYPES",
    "INTERRUPTED",
    "EventSink",
    "TaskBody",
    "TaskContext",
    "TaskError",
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
INTERRUPTED = "INTERRUPTED"
"""``error_code`` of a task the process died under, reported by the next start."""
_INTERRUPTED_MESSAGE = (
    "The server stopped (crash, kill or restart) while this task was running, so its work "
    "did not finish; it may be started again."
)
GENERIC_TRIGGER_TYPES: frozenset[str] = frozenset({"progress_above"})
"""Trigger types the manager evaluates itself; always known."""

_ALL_STATES: frozenset[TaskState] = frozenset(TaskState)
_MAX_ID_ATTEMPTS = 100


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


class TaskError(Exception):
    """Raise from a task body to fail the task with structured info.

    The attributes become the task's :class:`~robot_mcp_kit.models.TaskFailure`, which is
    written for the planner LLM: a machine ``error_code`` (``"DOOR_CLOSED"``), a one or two
    sentence ``message``, whether replanning can help (``recoverable``) and
    ``suggestions`` (``["retry_after_s:300"]``).
    """

    def __init__(
        self,
        error_code: str,
        message: str,
        *,
        recoverable: bool = True,
        suggestions: list[str] | None = None,
    ) -> None:
        super().__init__(f"{error_code}: {message}")
        self.error_code = error_code
        self.message = message
        self.recoverable = recoverable
        self.suggestions: list[str] = list(suggestions or [])

    def to_failure(self) -> TaskFailure:
        """Return the :class:`TaskFailure` this error stands for."""
        return TaskFailure(
            error_code=self.error_code,
            message=self.message,
            recoverable=self.recoverable,
            suggestions=list(self.suggestions),
        )


def new_task_id(server_name: str) -> str:
    """Return a fresh task id, ``f"{server_name[:4]}-{6 hex}"`` (e.g. ``nav-7f3a2b``).

    Cosmetic: uniqueness comes from the manager, which draws again on a collision. This
    module-level function is the seam tests replace to force collisions.
    """
    return f"{server_name[:4]}-{uuid.uuid4().hex[:6]}"


def _is_number(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _trigger_key(trigger: dict[str, Any]) -> str:
    # Identity of a trigger for at-most-once: its canonical JSON, so a body that copies the
    # dict (or rebuilds it) still hits the same key.
    return json.dumps(trigger, sort_keys=True, default=repr)


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


class TaskContext:
    """Handed to every task body; the body's only channel to the outside.

    All methods are coroutine-safe (call them from the body or from tasks the body
    spawns). Once the task has reached a terminal state, reports are dropped with a
    WARNING: nothing is emitted after ``task_done`` / ``task_failed``.
    """

    __slots__ = ("_manager", "_task", "task_id", "tool", "triggers")

    def __init__(self, manager: TaskManager, task: _Task) -> None:
        self._manager = manager
        self._task = task
        self.task_id: str = task.task_id
        self.tool: str = task.tool
        self.triggers: list[dict[str, Any]] = task.triggers
        """The triggers the caller attached (malformed non-dict entries removed)."""

    @property
    def cancel_requested(self) -> bool:
        """True once :meth:`TaskManager.cancel` (or ``aclose``) was called for this task."""
        return self._task.cancel_requested

    async def progress(self, payload: dict[str, Any]) -> None:
        """Record ``payload`` as the task's progress and emit a ``progress`` event.

        If ``payload`` holds a numeric ``percent``, each ``progress_above`` trigger with
        ``percent >= trigger["percent"]`` is then fired (at most once unless it says
        ``"repeat": true``), after the progress event.
        """
        if not isinstance(payload, dict):
            raise TypeError(f"progress payload must be a dict, got {type(payload).__name__}.")
        task = self._task
        if task.state == TaskState.RUNNING:
            task.progress = dict(payload)
        await self._manager._emit(task, "progress", dict(payload))
        percent = payload.get("percent")
        if not _is_number(percent):
            return
        for trigger in task.triggers:
            if trigger.get("type") != "progress_above":
                continue
            threshold = trigger.get("percent")
            if _is_number(threshold) and percent >= threshold:
                await self.fire_trigger(trigger, {"percent": percent})

    async def fire_trigger(
        self, trigger: dict[str, Any], extra: dict[str, Any] | None = None
    ) -> None:
        """Emit ``trigger_fired`` with payload ``{"trigger": trigger, **extra}``.

        At most once per (task, trigger) — triggers are compared by content — unless the
        trigger carries ``"repeat": true``. A repeated call for a non-repeating trigger
        is a silent no-op, so bodies may call this on every tick while the condition holds.
        """
        if not isinstance(trigger, dict):
            raise TypeError(f"trigger must be a dict, got {type(trigger).__name__}.")
        task = self._task
        if trigger.get("repeat") is not True:
            key = _trigger_key(trigger)
            if key in task.fired:
                return
            task.fired.add(key)
        payload: dict[str, Any] = {"trigger": trigger}
        for name, value in (extra or {}).items():
            if name != "trigger":
                payload[name] = value
        await self._manager._emit(task, "trigger_fired", payload)

    async def emit(self, payload: dict[str, Any]) -> None:
        """Emit a ``watch_event`` carrying ``payload`` (for long-lived watcher tasks)."""
        if not isinstance(payload, dict):
            raise TypeError(f"watch_event payload must be a dict, got {type(payload).__name__}.")
        await self._manager._emit(self._task, "watch_event", dict(payload))

    def raise_if_cancelled(self) -> None:
        """Cooperative cancellation checkpoint: raise ``CancelledError`` if cancel was asked.

        asyncio also delivers the cancellation at the body's next ``await``; this lets a
        body that computes without awaiting stop early.
        """
        if self._task.cancel_requested:
            raise asyncio.CancelledError(f"task {self.task_id} was cancelled")


TaskBody = Callable[[TaskContext], Awaitable[dict[str, Any]]]
"""A task body: an async function taking the context and returning the result dict."""


class TaskManager:
    """Runs task bodies as asyncio tasks and keeps their state for ``get_task``.

    Args:
        server_name: the server's name; stamped on every event and ``TaskInfo`` and
            cut to four characters for task ids.
        poster: the :class:`EventSink` events are handed to.
        max_finished_retained: how many finished tasks stay queryable; beyond that the
            oldest finished one is forgotten. Running tasks are never evicted.
        known_trigger_types: trigger types this server implements (see the module
            docstring); ``progress_above`` is always known. None: do not judge types.
        cancel_grace_s: how long :meth:`cancel` / :meth:`aclose` wait for a body to
            unwind after cancelling it before marking it cancelled anyway.
        clock: returns the current aware UTC datetime (tests inject one).
        id_factory: draws a task id for a server name; :func:`new_task_id` by default.
            A drawn id already in use is drawn again, never overwritten.
        max_events_per_task: events retained per task for :meth:`events`. Added in 0.2.0.
        max_events_retained: events retained over all tasks. Added in 0.2.0.
        journal: the task journal; by default the poster's durable outbox when it has
            one (``poster.outbox``), else none. ``False``: none. Added in 0.2.0.

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
        lifecycle is in the module docstring. ``known_trigger_types`` overrides the
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
        is retained is bounded per task and in total (see the module docstring).
        Read-only. Added in 0.2.0.
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
            # Looked up through the module so tests can replace the generator.
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
            # The oldest event overall is the oldest of its task, unless stale (see above).
            n, oldest = order.popleft()
            if oldest.events and oldest.events[0][0] == n:
                oldest.events.popleft()
                self._events_total -= 1
        if len(order) > 2 * self.max_events_retained + 64:
            live = {id(t): t for _, t in order}.values()
            merged = sorted((n, t) for t in live for n, _ in t.events)
            self._event_order = deque(merged)

    def _recover(self, journal: Outbox) -> None:
        """Read the journal back at construction (see the module docstring)."""
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
