"""How every memory tool runs: :class:`ToolRunner` and the one error-to-answer mapping.

A tool's wrapper (in :mod:`.processes`, :mod:`.fleet`, :mod:`.lessons`) hands the runner
its handler and arguments; the runner

1. finds the tenant of the call: the one the HTTP request that carried this message was
   authenticated as (:func:`robot_mcp_memory.tenant.tenant_of_request`), else
   :data:`~robot_mcp_memory.tenant.current_tenant`; stdio and in-process calls are
   unscoped (None);
2. for a scoped tenant (a robot token), takes a place in one of that robot's two lanes of
   its :class:`~robot_mcp_memory.shares.CallShares` (:class:`~robot_mcp_memory.shares.Lane`:
   the document tools, or the registry and lesson tools), waiting while the robot already
   runs its share of that lane's calls; a call past the lane's queue is answered ``busy`` at
   once without running. Unscoped callers (the admin, stdio) are not limited;
3. runs ``handler(memory, tenant, **arguments)`` in a worker thread (``anyio.to_thread``),
   and encodes its answer there, so neither a cold write nor a big answer stalls the one
   event loop every brain's connection shares;
4. turns any exception into an answer with :func:`answer_for`;
5. logs exactly one ``tool_call`` event (``tool``, ``tenant``, ``duration_ms``,
   ``outcome`` — ``ok`` or the error code — plus the wrapper's fields, the stored ``id``,
   the number of ``results`` and, for a call that waited for its lane, ``waited_ms``); a
   ``busy`` refusal is instead counted in a ``tool_busy`` warning, at most one per robot
   every 10 s (a flood must not flood the log);
6. while telemetry is on (:mod:`robot_mcp_kit.telemetry`), puts the same facts on the
   call's SERVER span (:func:`robot_mcp_kit.fastmcp_ext.trace_tool_calls` opened it):
   ``robot_mcp.tenant``, ``robot_mcp.robot``, ``robot_mcp.memory.outcome`` and the
   wrapper's fields as ``robot_mcp.memory.<field>``; a failure's code as ``error.type``;
   for ``find_processes`` the query's length and its first ``trace_query_chars``
   characters, never more. The wrappers' fields are ids, counts and flags: no document
   text and no token ever reaches a span;
7. answers the JSON object twice: as text (``json.dumps(answer, ensure_ascii=False)``, the
   wire text of memory spec §5) and as ``structuredContent`` under :data:`ANSWER_SCHEMA`.
   :func:`wire_bytes` and :func:`answer_bytes` count what that puts on the wire, for the
   handlers that bound their answers (``max_answer_bytes``).

Expected failures are ``{"error": code, "detail": text}`` with ``code`` one of
``not_found``, ``forbidden``, ``invalid``, ``conflict``, ``too_large`` (DESIGN §5),
``busy`` (with ``retry_after_s``) or ``unavailable`` (the PostgreSQL backend's database
cannot be reached; nothing was written, with ``retry_after_s``), and ``detail`` always our
own sentence, never an exception's text. An unexpected exception is logged with its
traceback and a short correlation id and answered
``{"error": "internal", "detail": ..., "correlation_id": id}`` with the same id, so an
operator can find the log line without the client seeing the exception.
"""

from __future__ import annotations

import functools
import json
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

import anyio.to_thread
import pydantic_core
from mcp.server.fastmcp import FastMCP
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, ConfigDict

from robot_mcp_kit import telemetry
from robot_mcp_kit.log import get_logger
from robot_mcp_kit.store import StoreUnavailable
from robot_mcp_memory._exceptions import (
    Busy,
    DamagedRow,
    DocError,
    DocTooLarge,
    FleetError,
    RevisionConflict,
    ToolFailure,
    WriteConflict,
)
from robot_mcp_memory._limits import MAX_ANSWER_BYTES, TRACE_QUERY_CHARS
from robot_mcp_memory.logs import RateLimiter
from robot_mcp_memory.shares import CallShares, Lane

if TYPE_CHECKING:
    from robot_mcp_memory.services import (
        Memory,
        StoreHolder,
    )
    from robot_mcp_memory.tenant import Tenant

__all__ = [
    "ANSWER_SCHEMA",
    "UNAVAILABLE_RETRY_AFTER_S",
    "Answer",
    "Handler",
    "ToolRunner",
    "add_tool",
    "answer_bytes",
    "answer_for",
    "busy_answer",
    "wire_bytes",
]

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


