"""The reconciliation tools of the Async Task Contract for any MCP server framework.

:func:`register_task_tools` adds ``get_task``, ``cancel_task`` and ``list_tasks``
(``docs/contract.md`` §6) to a server built on

- mcp 1.x ``mcp.server.fastmcp.FastMCP``,
- mcp 2.x ``mcp.server.mcpserver.MCPServer``, or
- standalone FastMCP (``fastmcp.FastMCP``, 2.x and later),

telling them apart by the class it is given. Every tool answers with an object, never
raises to the client, and declares an object output schema:

- ``get_task(task_id)`` → the ``TaskInfo``, or ``{"error": "not_found", "detail": ...}``.
- ``cancel_task(task_id)`` → the ``TaskInfo`` after the cancel (``state`` ``"cancelled"``);
  idempotent; a task that already finished answers with its terminal state unchanged; an
  unknown id answers ``not_found``.
- ``list_tasks(states=None)`` → ``{"tasks": [TaskInfo, ...]}``, oldest first; an unknown
  state answers ``{"error": "invalid", "detail": ...}``.
- ``get_task_events(task_id, after_seq=0)`` → a ``TaskEventPage``: the task's retained
  events with ``seq > after_seq``, oldest first, at most 200 per call (``more`` says
  whether to ask again), for a receiver repairing a ``seq`` gap. The manager
  retains 256 events per task and 10 000 in total by default (``TaskManager``'s
  ``max_events_per_task`` / ``max_events_retained``); ``first_retained_seq`` says where
  its memory begins. Unknown task: ``not_found``. Left out with ``events=False``.
- ``answer_task_input(task_id, request_id, action, content=None)`` (with ``inputs=True``,
  contract §11) → the ``TaskInfo`` once the answer reached the task's waiting
  ``ctx.request_input``; a task or request not waited on answers ``not_found``.

Every tool answers for the caller's own tasks only (contract §13, "Task ownership" in
:mod:`robot_mcp_kit.tasks`): with authentication, a task another principal started is
``not_found`` to it, exactly as an unknown id, and ``list_tasks`` leaves it out; the task
admins the manager names (``TaskManager(task_admins=...)``) see every task.

The structured content of a reply *is* that object (``structuredContent == TaskInfo``), and
its one text content is the same object as JSON, for clients that read text. The output
schema is ``{"type": "object", "anyOf": [<the answer>, <the error>]}``.

:func:`add_start_tool` registers a server's own start tool the same way (its answer a
``TaskInfo`` or an error object; an ``InvalidArgument`` it raises, a malformed trigger
among them, answers ``{"error": "invalid", ...}``), and :func:`set_server_version` makes
``serverInfo.version`` report a version of the caller's choosing (default: this kit's).

This module imports no framework at import time (a test proves ``import robot_mcp_kit``
loads none), only inside the functions, from what it is given.

.. versionchanged:: 0.1.0
   Structured results (were JSON strings in ``{"result": str}``); mcp 2.x and standalone
   FastMCP; ``cancel_task`` answers the whole ``TaskInfo``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Annotated, Any, cast

from pydantic import BaseModel, Field

from robot_mcp_kit._exceptions import InvalidArgument
from robot_mcp_kit._frameworks import (
    Framework,
    _add_tool,
    _as_object,
    before_serving,
    detect_framework,
    trace_tool_calls,
)
from robot_mcp_kit._version import __version__
from robot_mcp_kit.models import (
    TASK_EVENTS_TOOL_NAME,
    TASK_INPUT_TOOL_NAME,
    TASK_TOOL_NAMES,
    InputAction,
    TaskEventPage,
    TaskInfo,
    TaskState,
)
from robot_mcp_kit.tasks import TaskManager, current_principal

__all__ = [
    "TASK_EVENTS_TOOL_NAME",
    "TASK_TOOL_DESCRIPTIONS",
    "TASK_TOOL_NAMES",
    "Framework",
    "TaskIdArg",
    "ToolErrorReply",
    "add_start_tool",
    "detect_framework",
    "register_task_tools",
    "set_server_version",
    "trace_tool_calls",
]

_VALID_STATES: tuple[str, ...] = tuple(state.value for state in TaskState)
_GET_TASK, _CANCEL_TASK, _LIST_TASKS = TASK_TOOL_NAMES

_GET_TASK_DOC = """\
Get the status of ONE long-running task that another tool of this server already started
(that tool returned its task_id). Returns the task as an object: state (running, succeeded,
failed, cancelled), last progress, the result when it succeeded, and the failure
(error_code, message, recoverable, suggestions) when it failed; or {"error": "not_found"}
if the id is unknown (for example after a server restart). Read-only: this does NOT start
any work; use the server's other tools to start tasks."""

