"""The MCP tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663) over the kit's tasks.

The webhook face of a task (the ``TaskInfo`` answer, signed events to the brain, the
reconciliation tools) is the Async Task Contract (``docs/contract.md``). :class:`NativeTasks`
adds the face a host speaking the tasks extension expects, over the *same* tasks of the
same :class:`~robot_mcp_kit.TaskManager`::

    native = NativeTasks(runtime.manager, required_tools=["calibrate"])
    mcp = MCPServer("navigation", extensions=[native.extension()])   # mcp >= 2.3

A start tool is declared once, as today (it calls ``manager.start`` and answers the
``TaskInfo``). A ``tools/call`` of it from a caller that declared the extension (in the
request's ``_meta`` client capabilities) on the 2026-07-28 protocol is answered with a
``CreateTaskResult`` instead, once the task is in the manager; ``tasks/get``,
``tasks/update`` and ``tasks/cancel`` then read and drive the manager's task, while the
brain keeps getting its signed events for it. A caller that declared nothing gets
today's answers; a tool named in ``required_tools`` (one that cannot serve without a task)
answers it ``-32021`` (missing required client capability) instead of running.

How a task reads natively (``tasks/get``), from its ``TaskInfo``:

=======================================  ==================================================
kit task                                 native ``DetailedTask``
=======================================  ==================================================
``running``                              ``working``; ``statusMessage`` from the latest
                                         progress
``running``, waiting on input            ``input_required`` with ``inputRequests``
                                         (``ctx.request_input``), answered by
                                         ``tasks/update``
``succeeded``                            ``completed``; ``result`` the ``CallToolResult``
                                         of the result dict (text JSON + structured)
``failed`` by a ``TaskError``            ``completed``; ``result`` with ``isError: true``
                                         and the ``TaskFailure`` as structured content
``failed`` ``INTERNAL`` / ``INTERRUPTED``  ``failed``; ``error`` ``{"code": -32603,
                                         "message", "data": TaskFailure}``
``cancelled``                            ``cancelled``
=======================================  ==================================================

Task ids: ``<kit task id>.<22 characters>``, the characters an HMAC-SHA256 of the kit id
and the caller's principal (its access token's client, issuer and subject; none without
auth) under :attr:`NativeTasks.id_secret`, so an id is unguessable and resolves only for
the caller that created the task: anyone else gets ``-32602``, as for an unknown id.
``ttlMs`` is ``null``: the kit forgets a finished task by count
(``max_finished_retained``), not by time.

This module imports no MCP framework; :meth:`NativeTasks.extension` imports mcp 2.x.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Collection, Mapping
from typing import Any

from robot_mcp_kit._exceptions import ConfigurationError, InvalidArgument
from robot_mcp_kit._native_wire import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    KIT_TASK_ID_META_KEY,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    TASKS_EXTENSION_ID,
    NativeTaskError,
    missing_capability,
)
from robot_mcp_kit.models import TaskFailure, TaskInfo, TaskState, format_ts
from robot_mcp_kit.tasks import INTERRUPTED, TaskManager

__all__ = [
    "DEFAULT_POLL_INTERVAL_MS",
    "HEADER_MISMATCH",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "KIT_TASK_ID_META_KEY",
    "MISSING_REQUIRED_CLIENT_CAPABILITY",
    "POLL_INTERVAL_ENV",
    "PROTOCOL_FAILURE_CODES",
    "SECRET_ENV",
    "TASKS_EXTENSION_ID",
    "NativeTaskError",
    "NativeTasks",
    "missing_capability",
]

DEFAULT_POLL_INTERVAL_MS = 1000
"""``pollIntervalMs`` advertised to hosts unless :data:`POLL_INTERVAL_ENV` or the
constructor says otherwise."""
POLL_INTERVAL_ENV = "MCP_TASKS_POLL_INTERVAL_MS"
SECRET_ENV = "MCP_TASKS_SECRET"  # noqa: S105 (a variable name, not a secret)
"""Environment variable holding the task-id secret (keep it to keep ids valid across a
restart with an outbox); unset: a random secret per process."""

PROTOCOL_FAILURE_CODES: frozenset[str] = frozenset({"INTERNAL", INTERRUPTED})
"""Failure codes that are protocol-level (``failed``), not a tool's error (``completed``
with ``isError``): the kit's own, for a body that raised unexpectedly or a restart."""

_TOKEN_BYTES = 16
_MIN_SECRET_BYTES = 16


