"""The ``memory`` MCP server: the 18 tools of DESIGN §5 over one ``index.db``.

:func:`build_server` makes a fresh ``FastMCP("memory")`` per call (nothing happens at
import). The tools live by group in :mod:`._tools_processes`, :mod:`._tools_fleet` and
:mod:`._tools_lessons`; each is "check the §6a rule (:mod:`.policy`), then act".

The services' lifetime is a :class:`StoreHolder`: reference-counted, so the process entry
point can hold them open for the whole life of an HTTP server while each MCP session's
lifespan also holds them; the last release closes them, which flushes queued hot writes.

Every tool returns a JSON string and never raises to the client: expected failures are
``{"error": code, "detail": text}`` with ``code`` one of ``not_found``, ``forbidden``,
``invalid``, ``conflict``, ``too_large`` (DESIGN §5); ``detail`` is always our own sentence,
never an exception's text. An unexpected exception is logged with its traceback and a short
correlation id, and answered ``{"error": "internal", "detail": ..., "correlation_id": id}``
with the same id, so an operator can find the log line without the client seeing the
exception (issue 9). Each call logs exactly one ``tool_call`` event with ``tool``,
``tenant``, ``duration_ms`` and ``outcome`` (``ok`` or the error code).

Who a call acts as is the tenant of the HTTP request that carried it (:mod:`.tenancy`),
never what a session remembers; stdio and in-process calls are unscoped.

Service calls run in a worker thread (``anyio.to_thread``) so a cold write never stalls
the one event loop every brain's connection shares.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import anyio.to_thread
from mcp.server.fastmcp import FastMCP
from mcp.server.transport_security import TransportSecuritySettings

from robot_mcp_kit.fastmcp_ext import set_server_version
from robot_mcp_memory._exceptions import (
    DamagedRow,
    DocError,
    DocTooLarge,
    EmbedderUnavailable,
    FleetError,
    ToolFailure,
)
from robot_mcp_memory._tools_fleet import register_fleet_tools
from robot_mcp_memory._tools_lessons import register_lesson_tools
from robot_mcp_memory._tools_processes import register_process_tools
from robot_mcp_memory.db import open_index
from robot_mcp_memory.embedding import Embedder, load_default_embedder
from robot_mcp_memory.fleet import FleetRegistry
from robot_mcp_memory.logs import get_logger
from robot_mcp_memory.params import ScopedParams
from robot_mcp_memory.policy import too_large
from robot_mcp_memory.settings import SearchMode, Settings
from robot_mcp_memory.store import ProcessStore
from robot_mcp_memory.tenancy import Tenant, current_tenant, tenant_of_request

__all__ = [
    "INSTRUCTIONS",
    "LESSONS_FILENAME",
    "Memory",
    "Run",
    "StoreHolder",
    "ToolFailure",
    "build_server",
    "transport_security",
]

LESSONS_FILENAME = "lessons.db"
"""The lessons file inside ``MEMORY_DATA_DIR``, created by the first recorded lesson."""

INSTRUCTIONS = """\
Process memory of the robot fleet. A process is a markdown document distilled from a past \
mission: steps that worked, pitfalls and their fixes, operator notes. Treat a process as \
ADVICE from past executions, not as a script: when reality disagrees with it (a door is \
closed, an object is elsewhere), deviate and do what the situation needs. The system calls \
find_processes automatically at the start of every mission and puts the matches in your \
context; call it yourself only for a sub-task mid-mission. The same server holds the fleet \
registry (robots, groups, self-improve toggles) and the robots' learned parameters \
(recall_params before a skill, record_params after it)."""

_log = get_logger("robot_mcp_memory.server")


@dataclass(frozen=True)
class Memory:
    """The services behind the tools; all three share one ``index.db`` store."""

    processes: ProcessStore
    fleet: FleetRegistry
    lessons: ScopedParams

    def close(self) -> None:
        """Close the lessons file and the store (flushing queued hot writes)."""
        self.lessons.close()
        self.processes.close()


