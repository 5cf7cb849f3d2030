"""The :class:`TaskManager`: starts task bodies and answers for their state and events.

One class, its state set in its own ``__init__``. It composes :class:`EventRetention`
(the retained events), a :class:`TaskJournal` (the durable record, when the poster has an
outbox) and the trigger rules of ``_triggers``; each task body gets a
:class:`TaskContext` bound to :meth:`TaskManager._emit` for its task.
"""

from __future__ import annotations

import asyncio
import builtins
import functools
import math
import uuid
from collections import deque
from collections.abc import Callable, Collection, Mapping
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

from robot_mcp_kit._exceptions import (
    ConfigurationError,
    InvalidArgument,
    InvalidPayload,
    ManagerClosed,
    TaskManagerError,
)
from robot_mcp_kit._frameworks import shown_to_client
from robot_mcp_kit._payload import DEFAULT_MAX_PAYLOAD_BYTES, json_payload
from robot_mcp_kit._principal import Principal, current_principal
from robot_mcp_kit._task_context import TaskBody, TaskContext, TaskError
from robot_mcp_kit._task_journal import INTERRUPTED, JournalOwner, TaskJournal
from robot_mcp_kit._task_state import EventRetention, TaskRecord
from robot_mcp_kit._triggers import (
    TriggerType,
    accept_triggers,
    check_triggers,
    is_number,
    trigger_rules,
)
from robot_mcp_kit.log import get_logger
from robot_mcp_kit.models import (
    TERMINAL_STATES,
    EventType,
    InputAnswer,
    TaskEvent,
    TaskEventPage,
    TaskFailure,
    TaskInfo,
    TaskState,
    new_event_id,
    utc_now,
)
from robot_mcp_kit.telemetry import observe, set_attributes, span