def _poll_interval_from_env() -> int:
    text = os.environ.get(POLL_INTERVAL_ENV, "").strip()
    if not text:
        return DEFAULT_POLL_INTERVAL_MS
    try:
        value = int(text)
    except ValueError:
        raise ConfigurationError(
            f"{POLL_INTERVAL_ENV} must be a whole number of milliseconds > 0, got {text!r}."
        ) from None
    return value


class NativeTasks:
    """The tasks-extension face of one :class:`~robot_mcp_kit.TaskManager`.

    Args:
        manager: the manager whose tasks are served (the one task store).
        required_tools: start tools that cannot serve a caller without the extension
            (they answer ``-32021``); every other start tool answers such a caller today's
            ``TaskInfo``.
        id_secret: the key of the task-id HMAC (at least 16 bytes); by default
            ``MCP_TASKS_SECRET`` (UTF-8), else random per process.
        poll_interval_ms: the ``pollIntervalMs`` hosts are given; by default
            ``MCP_TASKS_POLL_INTERVAL_MS``, else 1000.

    Raises:
        ConfigurationError: a secret shorter than 16 bytes or a poll interval that is not
            a whole number > 0 (the message names the setting).
    """

    def __init__(
        self,
        manager: TaskManager,
        *,
        required_tools: Collection[str] = (),
        id_secret: bytes | None = None,
        poll_interval_ms: int | None = None,
    ) -> None:
        if id_secret is None:
            env_secret = os.environ.get(SECRET_ENV, "")
            id_secret = env_secret.encode() if env_secret else secrets.token_bytes(32)
        if len(id_secret) < _MIN_SECRET_BYTES:
            raise ConfigurationError(
                f"the task-id secret ({SECRET_ENV}) must be at least {_MIN_SECRET_BYTES} "
                f"bytes, got {len(id_secret)}."
            )
        if poll_interval_ms is None:
            poll_interval_ms = _poll_interval_from_env()
        if isinstance(poll_interval_ms, bool) or not (
            isinstance(poll_interval_ms, int) and poll_interval_ms > 0
        ):
            raise ConfigurationError(
                f"poll_interval_ms ({POLL_INTERVAL_ENV}) must be a whole number of "
                f"milliseconds > 0, got {poll_interval_ms!r}."
            )
        self.manager = manager
        self.required_tools: frozenset[str] = frozenset(required_tools)
        self.id_secret = id_secret
        self.poll_interval_ms = poll_interval_ms

    def extension(self) -> Any:
        """The mcp 2.x extension to pass as ``MCPServer(extensions=[...])`` (mcp >= 2.3).

        Raises:
            ImportError: mcp 2.3 or later is not installed.
        """
        try:
            from robot_mcp_kit._native_mcp2 import TasksExtension
        except ImportError as exc:
            raise ImportError(
                "NativeTasks.extension() needs mcp 2.3 or later (MCPServer's extensions, "
                f"protocol 2026-07-28): pip install 'mcp>=2.3,<3' ({exc})."
            ) from exc
        return TasksExtension(self)

    # -- ids ------------------------------------------------------------------------

    def native_id(self, task_id: str, owner: str) -> str:
        """The task id a caller with principal ``owner`` knows the kit task ``task_id`` by."""
        return f"{task_id}.{self._token(task_id, owner)}"

    def _token(self, task_id: str, owner: str) -> str:
        mac = hmac.new(self.id_secret, f"{task_id}\n{owner}".encode(), hashlib.sha256)
        return base64.urlsafe_b64encode(mac.digest()[:_TOKEN_BYTES]).decode().rstrip("=")

    def _resolve(self, native_id: object, owner: str) -> TaskInfo:
        """The kit task behind ``native_id`` for ``owner``; -32602 for anything else."""
        if isinstance(native_id, str) and "." in native_id:
            task_id, token = native_id.rsplit(".", 1)
            if hmac.compare_digest(token, self._token(task_id, owner)):
                info = self.manager.get(task_id)
                if info is not None:
                    return info
        raise NativeTaskError(
            INVALID_PARAMS,
            f"Unknown or expired task {str(native_id)[:120]!r}: no task of yours has this id "
            "(it never existed, was forgotten after finishing, or the server restarted).",
        )

    # -- the tools/call face --------------------------------------------------------

    def task_started(self, tool: str, answer: Mapping[str, Any] | None) -> TaskInfo | None:
        """The kit task a start tool's answer is the ``TaskInfo`` of, else None.

        ``answer`` is the tool's structured answer; it names a task of this manager,
        started by ``tool``.
        """
        if not isinstance(answer, Mapping):
            return None
        task_id = answer.get("task_id")
        if not isinstance(task_id, str) or answer.get("server") != self.manager.server_name:
            return None
        info = self.manager.get(task_id)
        if (
            info is None
            or info.tool != tool
            or answer.get("created_at") != format_ts(info.created_at)
        ):
            return None
        return info

    def created(self, info: TaskInfo, owner: str) -> dict[str, Any]:
        """The ``CreateTaskResult`` for a task just started (its seed state, no payload)."""
        detailed = self._task(info, owner)
        return {"resultType": "task", **detailed}

    # -- tasks/* ----------------------------------------------------------------------

    def get(self, native_id: object, owner: str) -> dict[str, Any]:
        """``tasks/get``: the ``DetailedTask`` (``resultType`` is the server's to add).

        Raises:
            NativeTaskError: -32602 for an unknown, expired or another caller's id.
        """
        info = self._resolve(native_id, owner)
        detailed = self._task(info, owner)
        state = info.state
        if state == TaskState.RUNNING:
            pending = self.manager.pending_inputs(info.task_id) or {}
            if pending:
                detailed["status"] = "input_required"
                detailed["inputRequests"] = pending
        elif state == TaskState.SUCCEEDED:
            detailed["result"] = _tool_result(info.result or {}, is_error=False)
        elif state == TaskState.FAILED:
            failure = info.failure or TaskFailure(error_code="INTERNAL", message="failed")
            failure_dump = failure.model_dump(mode="json")
            if failure.error_code in PROTOCOL_FAILURE_CODES:
                detailed["error"] = {
                    "code": INTERNAL_ERROR,
                    "message": failure.message,
                    "data": failure_dump,
                }
            else:
                detailed["result"] = _tool_result(failure_dump, is_error=True)
        return detailed

    async def update(self, native_id: object, owner: str, responses: object) -> None:
        """``tasks/update``: answer the task's pending input requests (others ignored).

        Raises:
            NativeTaskError: -32602 for an unknown id, ``inputResponses`` that is not an
                object, or an answer to a pending request that is not
                ``{"action", "content"}``.
        """
        info = self._resolve(native_id, owner)
        if not isinstance(responses, Mapping):
            raise NativeTaskError(
                INVALID_PARAMS,
                "inputResponses must be an object mapping input request keys to responses.",
            )
        try:
            await self.manager.answer_input(info.task_id, responses)
        except InvalidArgument as exc:
            raise NativeTaskError(INVALID_PARAMS, str(exc)) from None

    async def cancel(self, native_id: object, owner: str) -> None:
        """``tasks/cancel``: today's cancel path; a finished task is left as it is.

        Raises:
            NativeTaskError: -32602 for an unknown, expired or another caller's id.
        """
        info = self._resolve(native_id, owner)
        await self.manager.cancel(info.task_id)

    def _task(self, info: TaskInfo, owner: str) -> dict[str, Any]:
        """The ``Task`` fields of ``info`` (status by state, no payload)."""
        status = _STATUS[info.state]
        if info.state == TaskState.FAILED and (
            info.failure is None or info.failure.error_code not in PROTOCOL_FAILURE_CODES
        ):
            status = "completed"
        task: dict[str, Any] = {
            "taskId": self.native_id(info.task_id, owner),
            "status": status,
            "createdAt": format_ts(info.created_at),
            "lastUpdatedAt": format_ts(info.updated_at),
            "ttlMs": None,
            "pollIntervalMs": self.poll_interval_ms,
            "_meta": {KIT_TASK_ID_META_KEY: info.task_id},
        }
        message = _status_message(info)
        if message is not None:
            task["statusMessage"] = message
        return task


_STATUS: dict[TaskState, str] = {
    TaskState.RUNNING: "working",
    TaskState.SUCCEEDED: "completed",
    TaskState.FAILED: "failed",
    TaskState.CANCELLED: "cancelled",
}


def _status_message(info: TaskInfo) -> str | None:
    """The latest progress while running (its ``message`` when it has one, else its JSON);
    the failure's message once failed."""
    if info.state == TaskState.RUNNING and info.progress:
        text = info.progress.get("message")
        if isinstance(text, str) and text:
            return text
        return json.dumps(info.progress, separators=(",", ":"), ensure_ascii=False)
    if info.state == TaskState.FAILED and info.failure is not None:
        return info.failure.message
    return None


def _tool_result(data: dict[str, Any], *, is_error: bool) -> dict[str, Any]:
    """A ``CallToolResult`` carrying ``data`` as structured content and as JSON text."""
    return {
        "content": [
            {"type": "text", "text": json.dumps(data, separators=(",", ":"), ensure_ascii=False)}
        ],
        "structuredContent": data,
        "isError": is_error,
    }