def wire_bytes(value: Any) -> int:
    """UTF-8 bytes ``value`` takes in a runner's answer on the wire, where it appears twice.

    Once as compact JSON in ``structuredContent``, once inside the text content: there it
    is ``json.dumps(value, ensure_ascii=False)`` and that text is escaped again as a JSON
    string (a newline costs 1 + 3 bytes, a quote 2 + 4). Escaping is per character, so the
    sizes of the parts of an answer add up: replacing a ``null`` inside an answer by a
    string ``s`` grows the answer by exactly ``wire_bytes(s) - wire_bytes(None)``.
    """
    text = json.dumps(value, ensure_ascii=False)
    return len(pydantic_core.to_json(value)) + len(pydantic_core.to_json(text)) - 2


def _run_handler(
    handler: Handler, memory: Memory, tenant: Tenant | None, arguments: dict[str, Any]
) -> tuple[dict[str, Any], CallToolResult]:
    answer = handler(memory, tenant, **arguments)
    return answer, _result(answer)


def _result(answer: dict[str, Any]) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(answer, ensure_ascii=False))],
        structuredContent=answer,
    )


def _result_json(result: CallToolResult) -> bytes:
    # What the SDK's transports send as the JSON-RPC ``result`` (sse.py, streamable_http.py).
    return result.model_dump_json(by_alias=True, exclude_none=True).encode("utf-8")


_ENVELOPE_BYTES = len(_result_json(_result({}))) - wire_bytes({})


def answer_bytes(answer: dict[str, Any]) -> int:
    """Bytes of the JSON-RPC ``result`` the runner sends for ``answer`` (text and
    ``structuredContent`` together); the transport adds a few dozen bytes of envelope."""
    return _ENVELOPE_BYTES + wire_bytes(answer)


def busy_answer(tenant: str, lane: Lane, exc: Busy, scheduler: CallShares) -> dict[str, Any]:
    """The ``busy`` answer to a call refused because its robot's share of ``lane`` is full."""
    share = (
        ""
        if scheduler.time_share is None
        else f", MEMORY_ROBOT_TIME_SHARE={scheduler.time_share:g} of the time"
    )
    return {
        "error": "busy",
        "detail": f"{tenant} already has {exc.running} {lane.value} call(s) running and "
        f"{exc.waiting} waiting, its whole share of this server "
        f"(MEMORY_ROBOT_MAX_CALLS={scheduler.max_running} at once, "
        f"MEMORY_ROBOT_MAX_QUEUED={scheduler.max_queued} waiting{share}); this call was not "
        f"run. Retry after about {exc.retry_after_s} s, or make fewer calls",
        "retry_after_s": exc.retry_after_s,
    }


