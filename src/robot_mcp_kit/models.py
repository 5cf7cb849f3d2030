"""Wire models of the Async Task Contract (kit spec §3 and §4.1).

These are the shapes that cross the wire: the :class:`TaskEvent` body the poster sends to
the brain, the :class:`TaskInfo` that ``get_task`` / ``list_tasks`` return, and the
:class:`TaskFailure` carried by ``task_failed``. They depend on pydantic only, so a
receiver (the brain, ``fake_rvc``) can import them without the ``mcp`` extra.

Timestamps are UTC and serialize as ISO 8601 with millisecond precision and a ``Z``
suffix (DESIGN §3), e.g. ``2026-06-12T14:03:00.123Z``.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, PlainSerializer, WithJsonSchema

__all__ = [
    "SCHEMA_VERSION",
    "TASK_EVENTS_TOOL_NAME",
    "TASK_INPUT_TOOL_NAME",
    "TASK_TOOL_NAMES",
    "TERMINAL_EVENT_TYPES",
    "TERMINAL_STATES",
    "EventType",
    "InputAction",
    "InputAnswer",
    "TaskEvent",
    "TaskEventPage",
    "TaskFailure",
    "TaskInfo",
    "TaskState",
    "format_ts",
    "new_event_id",
    "reliability",
    "utc_now",
]

SCHEMA_VERSION = 1
"""Version of the TaskEvent envelope; a receiver rejects versions it does not know."""


class TaskState(StrEnum):
    """A task's state, as ``TaskInfo.state`` carries it on the wire (kit spec §4.1).

    The one definition of the states: the manager, the reconciliation tools, fake_rvc and
    the conformance suite all read it. Each member *is* its wire string
    (``TaskState.RUNNING == "running"``), so code comparing with the strings keeps working.

    .. versionchanged:: 0.1.0
       A ``StrEnum`` (was a ``Literal`` of the same four strings).
    """

    RUNNING = "running"  # the body is running; the only state a task leaves
    SUCCEEDED = "succeeded"  # the body returned its result dict; task_done was emitted
    FAILED = "failed"  # TaskError, a bug, or the process died under it; task_failed emitted
    CANCELLED = "cancelled"  # cancel_task or shutdown stopped it; no terminal event


EventType = Literal[
    "progress",
    "trigger_fired",
    "task_done",
    "task_failed",
    "watch_event",
    "input_required",
    "input_answered",
]
"""The event types; ``input_required`` / ``input_answered`` only from a task whose body
asks for input (:meth:`~robot_mcp_kit.TaskContext.request_input`, contract §11)."""

TERMINAL_STATES: frozenset[TaskState] = frozenset(
    s for s in TaskState if s is not TaskState.RUNNING
)
"""States a task never leaves: every :class:`TaskState` but ``RUNNING``."""

TASK_TOOL_NAMES: tuple[str, str, str] = ("get_task", "cancel_task", "list_tasks")
"""Names of the contract's three reconciliation tools (``register_task_tools`` adds them)."""

TASK_EVENTS_TOOL_NAME = "get_task_events"
"""The gap-repair tool ``register_task_tools`` also adds (unless ``events=False``)."""

TASK_INPUT_TOOL_NAME = "answer_task_input"
"""The tool that answers a task's input request (``register_task_tools(inputs=True)``)."""

TERMINAL_EVENT_TYPES: frozenset[str] = frozenset({"task_done", "task_failed"})
"""Event types after which a task emits nothing more (a cancelled task emits neither)."""


def utc_now() -> datetime:
    """Return the current time as an aware UTC datetime."""
    return datetime.now(UTC)


