"""How every memory tool runs: :class:`ToolRunner` and the one error-to-answer mapping.

A tool's wrapper (in :mod:`.processes`, :mod:`.fleet`, :mod:`.lessons`) hands the runner
its handler and arguments; the runner

1. finds the tenant of the call: the one the HTTP request that carried this message was
   authenticated as (:func:`robot_mcp_memory.tenant.tenant_of_request`), else
   :data:`~robot_mcp_memory.tenant.current_tenant`; stdio and in-process calls are
   unscoped (None);
2. runs ``handler(memory, tenant, **arguments)`` in a worker thread (``anyio.to_thread``),
   so a cold write never stalls the one event loop every brain's connection shares;
3. turns any exception into an answer with :func:`answer_for`;
4. logs exactly one ``tool_call`` event (``tool``, ``tenant``, ``duration_ms``,
   ``outcome`` — ``ok`` or the error code — plus the wrapper's fields, the stored ``id``
   and the number of ``results``);
5. answers the JSON object twice: as text (``json.dumps(answer, ensure_ascii=False)``, the
   wire text of memory spec §5) and as ``structuredContent`` under :data:`ANSWER_SCHEMA`.

Expected failures are ``{"error": code, "detail": text}`` with ``code`` one of
``not_found``, ``forbidden``, ``invalid``, ``conflict``, ``too_large`` (DESIGN §5) and
``detail`` always our own sentence, never an exception's text. An unexpected exception is
logged with its traceback and a short correlation id and answered
``{"error": "internal", "detail": ..., "correlation_id": id}`` with the same id, so an
operator can find the log line without the client seeing the exception.
"""

from __future__ import annotations

import functools
import json
import secrets
import sqlite3
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

import anyio.to_thread
from mcp.server.fastmcp import FastMCP
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, ConfigDict

from robot_mcp_kit.log import get_logger
from robot_mcp_memory._exceptions import (
    DamagedRow,
    DocError,
    DocTooLarge,
    FleetError,
    ToolFailure,
)

if TYPE_CHECKING:
    from robot_mcp_memory.services import (
        StoreHolder,
    )
    from robot_mcp_memory.tenant import Tenant

__all__ = ["ANSWER_SCHEMA", "Answer", "Handler", "ToolRunner", "add_tool", "answer_for"]

_log = get_logger("robot_mcp_memory.server")

ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "The tool's JSON answer (the same object as its text content); a failure "
    'is {"error": code, "detail": sentence, ...}.',
    "additionalProperties": True,
}
"""The output schema of every memory tool: a JSON object, described by the tool's text."""


def _replace_schema(target: dict[str, Any]) -> None:
    target.clear()
    target.update(ANSWER_SCHEMA)


Answer = cast(
    "type[BaseModel]",
    type(
        "Answer",
        (BaseModel,),
        {
            "model_config": ConfigDict(extra="allow", json_schema_extra=_replace_schema),
            "__module__": __name__,
            "__doc__": "The output type the MCP SDK reads :data:`ANSWER_SCHEMA` from; any "
            "object is valid.",
        },
    ),
)


Handler = Callable[..., dict[str, Any]]
"""A tool body: ``handler(memory, tenant, **arguments)`` -> the answer's JSON object.

Runs in a worker thread; raises to answer a failure (see :func:`answer_for`)."""


class ToolRunner:
    """Runs every tool call of one server (see the module docstring for the steps).

    Args:
        holder: the services; a call while nobody holds them answers ``unavailable``.
        tenant_of_call: who the current call acts as (None: unscoped).
    """

    def __init__(self, holder: StoreHolder, tenant_of_call: Callable[[], Tenant | None]) -> None:
        self._holder = holder
        self._tenant_of_call = tenant_of_call

    async def run(
        self,
        tool: str,
        handler: Handler,
        arguments: dict[str, Any],
        **log_fields: Any,
    ) -> CallToolResult:
        """Call ``handler`` with ``arguments`` for ``tool``; never raises."""
        tenant = self._tenant_of_call()
        started = time.perf_counter()
        outcome = "ok"
        try:
            memory = self._holder.memory
            if memory is None:
                raise ToolFailure("unavailable", "the memory store is not open")
            answer = await anyio.to_thread.run_sync(
                functools.partial(handler, memory, tenant, **arguments)
            )
        except Exception as exc:  # every failure becomes an answer; see answer_for
            outcome, answer = answer_for(exc, tool)
        duration_ms = round((time.perf_counter() - started) * 1000, 3)
        if outcome == "ok" and isinstance(answer, dict):
            # Say what the call did, not only that it worked: the stored id, the hit count.
            if "id" in answer and "id" not in log_fields:
                log_fields["id"] = answer["id"]
            if isinstance(answer.get("processes"), list):
                log_fields["results"] = len(answer["processes"])
        _log.info(
            "tool_call",
            tool=tool,
            duration_ms=duration_ms,
            outcome=outcome,
            tenant=tenant.name if tenant else None,
            **log_fields,
        )
        return CallToolResult(
            content=[TextContent(type="text", text=json.dumps(answer, ensure_ascii=False))],
            structuredContent=answer,
        )


def add_tool(mcp: FastMCP, name: str, wrapper: Callable[..., Awaitable[CallToolResult]]) -> None:
    """Register ``wrapper`` as the tool ``name``, with its docstring as the description.

    The wrapper is renamed first: the SDK names the input schema after the function
    (``find_processesArguments``), and the wrapper's own name cannot be the tool's, which
    is the module-level handler's.
    """
    wrapper.__name__ = name
    wrapper.__qualname__ = name
    mcp.add_tool(wrapper, name=name, structured_output=True)


def answer_for(exc: Exception, tool: str) -> tuple[str, dict[str, Any]]:
    """``(outcome, answer)`` for a tool body's exception: the one place a failure becomes
    an answer. Never the exception's text unless the exception carries a sentence of ours
    (ToolFailure, DocError, FleetError, DamagedRow); anything else is logged (``tool_failed``
    with the traceback) and answered ``internal`` with a correlation id."""
    if isinstance(exc, ToolFailure):
        return exc.code, exc.payload()
    if isinstance(exc, FleetError):
        return exc.code, exc.to_dict()
    if isinstance(exc, DocTooLarge):
        return "too_large", ToolFailure.too_large(
            exc.field, exc.size, exc.limit, unit=exc.unit, detail=str(exc)
        ).payload()
    if isinstance(exc, DocError):
        code = "conflict" if exc.reason == "conflict" else "invalid"
        return code, {"error": code, "detail": str(exc), "field": exc.field, "reason": exc.reason}
    if isinstance(exc, sqlite3.IntegrityError):
        _log.warning("tool_conflict", tool=tool, exc_info=exc)
        return "conflict", {
            "error": "conflict",
            "detail": "a concurrent write changed the same record; try the call again",
        }
    if isinstance(exc, DamagedRow):
        return "internal", {"error": "internal", "detail": str(exc), "id": exc.id}
    correlation_id = secrets.token_hex(4)
    # Called from the runner's ``except`` block, so the traceback is the one being handled.
    _log.exception("tool_failed", tool=tool, correlation_id=correlation_id)
    return "internal", {
        "error": "internal",
        "detail": "the server failed to complete this call; an operator can find the cause "
        f"in its log under correlation_id {correlation_id}",
        "correlation_id": correlation_id,
    }