class Run(Protocol):
    """How a tool runs its body: ``await run(tool, body, **log_fields)`` -> the JSON answer.

    ``body(memory, tenant)`` runs in a worker thread and returns the answer's object.
    """

    def __call__(
        self, tool: str, body: Callable[[Memory, Tenant | None], Any], **fields: Any
    ) -> Coroutine[Any, Any, str]: ...


class StoreHolder:
    """Opens the services on the first :meth:`acquire` and closes them on the last release.

    Thread-safe. ``opener`` is called with no arguments and must return an open
    :class:`Memory`; its exceptions (``StoreUnreadable``, ``SchemaTooNew``…) propagate out
    of :meth:`acquire` and leave the holder closed.
    """

    def __init__(self, opener: Callable[[], Memory]) -> None:
        self._opener = opener
        self._lock = threading.Lock()
        self._memory: Memory | None = None
        self._refs = 0

    @classmethod
    def for_settings(cls, settings: Settings, *, embedder: Embedder | None = None) -> StoreHolder:
        """A holder opening ``settings.data_dir / "index.db"`` (creating the directory);
        lessons go to ``lessons.db`` beside it, opened lazily.

        Search follows ``MEMORY_SEARCH`` (issue 11): ``hybrid`` uses ``embedder`` — by
        default the offline model of :func:`~robot_mcp_memory.embedding.load_default_embedder`,
        loaded at the first open, once per process — and ``lexical`` never loads one. A
        hybrid server whose model cannot be loaded logs ``search_lexical_only`` with the
        reason, once per holder (at startup), and serves lexical results.
        """
        chosen: list[Embedder | None] = []  # decided at the first open, said once

        def opener() -> Memory:
            settings.data_dir.mkdir(parents=True, exist_ok=True)
            index = open_index(settings.data_dir)
            # After the file opened: a refused index.db stays a one-line refusal, and the
            # model is not loaded for a server that cannot start.
            if not chosen:
                chosen.append(_embedder_for(settings, embedder))
            fleet = FleetRegistry(index)
            return Memory(
                processes=ProcessStore(index, robot_id=settings.robot_id, embedder=chosen[0]),
                fleet=fleet,
                lessons=ScopedParams(fleet, settings.data_dir / LESSONS_FILENAME),
            )

        return cls(opener)

    def acquire(self) -> ProcessStore:
        """Take a reference, opening the services if this is the first one; returns the
        process store (the entry point's count and health check need only that)."""
        with self._lock:
            if self._memory is None:
                self._memory = self._opener()
            self._refs += 1
            return self._memory.processes

    def release(self) -> None:
        """Drop a reference; the last one closes the services (flushing queued writes)."""
        with self._lock:
            if self._refs == 0:
                return
            self._refs -= 1
            if self._refs == 0 and self._memory is not None:
                memory, self._memory = self._memory, None
                memory.close()

    @property
    def memory(self) -> Memory | None:
        """The open services, or None while nobody holds them."""
        return self._memory

    @property
    def store(self) -> ProcessStore | None:
        """The open process store, or None while nobody holds it."""
        return None if self._memory is None else self._memory.processes


_default_model: list[Embedder | EmbedderUnavailable] = []  # loaded once per process
_default_model_lock = threading.Lock()


def _embedder_for(settings: Settings, embedder: Embedder | None) -> Embedder | None:
    """The embedder ``settings`` asks for (None: lexical), saying once why when it is
    not the one asked for."""
    if settings.search is SearchMode.LEXICAL:
        _log.info("search_mode", mode="lexical", reason="MEMORY_SEARCH=lexical")
        return None
    if embedder is None:
        with _default_model_lock:
            if not _default_model:
                try:
                    _default_model.append(load_default_embedder())
                except EmbedderUnavailable as exc:
                    _default_model.append(exc)
            loaded = _default_model[0]
        if isinstance(loaded, EmbedderUnavailable):
            _log.warning("search_lexical_only", reason=loaded.reason)
            return None
        embedder = loaded
    _log.info("search_mode", mode="hybrid", model=embedder.name, dim=embedder.dim)
    return embedder


_LOOPBACK_HOSTS = ("127.0.0.1:*", "localhost:*", "[::1]:*")