__all__ = [
    "DEFAULT_CANCEL_GRACE_S",
    "DEFAULT_INTERNAL_ERROR_DETAIL",
    "DEFAULT_MAX_EVENTS_PER_TASK",
    "DEFAULT_MAX_EVENTS_RETAINED",
    "DEFAULT_MAX_FINISHED_RETAINED",
    "EVENTS_PAGE_MAX",
    "EventSink",
    "InternalErrorDetail",
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

InternalErrorDetail = Literal["message", "type"]
"""What an ``INTERNAL`` failure tells the client of an unexpected exception in a body.

``"message"``: ``str(exc)`` (its type's name when empty), as the kit spec asks;
``"type"``: only the type's name, in a sentence saying the details are in the log.
"""
DEFAULT_INTERNAL_ERROR_DETAIL: InternalErrorDetail = "message"
_INTERNAL_ERROR_DETAILS: tuple[InternalErrorDetail, ...] = ("message", "type")

_ALL_STATES: frozenset[TaskState] = frozenset(TaskState)
_MAX_ID_ATTEMPTS = 100
_INTERRUPTED_MESSAGE = (
    "The server stopped (crash, kill or restart) while this task was running, so its work "
    "did not finish; it may be started again."
)


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


def new_task_id(server_name: str) -> str:
    """Return a fresh task id, ``f"{server_name[:4]}-{6 hex}"`` (e.g. ``nav-7f3a2b``).

    Cosmetic: uniqueness comes from the manager, which draws again on a collision
    (``TaskManager(id_factory=...)`` replaces it; tests force collisions that way).
    """
    return f"{server_name[:4]}-{uuid.uuid4().hex[:6]}"


def _task_states(manager: TaskManager) -> list[tuple[float, dict[str, str]]]:
    """The ``robot_mcp.tasks`` observations: the tasks remembered, by state."""
    counts = dict.fromkeys((state.value for state in TaskState), 0)
    for task in list(manager._tasks.values()):
        counts[task.state.value] += 1
    server = manager.server_name
    return [(n, {"robot_mcp.server": server, "robot_mcp.task.state": s}) for s, n in counts.items()]


class TaskManager:
    """Runs task bodies as asyncio tasks and keeps their state for ``get_task``.

    Args:
        server_name: the server's name; stamped on every event and ``TaskInfo`` and
            cut to four characters for task ids.
        poster: the :class:`EventSink` events are handed to.
        max_finished_retained: how many finished tasks stay queryable; beyond that the
            oldest finished one is forgotten. Running tasks are never evicted.
        known_trigger_types: trigger types this server implements, by name or as a
            :class:`~robot_mcp_kit.TriggerType` declaring their fields (see
            :mod:`robot_mcp_kit.tasks`); ``progress_above`` is always known. None: do not
            judge type names (the contract's documented types are still checked).
        cancel_grace_s: how long :meth:`cancel` / :meth:`aclose` wait for a body to
            unwind after cancelling it before marking it cancelled anyway.
        clock: returns the current aware UTC datetime (tests inject one).
        id_factory: draws a task id for a server name; :func:`new_task_id` by default.
            A drawn id already in use is drawn again, never overwritten.
        max_events_per_task: events retained per task for :meth:`events`.
        max_events_retained: events retained over all tasks.
        journal: the task journal; by default the sink's when it is a journal owner
            (:attr:`EventPoster.journal <robot_mcp_kit.events.EventPoster.journal>`, set
            when the poster has a durable outbox), else none. ``False``: none.
        max_payload_bytes: the size bound of one payload (progress, watch event, trigger,
            result, a start trigger) as compact JSON; larger ones raise
            :class:`~robot_mcp_kit.InvalidPayload` where they enter. The default, 256 KiB,
            is a quarter of a 1 MiB receiver body limit.
        internal_error_detail: what the ``INTERNAL`` failure of a body that raised an
            unexpected exception (not a :class:`TaskError`) says, in ``get_task`` and in
            its ``task_failed`` event, which reach the planner: ``"message"`` (the
            default) its ``str(exc)``; ``"type"`` only the exception's type
            (``"The task stopped on an unexpected ValueError; the details are in the
            server's log."``), for a server whose exceptions may carry what the planner
            should not see. Either way the log's ``task_body_raised`` has the message
            and the traceback.
        task_admins: the OAuth client ids (the ``client_id`` of the access token the
            server's token verifier returns) whose callers see and drive every task, as
            the brain that reconciles tasks a host started natively needs. Every other
            caller sees only the tasks its own principal started (see "Task ownership"
            in :mod:`robot_mcp_kit.tasks`). Without authentication there is one
            principal and this changes nothing.

    Not thread-safe: use it from the event loop that runs the server. The poster is the
    caller's to close.
    """

    def __init__(
        self,
        server_name: str,
        poster: EventSink,
        *,
        max_finished_retained: int = DEFAULT_MAX_FINISHED_RETAINED,
        known_trigger_types: Collection[str | TriggerType] | None = None,
        cancel_grace_s: float = DEFAULT_CANCEL_GRACE_S,
        clock: Callable[[], datetime] | None = None,
        id_factory: Callable[[str], str] | None = None,
        max_events_per_task: int = DEFAULT_MAX_EVENTS_PER_TASK,
        max_events_retained: int = DEFAULT_MAX_EVENTS_RETAINED,
        journal: TaskJournal | Literal[False] | None = None,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        internal_error_detail: InternalErrorDetail = DEFAULT_INTERNAL_ERROR_DETAIL,
        task_admins: Collection[str] = (),
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
        if max_payload_bytes < 1:
            raise ConfigurationError(f"max_payload_bytes must be >= 1, got {max_payload_bytes!r}.")
        if internal_error_detail not in _INTERNAL_ERROR_DETAILS:
            raise ConfigurationError(
                f"internal_error_detail must be one of {list(_INTERNAL_ERROR_DETAILS)!r}, "
                f"got {internal_error_detail!r}."
            )
        if isinstance(task_admins, str) or not all(isinstance(a, str) and a for a in task_admins):
            raise ConfigurationError(
                f"task_admins must be a collection of OAuth client ids (non-empty strings), "
                f"e.g. ['brain'], got {task_admins!r}."
            )
        self.task_admins: frozenset[str] = frozenset(task_admins)
        self.internal_error_detail: InternalErrorDetail = internal_error_detail
        self.server_name = server_name
        self.poster = poster
        self.max_payload_bytes = max_payload_bytes
        self.max_finished_retained = max_finished_retained
        self._trigger_rules = trigger_rules(known_trigger_types)
        self.known_trigger_types: frozenset[str] | None = (
            None
            if known_trigger_types is None
            else frozenset(k.name if isinstance(k, TriggerType) else k for k in known_trigger_types)
        )
        """The names given as ``known_trigger_types`` (None: none given)."""
        self.cancel_grace_s = cancel_grace_s
        self.max_events_per_task = max_events_per_task
        self.max_events_retained = max_events_retained
        self._clock = clock or utc_now
        self._new_id = id_factory or new_task_id
        self._tasks: dict[str, TaskRecord] = {}
        self._finished: deque[str] = deque()
        self._retention = EventRetention(max_events_per_task, max_events_retained)
        self._lock = asyncio.Lock()
        self._closed = False
        self._closing = False
        """True while :meth:`aclose` cancels: those cancellations are not journalled."""
        self._counts: dict[str, int] = {
            "started": 0,
            **{state: 0 for state in TERMINAL_STATES},
        }
        if journal is None:
            journal = poster.journal if isinstance(poster, JournalOwner) else None
        self.journal: TaskJournal | None = journal or None
        if self.journal is not None:
            self._recover(self.journal)
        observe("robot_mcp.tasks", self, _task_states)

    # -- public API ------------------------------------------------------------------

    def start(
        self,
        tool: str,
        body: TaskBody,
        triggers: builtins.list[dict[str, Any]] | None = None,
        est_duration_s: float | None = None,
        *,
        known_trigger_types: Collection[str | TriggerType] | None = None,
    ) -> TaskInfo:
        """Create a task, spawn ``body`` as an asyncio task, return at once (``running``).

        Must be called on the server's running event loop (from an ``async def`` tool
        handler, or a plain ``def`` one registered with
        :func:`~robot_mcp_kit.fastmcp_ext.add_start_tool`: mcp 2.x and standalone FastMCP
        run a plain ``def`` tool in a worker thread). The lifecycle is in
        :mod:`robot_mcp_kit.tasks`. ``known_trigger_types`` overrides the manager's for
        this task. A trigger that is not an object with a string ``type``, or whose known
        type's fields are not as declared (:class:`~robot_mcp_kit.TriggerType`), refuses
        the start: nothing is created, nothing is sent. A trigger of a type that is not
        known is kept in the ``TaskInfo`` (as passed in), logged once at WARNING and never
        fired by the kit.

        Each error below is also the ``ToolError`` of every MCP framework loaded in the
        process, so a start tool that lets it escape gives the client its message on
        mcp 1.x, mcp 2.x and standalone FastMCP alike (``except ManagerClosed`` and the
        others still catch it).

        Raises:
            ManagerClosed: the manager was closed (:meth:`aclose`); a ``RuntimeError``.
            TaskManagerError: no running event loop, or no unused task id could be drawn;
                a ``RuntimeError``.
            InvalidPayload: a trigger is not one JSON document within
                ``max_payload_bytes`` (the message names the key path and the reason).
            InvalidTrigger: a trigger is not an object with a string ``type``, or a field
                of its known type is missing or not as declared (the message names the
                trigger's index, its type and the field); or there are more than
                ``MAX_TRIGGERS`` (32), or over ``MAX_TRIGGERS_JSON_BYTES`` (8 KiB) of them.
            InvalidArgument: ``est_duration_s`` is not a finite number or None.
        """
        try:
            return self._start(tool, body, triggers, est_duration_s, known_trigger_types)
        except (TaskManagerError, InvalidArgument) as exc:
            # mcp 2.x answers any exception but its ToolError with only "Error executing
            # tool <name>" (a plain `def` start tool there, issue 19); these messages are
            # for the client.
            raise shown_to_client(exc) from None

    def _start(
        self,
        tool: str,
        body: TaskBody,
        triggers: builtins.list[dict[str, Any]] | None,
        est_duration_s: float | None,
        known_trigger_types: Collection[str | TriggerType] | None,
    ) -> TaskInfo:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise TaskManagerError(
                "TaskManager.start() must run on the server's asyncio event loop, and this "
                "thread has none (mcp 2.x and standalone FastMCP run a plain `def` tool in a "
                "worker thread): declare the start tool `async def`, or register it with "
                "add_start_tool()."
            ) from None
        if self._closed:
            raise ManagerClosed(
                f"TaskManager for {self.server_name!r} is closed; no task can be started."
            )
        rules = (
            self._trigger_rules
            if known_trigger_types is None
            else trigger_rules(known_trigger_types)
        )
        check_triggers(triggers, rules)  # first: a declared field's refusal names it
        if triggers is not None:
            triggers = [
                json_payload(t, f"trigger {i}", max_bytes=self.max_payload_bytes)
                for i, t in enumerate(triggers)
            ]
        if est_duration_s is not None and not (
            is_number(est_duration_s) and math.isfinite(est_duration_s)
        ):
            raise InvalidArgument(
                f"est_duration_s must be a finite number of seconds or None, got "
                f"{est_duration_s!r}."
            )
        task_id = self._new_unique_id()
        now = self._clock()
        # Whichever face the call came through (a plain tools/call or a native task), the
        # task belongs to the principal of the request that started it.
        task = TaskRecord(
            task_id=task_id,
            tool=tool,
            created_at=now,
            updated_at=now,
            triggers=accept_triggers(task_id, triggers, rules.known),
            est_duration_s=est_duration_s,
            owner=current_principal().key,
        )
        self._tasks[task_id] = task
        self._counts["started"] += 1
        task.handle = loop.create_task(self._run(task, body), name=f"robot-mcp-task:{task_id}")
        info = self._info(task)
        if self.journal is not None:
            self.journal.save(info, 0, task.owner)
        return info

    def get(self, task_id: str, *, caller: Principal | None = None) -> TaskInfo | None:
        """Return a snapshot of the task, or None if it is unknown or was evicted.

        ``caller``: the principal asking (the task tools pass the request's); a task it
        may not see (another principal started it, and it is no task admin) is None, as
        an unknown one. None (the server's own code): every task.
        """
        task = self._task_for(task_id, caller)
        return None if task is None else self._info(task)

    def list(
        self, states: Collection[TaskState] | None = None, *, caller: Principal | None = None
    ) -> builtins.list[TaskInfo]:
        """Return snapshots of the known tasks, oldest first, optionally only ``states``.

        ``caller``: only the tasks that principal may see (see :meth:`get`); None: all.

        Raises:
            InvalidArgument: ``states`` names a state that does not exist (a ``ValueError``).
        """
        wanted = _ALL_STATES if states is None else set(states)
        unknown = wanted - _ALL_STATES
        if unknown:
            raise InvalidArgument(
                f"unknown task state(s) {sorted(unknown)!r}; valid states are "
                f"{sorted(s.value for s in _ALL_STATES)!r}."
            )
        return [
            self._info(t)
            for t in self._tasks.values()
            if t.state in wanted and self._sees(t, caller)
        ]

    def events(
        self,
        task_id: str,
        after_seq: int = 0,
        limit: int = EVENTS_PAGE_MAX,
        *,
        caller: Principal | None = None,
    ) -> TaskEventPage | None:
        """Return the task's retained events with ``seq > after_seq``, oldest first.

        At most ``limit`` (capped at :data:`EVENTS_PAGE_MAX`); ``more`` says whether
        further retained events follow. None if the task is unknown, was evicted or is
        not ``caller``'s to see (:meth:`get`). What is retained is bounded per task and in
        total (see :mod:`robot_mcp_kit.tasks`). Read-only.
        """
        task = self._task_for(task_id, caller)
        if task is None:
            return None
        page = self._retention.page(task_id, after_seq, min(limit, EVENTS_PAGE_MAX))
        return TaskEventPage(
            task_id=task_id,
            events=page.events,
            last_seq=task.seq,
            first_retained_seq=page.first_retained_seq,
            more=page.more,
        )

    def pending_inputs(
        self, task_id: str, *, caller: Principal | None = None
    ) -> dict[str, dict[str, Any]] | None:
        """The input requests a running task waits on, by request id; None if unknown
        (or not ``caller``'s to see, as :meth:`get`).

        Each is ``{"method": "elicitation/create", "params": {...}}`` (a copy), as its
        ``input_required`` event carried it (contract §11). Empty when it waits on none.
        """
        task = self._task_for(task_id, caller)
        if task is None:
            return None
        return {
            key: json_payload(p.request, "input request", max_bytes=self.max_payload_bytes)
            for key, p in task.inputs.items()
        }

    async def answer_input(
        self,
        task_id: str,
        answers: Mapping[str, InputAnswer | Mapping[str, Any]],
        *,
        caller: Principal | None = None,
    ) -> builtins.list[str] | None:
        """Answer input requests of a running task; the request ids answered, None if unknown
        (or not ``caller``'s to see, as :meth:`get`: nothing is answered).

        ``answers`` maps request ids to an :class:`~robot_mcp_kit.models.InputAnswer` or
        its JSON form (``{"action": "accept", "content": {...}}``). Ids the task is not
        waiting on (never asked, already answered, or the task finished) are ignored, as
        the MCP tasks extension asks; each one answered emits ``input_answered``
        ``{"request_id", "action"}`` and then wakes the body.

        Raises:
            InvalidArgument: an answer to a pending request is not an ``InputAnswer``
                (the message names the request id and what to send); nothing is answered.
        """
        task = self._task_for(task_id, caller)
        if task is None:
            return None
        parsed: dict[str, InputAnswer] = {}
        for request_id, answer in answers.items():
            if request_id not in task.inputs:
                continue
            try:
                parsed[request_id] = (
                    answer
                    if isinstance(answer, InputAnswer)
                    else InputAnswer.model_validate(answer)
                )
            except ValueError:
                raise InvalidArgument(
                    f"the answer to input request {request_id!r} must be an object "
                    '{"action": "accept" | "decline" | "cancel", "content": {...}} with '
                    "content an object, got "
                    f"{type(answer).__name__}."
                ) from None
        answered: builtins.list[str] = []
        for request_id, answer in parsed.items():
            pending = task.inputs.get(request_id)
            if pending is None or pending.answer.done():
                continue
            await self._emit(
                task, "input_answered", {"request_id": request_id, "action": answer.action}
            )
            if not pending.answer.done():
                # Off the list at once: a tasks/get right after this must not show it.
                task.inputs.pop(request_id, None)
                pending.answer.set_result(answer)
                answered.append(request_id)
        return answered

    async def cancel(self, task_id: str, *, caller: Principal | None = None) -> TaskInfo | None:
        """Cancel a running task and return its state; None if the id is unknown (or not
        ``caller``'s to see, as :meth:`get`: nothing is cancelled).

        The body's asyncio task is cancelled and awaited for up to ``cancel_grace_s``;
        the task then is ``cancelled`` (even if the body swallowed the cancellation or
        outlived the grace period) and emits no terminal event. Idempotent. A task that
        already finished is returned unchanged in its terminal state.
        """
        task = self._task_for(task_id, caller)
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

    def _info(self, task: TaskRecord) -> TaskInfo:
        return task.info(self.server_name)

    def _sees(self, task: TaskRecord, caller: Principal | None) -> bool:
        return (
            caller is None
            or task.owner == caller.key
            or (caller.client_id is not None and caller.client_id in self.task_admins)
        )

    def _task_for(self, task_id: str, caller: Principal | None) -> TaskRecord | None:
        """The task, if it exists and ``caller`` may see it (one answer for both misses)."""
        task = self._tasks.get(task_id)
        return task if task is not None and self._sees(task, caller) else None

    def _next_event(self, task: TaskRecord, type_: EventType, payload: dict[str, Any]) -> TaskEvent:
        """Allocate the task's next ``seq`` and build its event (the caller hands it on)."""
        task.seq += 1
        now = self._clock()
        task.updated_at = now
        return TaskEvent(
            event_id=new_event_id(),
            task_id=task.task_id,
            server=self.server_name,
            tool=task.tool,
            type=type_,
            seq=task.seq,
            ts=now,
            payload=payload,
        )

    def _recover(self, journal: TaskJournal) -> None:
        """Apply what the journal held (see "Task journal" in :mod:`robot_mcp_kit.tasks`)."""
        recovered = journal.recover(self.max_finished_retained, self.max_events_retained)
        for info, seq in recovered.finished + recovered.running:
            owner = recovered.owners.get(info.task_id, "")
            self._tasks[info.task_id] = TaskRecord.from_info(info, seq, owner)
        for event in recovered.events:
            task = self._tasks[event.task_id]
            last = self._retention.last_seq(task.task_id)
            if event.seq <= task.seq and (last is None or last < event.seq):
                self._retention.retain(task.task_id, event)
        for info, _ in recovered.finished:
            self._finished.append(info.task_id)
        for info, _ in recovered.running:
            self._interrupt(journal, self._tasks[info.task_id])
        if recovered.finished or recovered.running:
            _log.warning(
                "task_journal_restored",
                journal=str(journal.path),
                tasks=len(recovered.finished) + len(recovered.running),
                interrupted=len(recovered.running),
            )

    def _interrupt(self, journal: TaskJournal, task: TaskRecord) -> None:
        """Finish a task the last process died under: failed, ``INTERRUPTED``, next seq.

        Through :meth:`_finish` and :meth:`_next_event` like any failure; the event goes
        to the journal (committed, pending), whose owner sends it before anything new.
        """
        failure = TaskFailure(
            error_code=INTERRUPTED,
            message=_INTERRUPTED_MESSAGE,
            recoverable=True,
            suggestions=["retry"],
        )
        self._finish(task, TaskState.FAILED, failure=failure, journal=False, remember=False)
        event = self._next_event(task, "task_failed", failure.model_dump(mode="json"))
        self._retention.retain(task.task_id, event)
        journal.interrupt(event, self._info(task), event.ts.timestamp(), task.owner)
        # Only after the commit: an eviction forgets the row interrupt() just wrote.
        self._remember_finished(task)
        _log.warning(
            "task_interrupted",
            task_id=task.task_id,
            tool=task.tool,
            error_code=INTERRUPTED,
            seq=task.seq,
        )

    async def _emit(
        self,
        task: TaskRecord,
        type_: EventType,
        payload: dict[str, Any],
        *,
        terminal: bool = False,
    ) -> None:
        """Emit one event of ``task``: the one path every report and terminal event takes.

        Under the lock: allocate the next ``seq``, hand the event to the sink (so the sink
        sees one task's events in ``seq`` order), retain it and journal the task. A
        non-terminal event of a finished task is dropped (``late_event_dropped``).
        """
        async with self._lock:
            if task.state != TaskState.RUNNING and not terminal:
                _log.warning(
                    "late_event_dropped",
                    task_id=task.task_id,
                    state=task.state.value,
                    type=type_,
                )
                return
            event = self._next_event(task, type_, payload)
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
            if self._tasks.get(task.task_id) is not task:
                # A terminal event of a task already evicted (max_finished_retained=0):
                # sent, but neither retained nor journalled, or both would leak.
                return
            self._retention.retain(task.task_id, event)
            if self.journal is not None:
                self.journal.save(self._info(task), task.seq, task.owner)

    def _finish(
        self,
        task: TaskRecord,
        state: TaskState,
        *,
        result: dict[str, Any] | None = None,
        failure: TaskFailure | None = None,
        journal: bool = True,
        remember: bool = True,
    ) -> bool:
        """Move ``task`` to a terminal state; False if it already was terminal.

        The new state is journalled unless ``journal`` is False or it is a cancellation
        by :meth:`aclose` (those tasks stay ``running`` in the journal, see
        :mod:`robot_mcp_kit.tasks`). ``remember=False`` leaves the finished-task bound
        (and its evictions) to the caller.
        """
        if task.state != TaskState.RUNNING:
            return False
        state = TaskState(state)
        task.state = state
        task.result = result
        task.failure = failure
        task.updated_at = self._clock()
        self._counts[state] += 1
        closing_cancel = state == TaskState.CANCELLED and self._closing
        if journal and self.journal is not None and not closing_cancel:
            self.journal.save(self._info(task), task.seq, task.owner)
        if remember and not closing_cancel:
            # A closing cancel is not remembered either: an eviction would forget the
            # journal row the next start reports INTERRUPTED from.
            self._remember_finished(task)
        return True

    def _remember_finished(self, task: TaskRecord) -> None:
        self._finished.append(task.task_id)
        while len(self._finished) > self.max_finished_retained:
            evicted = self._finished.popleft()
            self._tasks.pop(evicted, None)
            self._retention.forget(evicted)
            if self.journal is not None:
                self.journal.forget(evicted)

    async def _run(self, task: TaskRecord, body: TaskBody) -> None:
        try:
            # The task's span (telemetry on), a child of the tool call that started it: the
            # events the body emits are posted in it, so their webhooks carry its trace.
            with span(
                f"task {task.tool}",
                {
                    "robot_mcp.server": self.server_name,
                    "robot_mcp.task.id": task.task_id,
                    "gen_ai.tool.name": task.tool,
                },
            ) as task_span:
                try:
                    await self._run_body(task, body)
                finally:
                    if task_span is not None:
                        set_attributes(
                            task_span,
                            **{
                                "robot_mcp.task.state": task.state.value,
                                "robot_mcp.task.seq": task.seq,
                            },
                        )
        finally:
            # Only now: while the terminal event is being handed over, the handle is the
            # strong reference that keeps this asyncio task alive (the loop's is weak).
            task.handle = None

    async def _run_body(self, task: TaskRecord, body: TaskBody) -> None:
        ctx = TaskContext(
            task, functools.partial(self._emit, task), max_payload_bytes=self.max_payload_bytes
        )
        try:
            outcome = await body(ctx)
        except asyncio.CancelledError:
            self._finish(task, TaskState.CANCELLED)
            return
        except TaskError as exc:
            if task.cancel_requested:
                self._finish_cancelled_anyway(task, f"raised TaskError {exc.error_code}")
                return
            failure = self._failure_of(task, exc)
            if self._finish(task, TaskState.FAILED, failure=failure):
                await self._emit(
                    task, "task_failed", failure.model_dump(mode="json"), terminal=True
                )
            return
        except Exception as exc:
            _log.exception(
                "task_body_raised",
                task_id=task.task_id,
                tool=task.tool,
                error=type(exc).__name__,
                detail=str(exc),
            )
            if task.cancel_requested:
                self._finish_cancelled_anyway(task, f"raised {type(exc).__name__}")
                return
            await self._fail_internal(task, self._unexpected_message(exc))
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
        try:
            result = json_payload(outcome, "task result", max_bytes=self.max_payload_bytes)
        except InvalidPayload as exc:
            _log.error("task_result_invalid", task_id=task.task_id, tool=task.tool, reason=str(exc))
            await self._fail_internal(task, f"{exc} This is a bug in the server.")
            return
        if self._finish(task, TaskState.SUCCEEDED, result=result):
            await self._emit(task, "task_done", {"result": result}, terminal=True)

    def _failure_of(self, task: TaskRecord, exc: TaskError) -> TaskFailure:
        """The failure a ``TaskError`` stands for, or INTERNAL if it cannot be one (a
        non-string code, a message that is not JSON): the task must finish either way."""
        try:
            failure = exc.to_failure()
            json_payload(
                failure.model_dump(mode="json"), "task failure", max_bytes=self.max_payload_bytes
            )
        except (ValueError, TypeError) as bad:
            _log.error("task_error_invalid", task_id=task.task_id, tool=task.tool, reason=str(bad))
            return TaskFailure(
                error_code="INTERNAL",
                message=f"The task raised a TaskError that cannot be reported "
                f"({type(bad).__name__}); this is a bug in the server.",
                recoverable=False,
            )
        return failure

    def _unexpected_message(self, exc: Exception) -> str:
        """The ``INTERNAL`` failure's message for ``exc``, per ``internal_error_detail``."""
        if self.internal_error_detail == "type":
            return (
                f"The task stopped on an unexpected {type(exc).__name__}; the details are "
                "in the server's log."
            )
        return str(exc) or type(exc).__name__

    async def _fail_internal(self, task: TaskRecord, message: str) -> None:
        failure = TaskFailure(error_code="INTERNAL", message=message, recoverable=False)
        if self._finish(task, TaskState.FAILED, failure=failure):
            await self._emit(task, "task_failed", failure.model_dump(mode="json"), terminal=True)

    def _finish_cancelled_anyway(self, task: TaskRecord, what: str) -> None:
        if task.state == TaskState.RUNNING:
            _log.warning(
                "task_cancelled_anyway", task_id=task.task_id, body=what, state="cancelled"
            )
        self._finish(task, TaskState.CANCELLED)

    async def _cancel_and_wait(self, tasks: builtins.list[TaskRecord]) -> None:
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