_CANCEL_TASK_DOC = """\
Cancel a long-running task that another tool of this server already started, by its
task_id. Returns the task with "state": "cancelled". Safe to repeat; a task that
already finished is not changed and its final state is returned instead; an unknown id
returns {"error": "not_found"}. This does NOT start any work; use the server's other
tools to start tasks."""

_LIST_TASKS_DOC = f"""\
List the long-running tasks this server knows about (tasks other tools already started),
oldest first, as {{"tasks": [...]}}. Pass states=["running"] to see only tasks still in
progress; valid states are {", ".join(_VALID_STATES)}. Read-only: this does
NOT start any work; use the server's other tools to start tasks."""


_GET_TASK_EVENTS_DOC = """\
Fetch the events of ONE long-running task that another tool of this server already
started, to fill a gap: a receiver that saw seq 4 and then seq 7 calls it with
after_seq=4 and gets events 5, 6, 7, ... (oldest first, at most 200 per call; "more": true
means call again with after_seq set to the last seq received). Answers {"task_id",
"events", "last_seq", "first_retained_seq", "more"}, or {"error": "not_found"} for an
unknown task. The server retains a bounded number of events per task (256 by default)
and in total (10 000). Read-only: this does NOT start any work; use the server's other
tools to start tasks."""

_ANSWER_TASK_INPUT_DOC = """\
Answer a question that a long-running task (started by another tool of this server) is
waiting on: its input_required event named the task_id, the request_id and what is asked
(params.message, and params.requestedSchema for the answer's content). action "accept"
with content matching that schema (e.g. {"confirm": true}); "decline" or "cancel" to say
no. Returns the task; {"error": "not_found"} when the task is unknown or is not waiting on
that request_id (already answered, or it finished). This does NOT start any work."""

TASK_TOOL_DESCRIPTIONS: Mapping[str, str] = MappingProxyType(
    {
        _GET_TASK: _GET_TASK_DOC,
        _CANCEL_TASK: _CANCEL_TASK_DOC,
        _LIST_TASKS: _LIST_TASKS_DOC,
        TASK_EVENTS_TOOL_NAME: _GET_TASK_EVENTS_DOC,
        TASK_INPUT_TOOL_NAME: _ANSWER_TASK_INPUT_DOC,
    }
)
"""The description each task tool is registered with, by tool name (read-only).

For a server that registers a variant of a task tool itself (a test double, a framework we
do not adapt) and should describe it exactly as :func:`register_task_tools` does."""

TaskIdArg = Annotated[
    str, Field(description="The task_id returned by the tool that started the task.")
]
"""The ``task_id`` argument of the task tools, with the description clients see."""
_StatesArg = Annotated[
    list[str] | None,
    Field(
        description='Only tasks in these states, e.g. ["running"]; '
        f"omit for all. Valid: {', '.join(_VALID_STATES)}."
    ),
]


class ToolErrorReply(BaseModel):
    """The object a task tool answers instead of its result: ``{"error", "detail"}``.

    ``error`` is a code (``not_found``, ``invalid``, ``unavailable``, ...); ``detail`` one or
    two sentences for the LLM.
    """

    error: str = Field(description='A code: "not_found", "invalid", "unavailable", ...')
    detail: str = Field(description="What went wrong, in a sentence or two.")


_AfterSeqArg = Annotated[
    int,
    Field(
        ge=0,
        description="Only events with a seq greater than this; 0 (the default) for all.",
    ),
]


_RequestIdArg = Annotated[
    str, Field(description="The request_id of the task's input_required event.")
]
_ActionArg = Annotated[
    InputAction,
    Field(description='"accept" (with content), "decline" or "cancel".'),
]
_ContentArg = Annotated[
    dict[str, Any] | None,
    Field(description="The answer, matching the request's requestedSchema; for accept."),
]


class TaskList(BaseModel):
    """``list_tasks``' answer: the tasks, oldest first."""

    tasks: list[TaskInfo]