def format_ts(value: datetime) -> str:
    """Render ``value`` as UTC ISO 8601 with milliseconds and a ``Z`` suffix."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def new_event_id() -> str:
    """Return a fresh event id: a uuid4 as 32 hex characters."""
    return uuid.uuid4().hex


def reliability(successes: int, failures: int) -> float:
    """Return the Laplace-smoothed success rate ``(s + 1) / (s + f + 2)``.

    0.5 with no outcomes; it moves towards the observed rate as outcomes accumulate, and
    never reaches 0 or 1. The one formula behind a lesson's and a process document's
    reliability.

    .. versionadded:: 0.1.0
    """
    return (successes + 1) / (successes + failures + 2)


UtcTimestamp = Annotated[AwareDatetime, PlainSerializer(format_ts, return_type=str)]
"""An aware datetime that serializes as ``2026-06-12T14:03:00.123Z``."""


_WireTaskState = Annotated[
    TaskState,
    WithJsonSchema({"enum": [s.value for s in TaskState], "title": "State", "type": "string"}),
]
"""``TaskState`` with the inline JSON schema a ``Literal`` had (no ``$defs`` entry)."""


class TaskFailure(BaseModel):
    """Why a task failed, written to be read by the planner LLM.

    A machine code, one or two sentences of human text, and recovery hints.
    """

    model_config = ConfigDict(frozen=True)

    error_code: str = Field(description='Machine code, e.g. "DOOR_CLOSED", "TIMEOUT".')
    message: str = Field(description="One or two sentences, written for an LLM.")
    recoverable: bool = Field(default=True, description="False: do not replan around this.")
    suggestions: list[str] = Field(
        default_factory=list, description='Recovery hints, e.g. ["retry_after_s:300"].'
    )


InputAction = Literal["accept", "decline", "cancel"]
"""How an input request was answered, as in MCP elicitation: the person accepted (and
``content`` holds the answer), declined, or dismissed it."""


class InputAnswer(BaseModel):
    """The answer to one input request of a task (contract §11), from either face.

    ``content`` is the answer's data when ``action`` is ``"accept"`` (an object matching the
    request's schema, which the kit does not check), else empty.
    """

    model_config = ConfigDict(frozen=True)

    action: InputAction = Field(description='"accept", "decline" or "cancel".')
    content: dict[str, Any] = Field(
        default_factory=dict, description="The answer when action is accept."
    )


class TaskEvent(BaseModel):
    """One event POSTed to the brain (kit spec §3.1)."""

    model_config = ConfigDict(frozen=True)

    schema_version: int = SCHEMA_VERSION
    event_id: str = Field(min_length=1)
    task_id: str = Field(min_length=1)
    server: str = Field(min_length=1)
    tool: str
    type: EventType
    seq: int = Field(ge=1, description="Per task, starts at 1, increases by one per event.")
    ts: UtcTimestamp
    payload: dict[str, Any]


class TaskInfo(BaseModel):
    """A task's state as ``get_task`` / ``list_tasks`` report it (kit spec §4.1)."""

    task_id: str
    server: str
    tool: str
    state: _WireTaskState
    created_at: UtcTimestamp
    updated_at: UtcTimestamp
    triggers: list[dict[str, Any]] = Field(default_factory=list)
    est_duration_s: float | None = None
    progress: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    failure: TaskFailure | None = None


class TaskEventPage(BaseModel):
    """``get_task_events``' answer: a task's retained events after a seq, oldest first.

    A receiver that saw seq 4 and then 7 asks with ``after_seq=4`` and gets 5, 6, 7, ...
    The server retains a bounded number of events per task and in total (see
    :class:`~robot_mcp_kit.tasks.TaskManager`); ``first_retained_seq`` says where its
    memory begins, so a receiver can tell "not retained" from "never sent".

    .. versionadded:: 0.2.0
    """

    task_id: str
    events: list[TaskEvent] = Field(description="Events with seq > after_seq, oldest first.")
    last_seq: int = Field(description="The task's latest seq (0: it has emitted nothing).")
    first_retained_seq: int | None = Field(
        description="The oldest seq the server still retains for this task; null if none."
    )
    more: bool = Field(
        description="True when more events follow: ask again with after_seq set to the "
        "last seq of this answer."
    )