class ToolRunner:
    """Runs every tool call of one server (see the module docstring for the steps).

    Args:
        holder: the services; a call while nobody holds them answers ``unavailable``.
        tenant_of_call: who the current call acts as (None: unscoped).
        scheduler: the robots' lanes; None runs every call at once (no per-robot share).
        max_answer_bytes: the bound the wrappers hand to the handlers that bound their
            answer (``find_processes``, ``list_processes``).
        trace_query_chars: how many leading characters of a ``query`` argument the call's
            span keeps (0: none).
    """

    def __init__(
        self,
        holder: StoreHolder,
        tenant_of_call: Callable[[], Tenant | None],
        *,
        scheduler: CallShares | None = None,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
        trace_query_chars: int = TRACE_QUERY_CHARS,
    ) -> None:
        self._holder = holder
        self.trace_query_chars = trace_query_chars
        self._tenant_of_call = tenant_of_call
        self.scheduler = scheduler
        self.max_answer_bytes = max_answer_bytes
        self._busy_log = RateLimiter()

    async def run(
        self,
        tool: str,
        handler: Handler,
        arguments: dict[str, Any],
        *,
        lane: Lane = Lane.RECORDS,
        **log_fields: Any,
    ) -> CallToolResult:
        """Call ``handler`` with ``arguments`` for ``tool``; never raises.

        ``lane`` is where a robot's call waits for its turn (the process tools pass
        :attr:`Lane.DOCUMENTS`); the other keyword arguments go into the ``tool_call`` line.
        """
        tenant = self._tenant_of_call()
        started = time.perf_counter()
        if tenant is None or tenant.robot is None or self.scheduler is None:
            outcome, answer, result = await self._call(tool, handler, arguments, tenant)
        else:
            scheduler = self.scheduler
            try:
                async with scheduler.slot(f"{tenant.name}/{lane.value}") as waited_s:
                    outcome, answer, result = await self._call(tool, handler, arguments, tenant)
            except Busy as exc:
                self._log_busy(tool, tenant, lane, exc)
                if telemetry.active():
                    self._describe_span("busy", tenant, arguments, {"lane": lane.value})
                return _result(busy_answer(tenant.name, lane, exc, scheduler))
            if waited_s > 0:
                log_fields["waited_ms"] = round(waited_s * 1000, 3)
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
        if telemetry.active():
            self._describe_span(outcome, tenant, arguments, log_fields)
        return result

    def _describe_span(
        self,
        outcome: str,
        tenant: Tenant | None,
        arguments: dict[str, Any],
        log_fields: dict[str, Any],
    ) -> None:
        """Put what the ``tool_call`` line says on the current (SERVER) span."""
        attributes: dict[str, Any] = {
            f"robot_mcp.memory.{key}": value for key, value in log_fields.items()
        }
        attributes["robot_mcp.memory.outcome"] = outcome
        if outcome != "ok":
            attributes["error.type"] = outcome
        if tenant is not None:
            attributes["robot_mcp.tenant"] = tenant.name
            attributes["robot_mcp.robot"] = tenant.robot
        query = arguments.get("query")
        if isinstance(query, str):
            attributes["robot_mcp.memory.query_chars"] = len(query)
            if self.trace_query_chars:
                attributes["robot_mcp.memory.query_prefix"] = query[: self.trace_query_chars]
        telemetry.set_attributes(**attributes)

    async def _call(
        self, tool: str, handler: Handler, arguments: dict[str, Any], tenant: Tenant | None
    ) -> tuple[str, dict[str, Any], CallToolResult]:
        """``(outcome, answer, result)`` of one run of ``handler`` in a worker thread.

        The answer is also encoded there (its JSON text can be half a megabyte): off the
        event loop every connection shares, and inside the caller's lane, so its robot's
        time share pays for it.
        """
        try:
            memory = self._holder.memory
            if memory is None:
                raise ToolFailure("unavailable", "the memory store is not open")
            answer, result = await anyio.to_thread.run_sync(
                functools.partial(_run_handler, handler, memory, tenant, arguments)
            )
        except Exception as exc:  # every failure becomes an answer; see answer_for
            outcome, failure = answer_for(exc, tool)
            return outcome, failure, _result(failure)
        return "ok", answer, result

    def _log_busy(self, tool: str, tenant: Tenant, lane: Lane, exc: Busy) -> None:
        # One line per robot and lane per 10 s: a robot flooding the server must not flood
        # the log.
        suppressed = self._busy_log.allow(exc.key)
        if suppressed is not None:
            _log.warning(
                "tool_busy",
                tool=tool,
                tenant=tenant.name,
                lane=lane.value,
                running=exc.running,
                waiting=exc.waiting,
                retry_after_s=exc.retry_after_s,
                suppressed=suppressed,
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


UNAVAILABLE_RETRY_AFTER_S = 5
"""What an ``unavailable`` answer suggests waiting: about the pool's reconnect attempts."""


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
    if isinstance(exc, RevisionConflict):
        return "conflict", {
            "error": "conflict",
            "detail": str(exc),
            "field": exc.field,
            "id": exc.id,
            "expected_revision": exc.expected,
            "current_revision": exc.current,
        }
    if isinstance(exc, DocError):
        code = "conflict" if exc.reason == "conflict" else "invalid"
        return code, {"error": code, "detail": str(exc), "field": exc.field, "reason": exc.reason}
    if isinstance(exc, WriteConflict):
        _log.warning("tool_conflict", tool=tool, exc_info=exc)
        return "conflict", {
            "error": "conflict",
            "detail": "a concurrent write changed the same record; try the call again",
        }
    if isinstance(exc, StoreUnavailable):
        # Its message is ours (PgDatabase's) and names no password; logged there.
        return "unavailable", {
            "error": "unavailable",
            "detail": str(exc),
            "retry_after_s": UNAVAILABLE_RETRY_AFTER_S,
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
