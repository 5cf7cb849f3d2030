"""The tasks extension on mcp 2.x ``MCPServer``: :class:`TasksExtension` (SEP-2133 API).

Imported only by :meth:`robot_mcp_kit.native_tasks.NativeTasks.extension`, where mcp 2.3 or
later is installed. It adds ``tasks/get``, ``tasks/update`` and ``tasks/cancel`` (on the
2026-07-28 protocol only; earlier protocols get -32601 for them, as for the removed
``tasks/result`` and ``tasks/list``), advertises the extension in ``server/discover``, and
wraps ``tools/call``; every answer comes from ``robot_mcp_kit.native_tasks.NativeTasks``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import decode_header_value
from mcp_types import CallToolResult, RequestParams
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

from robot_mcp_kit._native_wire import (
    HEADER_MISMATCH,
    TASKS_EXTENSION_ID,
    NativeFace,
    NativeTaskError,
    missing_capability,
)
from robot_mcp_kit._principal import current_principal

__all__ = ["TasksExtension"]

_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
_MODERN = frozenset(MODERN_PROTOCOL_VERSIONS)


class _TaskParams(RequestParams):
    task_id: Any = Field(alias="taskId")


class _UpdateParams(_TaskParams):
    input_responses: Any = Field(alias="inputResponses")


def _owner() -> str:
    """The caller's principal as a key (client, issuer, subject of its access token, the
    components mcp's ``principal_components`` names); "" without auth."""
    return current_principal().key


def _declared(ctx: Any) -> bool:
    """Whether this request declared the tasks extension, on the 2026-07-28 protocol."""
    if ctx.protocol_version not in _MODERN:
        return False
    capabilities = getattr(ctx.session, "client_capabilities", None)
    extensions = getattr(capabilities, "extensions", None)
    if isinstance(extensions, Mapping) and TASKS_EXTENSION_ID in extensions:
        return True
    meta = (ctx.params or {}).get("_meta")
    declared = meta.get(_CLIENT_CAPABILITIES) if isinstance(meta, Mapping) else None
    extensions = declared.get("extensions") if isinstance(declared, Mapping) else None
    return isinstance(extensions, Mapping) and TASKS_EXTENSION_ID in extensions


def _mcp_error(error: NativeTaskError) -> Any:
    return MCPError(code=error.code, message=error.message, data=error.data)


def _check_routing(ctx: Any, task_id: object) -> None:
    """``Mcp-Name`` must carry ``params.taskId`` on streamable HTTP (SEP-2663): -32020."""
    request = getattr(ctx, "request", None)
    headers = getattr(request, "headers", None)
    if headers is None:
        return  # stdio: no headers to route by
    if decode_header_value(headers.get("mcp-name")) != task_id:
        raise MCPError(
            code=HEADER_MISMATCH,
            message="Mcp-Name header does not match the request body's 'taskId' parameter",
        )


def _structured(result: Any) -> Mapping[str, Any] | None:
    """A tool result's answer object: ``structuredContent`` when it names a task, else its
    first text parsed as JSON (a tool that answers the ``TaskInfo`` as a JSON string)."""
    structured = getattr(result, "structured_content", None)
    if isinstance(structured, Mapping) and "task_id" in structured:
        return structured
    for item in getattr(result, "content", None) or ():
        text = getattr(item, "text", None)
        if isinstance(text, str):
            try:
                parsed = json.loads(text)
            except ValueError:
                return None
            return parsed if isinstance(parsed, Mapping) else None
    return None


class TasksExtension(Extension):
    """``io.modelcontextprotocol/tasks`` over a ``NativeTasks`` (one task store)."""

    identifier = TASKS_EXTENSION_ID

    def __init__(self, native: NativeFace) -> None:
        self.native = native

    def methods(self) -> Sequence[Any]:
        return (
            MethodBinding("tasks/get", _TaskParams, self._get, protocol_versions=_MODERN),
            MethodBinding("tasks/update", _UpdateParams, self._update, protocol_versions=_MODERN),
            MethodBinding("tasks/cancel", _TaskParams, self._cancel, protocol_versions=_MODERN),
        )

    async def intercept_tool_call(self, params: Any, ctx: Any, call_next: Any) -> Any:
        """A declaring caller gets a ``CreateTaskResult`` for a task its call started."""
        if not _declared(ctx):
            if params.name in self.native.required_tools:
                raise _mcp_error(missing_capability(f"The tool {params.name!r}"))
            return await call_next(ctx)
        result = await call_next(ctx)
        if not isinstance(result, CallToolResult) or result.is_error:
            return result
        info = self.native.task_started(params.name, _structured(result))
        if info is None:
            return result
        return self.native.created(info, _owner())

    async def _get(self, ctx: Any, params: _TaskParams) -> dict[str, Any]:
        self._admit(ctx, params.task_id)
        try:
            return self.native.get(params.task_id, _owner())
        except NativeTaskError as exc:
            raise _mcp_error(exc) from None

    async def _update(self, ctx: Any, params: _UpdateParams) -> dict[str, Any]:
        self._admit(ctx, params.task_id)
        try:
            await self.native.update(params.task_id, _owner(), params.input_responses)
        except NativeTaskError as exc:
            raise _mcp_error(exc) from None
        return {}

    async def _cancel(self, ctx: Any, params: _TaskParams) -> dict[str, Any]:
        self._admit(ctx, params.task_id)
        try:
            await self.native.cancel(params.task_id, _owner())
        except NativeTaskError as exc:
            raise _mcp_error(exc) from None
        return {}

    @staticmethod
    def _admit(ctx: Any, task_id: object) -> None:
        if not _declared(ctx):
            raise _mcp_error(missing_capability(f"{ctx.method}"))
        _check_routing(ctx, task_id)
