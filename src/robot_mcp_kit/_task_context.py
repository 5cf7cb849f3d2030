"""What a task body sees: its :class:`TaskContext`, :class:`TaskError` and :data:`TaskBody`.

The body reports through the context (``progress``, ``fire_trigger``, ``emit``), raises
:class:`TaskError` to fail with structured info, and has the :data:`TaskBody` shape.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from robot_mcp_kit._payload import DEFAULT_MAX_PAYLOAD_BYTES, json_payload, progress_payload
from robot_mcp_kit._task_state import PendingInput
from robot_mcp_kit._triggers import progress_triggers_due, trigger_key
from robot_mcp_kit.models import EventType, InputAnswer, TaskFailure, TaskState

if TYPE_CHECKING:
    from robot_mcp_kit._task_state import TaskRecord

ELICITATION_METHOD = "elicitation/create"
"""The MCP request an input request stands for (a form elicitation)."""
_EMPTY_FORM: dict[str, Any] = {"type": "object", "properties": {}}

__all__ = ["ELICITATION_METHOD", "Emit", "TaskBody", "TaskContext", "TaskError"]

Emit = Callable[[EventType, dict[str, Any]], Awaitable[None]]
"""Emits one event of the context's task: ``await emit(type, payload)``.

The manager binds it to the task; it allocates the ``seq`` and hands the event on, and
drops (with a WARNING) a non-terminal event of a task that already finished.
"""


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


class TaskContext:
    """Handed to every task body; the body's only channel to the outside.

    All methods are coroutine-safe (call them from the body or from tasks the body
    spawns). Once the task has reached a terminal state, reports are dropped with a
    WARNING: nothing is emitted after ``task_done`` / ``task_failed``.

    Every payload must be one JSON document of at most ``max_payload_bytes`` (see
    :mod:`robot_mcp_kit._payload`); one that is not raises
    :class:`~robot_mcp_kit.InvalidPayload` from the call, naming the key path and the
    reason, and nothing is recorded or sent.
    """

    __slots__ = ("_emit", "_max_bytes", "_task", "task_id", "tool", "triggers")

    def __init__(
        self, task: TaskRecord, emit: Emit, *, max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    ) -> None:
        self._emit = emit
        self._max_bytes = max_payload_bytes
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
        ``"repeat": true``), after the progress event. A ``percent`` that is neither a
        number nor null (``"75"``, ``True``) raises
        :class:`~robot_mcp_kit.InvalidPayload`, and nothing is recorded or sent.
        """
        payload = progress_payload(payload, max_bytes=self._max_bytes)
        task = self._task
        if task.state == TaskState.RUNNING:
            task.progress = dict(payload)
        await self._emit("progress", payload)
        for trigger in progress_triggers_due(task.triggers, payload):
            await self.fire_trigger(trigger, {"percent": payload["percent"]})

    async def fire_trigger(
        self, trigger: dict[str, Any], extra: dict[str, Any] | None = None
    ) -> None:
        """Emit ``trigger_fired`` with payload ``{"trigger": trigger, **extra}``.

        At most once per (task, trigger) — triggers are compared by content — unless the
        trigger carries ``"repeat": true``. A repeated call for a non-repeating trigger
        is a silent no-op, so bodies may call this on every tick while the condition holds.
        """
        trigger = json_payload(trigger, "trigger", max_bytes=self._max_bytes)
        payload: dict[str, Any] = {"trigger": trigger}
        for name, value in (extra or {}).items():
            if name != "trigger":
                payload[name] = value
        payload = json_payload(payload, "trigger_fired payload", max_bytes=self._max_bytes)
        task = self._task
        if trigger.get("repeat") is not True:
            key = trigger_key(trigger)
            if key in task.fired:
                return
            task.fired.add(key)
        await self._emit("trigger_fired", payload)

    async def emit(self, payload: dict[str, Any]) -> None:
        """Emit a ``watch_event`` carrying ``payload`` (for long-lived watcher tasks)."""
        payload = json_payload(payload, "watch_event payload", max_bytes=self._max_bytes)
        await self._emit("watch_event", payload)

    async def request_input(
        self, message: str, *, schema: dict[str, Any] | None = None
    ) -> InputAnswer:
        """Ask the caller for input and wait for the answer (contract §11).

        ``message`` says what is asked, for a person (``"Move the arm to the shelf?"``);
        ``schema`` is the flat JSON schema of the answer's ``content`` (an MCP elicitation
        form, e.g. ``{"type": "object", "properties": {"confirm": {"type": "boolean"}},
        "required": ["confirm"]}``; none asks for a bare accept or decline).

        The request gets an id unique within the task (``input-1``, ``input-2``, ...) and
        is shown both ways: an ``input_required`` event
        ``{"request_id", "method": "elicitation/create", "params"}`` to the brain, answered
        with the ``answer_task_input`` tool; and, to a host speaking the MCP tasks
        extension, ``input_required`` with ``inputRequests`` on ``tasks/get``, answered
        with ``tasks/update``. The first answer wins and is announced with an
        ``input_answered`` event. Several requests may wait at once
        (``asyncio.gather``); the task stays ``running`` meanwhile. Cancelling the task
        cancels the wait. The kit does not check ``content`` against ``schema``.

        Raises:
            InvalidPayload: ``message`` or ``schema`` is not JSON within the payload bound.
            asyncio.CancelledError: the task was cancelled while waiting.
        """
        if not isinstance(message, str):
            raise TypeError(f"message must be a str, got {type(message).__name__}.")
        params = json_payload(
            {
                "mode": "form",
                "message": message,
                "requestedSchema": _EMPTY_FORM if schema is None else schema,
            },
            "input request",
            max_bytes=self._max_bytes,
        )
        task = self._task
        task.inputs_asked += 1
        request_id = f"input-{task.inputs_asked}"
        request: dict[str, Any] = {"method": ELICITATION_METHOD, "params": params}
        answer: asyncio.Future[InputAnswer] = asyncio.get_running_loop().create_future()
        task.inputs[request_id] = PendingInput(request, answer)
        try:
            await self._emit("input_required", {"request_id": request_id, **request})
            return await answer
        finally:
            task.inputs.pop(request_id, None)

    def raise_if_cancelled(self) -> None:
        """Cooperative cancellation checkpoint: raise ``CancelledError`` if cancel was asked.

        asyncio also delivers the cancellation at the body's next ``await``; this lets a
        body that computes without awaiting stop early.
        """
        if self._task.cancel_requested:
            raise asyncio.CancelledError(f"task {self.task_id} was cancelled")


TaskBody = Callable[[TaskContext], Awaitable[dict[str, Any]]]
"""A task body: an async function taking the context and returning the result dict."""
