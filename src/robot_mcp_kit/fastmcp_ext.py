"""The reconciliation tools of the Async Task Contract for FastMCP servers (kit spec §3.3, §4.4).

:func:`register_task_tools` adds ``get_task``, ``cancel_task`` and ``list_tasks`` to any
``mcp.server.fastmcp.FastMCP`` instance. Every tool returns a JSON string and never raises
to the client:

- ``get_task(task_id)`` → the ``TaskInfo``, or ``{"error": "not_found", "detail": ...}``.
- ``cancel_task(task_id)`` → ``{"task_id": ..., "state": "cancelled"}``; idempotent; a task
  that already finished answers with its terminal state unchanged; an unknown id answers
  ``not_found``.
- ``list_tasks(states=None)`` → ``{"tasks": [TaskInfo, ...]}``, oldest first; an unknown
  state answers ``{"error": "invalid", "detail": ...}``.

This module imports ``mcp`` only inside :func:`register_task_tools`, so importing it (and
the rest of the kit) works without the ``mcp`` extra.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any, cast

from pydantic import Field

from robot_mcp_kit.models import TaskState
from robot_mcp_kit.tasks import TaskManager

if TYPE_CHECKING:
    from mcp.server.fastmcp import FastMCP

__all__ = ["TASK_TOOL_NAMES", "register_task_tools"]

TASK_TOOL_NAMES: tuple[str, str, str] = ("get_task", "cancel_task", "list_tasks")
"""Names of the tools :func:`register_task_tools` adds."""

_VALID_STATES = ("running", "succeeded", "failed", "cancelled")

_GET_TASK_DOC = """\
Get the status of ONE long-running task that another tool of this server already started
(that tool returned its task_id). Returns the task as JSON: state (running, succeeded,
failed, cancelled), last progress, the result when it succeeded, and the failure
(error_code, message, recoverable, suggestions) when it failed; or {"error": "not_found"}
if the id is unknown (for example after a server restart). Read-only: this does NOT start
any work; use the server's other tools to start tasks."""

_CANCEL_TASK_DOC = """\
Cancel a long-running task that another tool of this server already started, by its
task_id. Returns {"task_id": ..., "state": "cancelled"}. Safe to repeat; a task that
already finished is not changed and its final state is returned instead; an unknown id
returns {"error": "not_found"}. This does NOT start any work; use the server's other
tools to start tasks."""

_LIST_TASKS_DOC = """\
List the long-running tasks this server knows about (tasks other tools already started),
oldest first, as {"tasks": [...]}. Pass states=["running"] to see only tasks still in
progress; valid states are running, succeeded, failed, cancelled. Read-only: this does
NOT start any work; use the server's other tools to start tasks."""


_TaskIdArg = Annotated[
    str, Field(description="The task_id returned by the tool that started the task.")
]
_StatesArg = Annotated[
    list[str] | None,
    Field(
        description='Only tasks in these states, e.g. ["running"]; '
        "omit for all. Valid: running, succeeded, failed, cancelled."
    ),
]


def _error(code: str, detail: str) -> str:
    return json.dumps({"error": code, "detail": detail})


def register_task_tools(mcp: FastMCP[Any], manager: TaskManager) -> None:
    """Add ``get_task`` / ``cancel_task`` / ``list_tasks`` (§3.3) to a FastMCP server.

    The tool descriptions tell the LLM these are for the status and cancellation of
    long-running tasks started by the server's other tools, not for starting work.

    Raises:
        ImportError: the ``mcp`` extra is not installed.
    """
    from mcp.types import ToolAnnotations

    async def get_task(task_id: _TaskIdArg) -> str:
        info = manager.get(task_id)
        if info is None:
            return _error(
                "not_found",
                f"No task with id {task_id!r} on server {manager.server_name!r}; it never "
                "existed, was forgotten after finishing, or the server restarted.",
            )
        return info.model_dump_json()

    async def cancel_task(task_id: _TaskIdArg) -> str:
        info = await manager.cancel(task_id)
        if info is None:
            return _error(
                "not_found",
                f"No task with id {task_id!r} on server {manager.server_name!r}; nothing "
                "was cancelled.",
            )
        return json.dumps({"task_id": info.task_id, "state": info.state})

    async def list_tasks(states: _StatesArg = None) -> str:
        if states is not None:
            unknown = [s for s in states if s not in _VALID_STATES]
            if unknown:
                return _error(
                    "invalid",
                    f"Unknown task state(s) {unknown!r}; valid states are "
                    f"{list(_VALID_STATES)!r}, or omit states for all tasks.",
                )
        infos = manager.list(cast("list[TaskState] | None", states))
        return json.dumps({"tasks": [info.model_dump(mode="json") for info in infos]})

    mcp.add_tool(
        get_task,
        name="get_task",
        description=_GET_TASK_DOC,
        annotations=ToolAnnotations(
            title="Get task status", readOnlyHint=True, idempotentHint=True, openWorldHint=False
        ),
    )
    mcp.add_tool(
        cancel_task,
        name="cancel_task",
        description=_CANCEL_TASK_DOC,
        annotations=ToolAnnotations(
            title="Cancel a running task",
            readOnlyHint=False,
            destructiveHint=True,
            idempotentHint=True,
            openWorldHint=False,
        ),
    )
    mcp.add_tool(
        list_tasks,
        name="list_tasks",
        description=_LIST_TASKS_DOC,
        annotations=ToolAnnotations(
            title="List tasks", readOnlyHint=True, idempotentHint=True, openWorldHint=False
        ),
    )