def _inline_refs(node: Any, defs: dict[str, Any]) -> Any:
    """``node`` with every local ``{"$ref": "#/$defs/X"}`` replaced by ``X`` (no cycles here)."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline_refs(defs[ref.removeprefix("#/$defs/")], defs)
        return {k: _inline_refs(v, defs) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [_inline_refs(v, defs) for v in node]
    return node


def _schema_of_either(answer: type[BaseModel]) -> dict[str, Any]:
    """``{"type": "object", "anyOf": [answer, ToolErrorReply]}``, self-contained (no $ref)."""
    from pydantic import TypeAdapter

    adapter: TypeAdapter[Any] = TypeAdapter(cast("Any", answer | ToolErrorReply))
    schema = adapter.json_schema(mode="serialization")
    inlined: dict[str, Any] = _inline_refs(schema, schema.get("$defs", {}))
    return {"type": "object", **inlined}


TASK_INFO_OUTPUT_SCHEMA: dict[str, Any] = _schema_of_either(TaskInfo)
"""Output schema of ``get_task``, ``cancel_task`` and start tools: a TaskInfo or an error."""
TASK_LIST_OUTPUT_SCHEMA: dict[str, Any] = _schema_of_either(TaskList)
"""Output schema of ``list_tasks``: ``{"tasks": [...]}`` or an error."""
TASK_EVENTS_OUTPUT_SCHEMA: dict[str, Any] = _schema_of_either(TaskEventPage)
"""Output schema of ``get_task_events``: a ``TaskEventPage`` or an error."""


def _error(code: str, detail: str) -> dict[str, Any]:
    return ToolErrorReply(error=code, detail=detail).model_dump(mode="json")


def add_start_tool(
    server: Any,
    fn: Callable[..., TaskInfo | ToolErrorReply | dict[str, Any]]
    | Callable[..., Awaitable[TaskInfo | ToolErrorReply | dict[str, Any]]],
    *,
    name: str | None = None,
    description: str | None = None,
) -> None:
    """Register a start tool whose answer is a ``TaskInfo`` or an error object.

    ``fn`` (sync or async) validates its arguments, calls ``manager.start(...)`` and returns
    the ``TaskInfo``. To refuse bad arguments it raises
    :class:`~robot_mcp_kit.InvalidArgument` (``raise InvalidArgument("speed must be > 0,
    got -1.")``), or returns a :class:`ToolErrorReply` (or a dict ``{"error": ...,
    "detail": ...}``). Whatever ``InvalidArgument`` escapes ``fn`` — its own, or
    ``manager.start``'s :class:`~robot_mcp_kit.InvalidTrigger` for a malformed trigger —
    is answered ``{"error": "invalid", "detail": <its message>}``, the same on mcp 1.x,
    mcp 2.x and standalone FastMCP, and no task starts. The tool's output schema admits
    the ``TaskInfo`` and the error, and the client gets the object as structured content.

    Raises:
        TypeError: ``server`` is not a supported framework (see :func:`detect_framework`).
    """

    @functools.wraps(fn)
    async def start(**kwargs: Any) -> Any:
        try:
            value = fn(**kwargs)
            return await value if inspect.isawaitable(value) else value
        except InvalidArgument as exc:
            return ToolErrorReply(error="invalid", detail=str(exc))

    _add_tool(
        server,
        start,
        name=name or fn.__name__,
        description=description if description is not None else inspect.getdoc(fn),
        annotations=None,
        output_schema=TASK_INFO_OUTPUT_SCHEMA,
    )


def set_server_version(server: Any, version: str = __version__) -> None:
    """Make the server report ``version`` as ``serverInfo.version`` at ``initialize``.

    mcp 1.x ``FastMCP`` otherwise reports the mcp SDK's version, and mcp 2.x / standalone
    FastMCP report what their constructor was given.

    Raises:
        TypeError: ``server`` is not a supported framework (see :func:`detect_framework`).
    """
    # The low-level server each framework wraps reads .version at initialize.
    lowlevel = "_lowlevel_server" if detect_framework(server) == "mcp2" else "_mcp_server"
    getattr(server, lowlevel).version = version


def register_task_tools(
    server: Any, manager: TaskManager, *, events: bool = True, inputs: bool = False
) -> None:
    """Add ``get_task`` / ``cancel_task`` / ``list_tasks`` (contract §6) to ``server``.

    Also ``get_task_events`` (gap repair) unless ``events=False``, and
    ``answer_task_input(task_id, request_id, action, content)`` (contract §11) with
    ``inputs=True``, for a server whose task bodies ask for input
    (``ctx.request_input``): it answers the ``TaskInfo``, or ``not_found`` for a task or
    request the server is not waiting on, or ``invalid``.

    ``server`` is an mcp 1.x ``FastMCP``, an mcp 2.x ``MCPServer`` or a standalone
    ``fastmcp.FastMCP``. The tool descriptions tell the LLM these are for the status and
    cancellation of long-running tasks started by the server's other tools, not for
    starting work. Not thread-safe; call it once per server while building it.

    Each tool answers the calling principal for its own tasks only (another principal's
    task is ``not_found``, as an unknown id; ``list_tasks`` leaves it out), unless the
    manager names the caller's client among its ``task_admins``.

    The manager's poster starts delivering when ``server`` starts serving (its ``run()``
    or ``run_*_async()``), and at the latest at the first call of one of these tools: with
    a durable outbox, what a previous process left, the ``INTERRUPTED`` reports of its
    running tasks first, goes out then without waiting for a new task
    (``docs/delivery.md``). It also gives every tool call of ``server`` a SERVER span
    while telemetry is on (:func:`trace_tool_calls`).

    Raises:
        TypeError: ``server`` is none of those.
        ImportError: no MCP framework is installed (the ``mcp`` extra is missing).
    """
    trace_tool_calls(server)

    async def start_delivery() -> None:
        # The sink's own start (EventPoster.start, idempotent and cheap once bound).
        start = getattr(manager.poster, "start", None)
        if callable(start):
            await start()

    before_serving(server, start_delivery)

    async def get_task(task_id: TaskIdArg) -> dict[str, Any]:
        await start_delivery()
        info = manager.get(task_id, caller=current_principal())
        if info is None:
            return _error(
                "not_found",
                f"No task with id {task_id!r} on server {manager.server_name!r}; it never "
                "existed, was forgotten after finishing, or the server restarted.",
            )
        return _as_object(info)

    async def cancel_task(task_id: TaskIdArg) -> dict[str, Any]:
        await start_delivery()
        info = await manager.cancel(task_id, caller=current_principal())
        if info is None:
            return _error(
                "not_found",
                f"No task with id {task_id!r} on server {manager.server_name!r}; nothing "
                "was cancelled.",
            )
        return _as_object(info)

    async def list_tasks(states: _StatesArg = None) -> dict[str, Any]:
        await start_delivery()
        if states is not None:
            unknown = [s for s in states if s not in _VALID_STATES]
            if unknown:
                return _error(
                    "invalid",
                    f"Unknown task state(s) {unknown!r}; valid states are "
                    f"{list(_VALID_STATES)!r}, or omit states for all tasks.",
                )
        infos = manager.list(cast("list[TaskState] | None", states), caller=current_principal())
        return _as_object(TaskList(tasks=infos))

    async def get_task_events(task_id: TaskIdArg, after_seq: _AfterSeqArg = 0) -> dict[str, Any]:
        await start_delivery()
        page = manager.events(task_id, after_seq, caller=current_principal())
        if page is None:
            return _error(
                "not_found",
                f"No task with id {task_id!r} on server {manager.server_name!r}; it never "
                "existed, was forgotten after finishing, or the server restarted without "
                "its outbox.",
            )
        return _as_object(page)

    async def answer_task_input(
        task_id: TaskIdArg,
        request_id: _RequestIdArg,
        action: _ActionArg,
        content: _ContentArg = None,
    ) -> dict[str, Any]:
        await start_delivery()
        caller = current_principal()
        answer = {"action": action, "content": {} if content is None else content}
        try:
            answered = await manager.answer_input(task_id, {request_id: answer}, caller=caller)
        except InvalidArgument as exc:
            return _error("invalid", str(exc))
        info = manager.get(task_id, caller=caller)
        if answered is None or info is None:
            return _error(
                "not_found",
                f"No task with id {task_id!r} on server {manager.server_name!r}; nothing was "
                "answered.",
            )
        if request_id not in answered:
            return _error(
                "not_found",
                f"Task {task_id!r} is not waiting on input request {request_id!r} (it was "
                "already answered, never asked, or the task finished); nothing was answered.",
            )
        return _as_object(info)

    read_only = {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False}
    _add_tool(
        server,
        get_task,
        name=_GET_TASK,
        description=_GET_TASK_DOC,
        annotations={"title": "Get task status", **read_only},
        output_schema=TASK_INFO_OUTPUT_SCHEMA,
    )
    _add_tool(
        server,
        cancel_task,
        name=_CANCEL_TASK,
        description=_CANCEL_TASK_DOC,
        annotations={
            "title": "Cancel a running task",
            "readOnlyHint": False,
            "destructiveHint": True,
            "idempotentHint": True,
            "openWorldHint": False,
        },
        output_schema=TASK_INFO_OUTPUT_SCHEMA,
    )
    _add_tool(
        server,
        list_tasks,
        name=_LIST_TASKS,
        description=_LIST_TASKS_DOC,
        annotations={"title": "List tasks", **read_only},
        output_schema=TASK_LIST_OUTPUT_SCHEMA,
    )
    if inputs:
        _add_tool(
            server,
            answer_task_input,
            name=TASK_INPUT_TOOL_NAME,
            description=_ANSWER_TASK_INPUT_DOC,
            annotations={
                "title": "Answer a task's question",
                "readOnlyHint": False,
                "destructiveHint": False,
                "idempotentHint": False,
                "openWorldHint": False,
            },
            output_schema=TASK_INFO_OUTPUT_SCHEMA,
        )
    if events:
        _add_tool(
            server,
            get_task_events,
            name=TASK_EVENTS_TOOL_NAME,
            description=_GET_TASK_EVENTS_DOC,
            annotations={"title": "Get a task's events", **read_only},
            output_schema=TASK_EVENTS_OUTPUT_SCHEMA,
        )