def transport_security(settings: Settings) -> TransportSecuritySettings | None:
    """The Host/Origin (DNS-rebinding) check for the HTTP transports.

    With ``MEMORY_ALLOWED_HOSTS`` unset this is None: FastMCP's own default, which checks
    for a loopback bind and checks nothing for ``0.0.0.0`` (where the token is the guard).
    With it set, only those Host values (plus loopback, for local health checks and tools)
    and the matching http/https origins are accepted, whatever the bind address.
    """
    hosts = settings.allowed_host_list
    if not hosts:
        return None
    allowed = [*hosts, *_LOOPBACK_HOSTS]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=allowed,
        allowed_origins=[f"{scheme}://{host}" for host in allowed for scheme in ("http", "https")],
    )


def build_server(settings: Settings, *, holder: StoreHolder | None = None) -> FastMCP:
    """A fresh ``FastMCP("memory")`` with the 18 tools.

    Args:
        settings: validated settings; ``host``/``port`` feed FastMCP's transport settings,
            which also switches on its DNS-rebinding (Host/Origin) protection for loopback.
        holder: the services the tools use; by default a holder for ``settings``. Pass the
            holder the entry point already opened so the server and /healthz share it.
    """
    holder = holder if holder is not None else StoreHolder.for_settings(settings)

    @asynccontextmanager
    async def lifespan(_: FastMCP) -> AsyncIterator[None]:
        holder.acquire()
        try:
            yield None
        finally:
            await anyio.to_thread.run_sync(holder.release)

    mcp = FastMCP(
        "memory",
        instructions=INSTRUCTIONS,
        host=settings.host,
        port=settings.port,
        lifespan=lifespan,
        transport_security=transport_security(settings),
    )

    def tenant_of_call() -> Tenant | None:
        try:
            request = mcp.get_context().request_context.request
        except (LookupError, ValueError):  # not inside a request (in-process callers)
            request = None
        return tenant_of_request(request) or current_tenant.get()

    async def run(tool: str, body: Callable[[Memory, Tenant | None], Any], **fields: Any) -> str:
        tenant = tenant_of_call()
        started = time.perf_counter()
        outcome = "ok"
        try:
            memory = holder.memory
            if memory is None:
                raise ToolFailure("unavailable", "the memory store is not open")
            result = await anyio.to_thread.run_sync(body, memory, tenant)
        except Exception as exc:  # every failure becomes an answer; see _answer_for
            outcome, result = _answer_for(exc, tool)
        duration_ms = round((time.perf_counter() - started) * 1000, 3)
        if outcome == "ok" and isinstance(result, dict):
            # Say what the call did, not only that it worked: the stored id, the hit count.
            if "id" in result and "id" not in fields:
                fields["id"] = result["id"]
            if isinstance(result.get("processes"), list):
                fields["results"] = len(result["processes"])
        _log.info(
            "tool_call",
            tool=tool,
            duration_ms=duration_ms,
            outcome=outcome,
            tenant=tenant.name if tenant else None,
            **fields,
        )
        return json.dumps(result, ensure_ascii=False)

    register_process_tools(mcp, run)
    register_fleet_tools(mcp, run)
    register_lesson_tools(mcp, run)
    set_server_version(mcp)  # serverInfo.version: this package's, not the mcp SDK's
    return mcp


def _answer_for(exc: Exception, tool: str) -> tuple[str, dict[str, Any]]:
    """``(outcome, answer)`` for a tool body's exception; never the exception's text
    unless the exception carries a sentence of ours (ToolFailure, DocError, FleetError)."""
    if isinstance(exc, ToolFailure):
        return exc.code, exc.payload()
    if isinstance(exc, FleetError):
        return exc.code, exc.to_dict()
    if isinstance(exc, DocTooLarge):
        return "too_large", too_large(exc.field, exc.size, exc.limit).payload()
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
    _log.error("tool_failed", tool=tool, correlation_id=correlation_id, exc_info=exc)
    return "internal", {
        "error": "internal",
        "detail": "the server failed to complete this call; an operator can find the cause "
        f"in its log under correlation_id {correlation_id}",
        "correlation_id": correlation_id,
    }
