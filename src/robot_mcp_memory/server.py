"""The ``memory`` MCP server: the seven process tools over a :class:`ProcessStore`.

:func:`build_server` makes a fresh ``FastMCP("memory")`` per call (nothing happens at
import). The store's lifetime is a :class:`StoreHolder`: reference-counted, so the process
entry point can hold it open for the whole life of an HTTP server while each MCP session's
lifespan also holds it; the last release closes it, which flushes queued hot writes.

Every tool returns a JSON string and never raises to the client: expected failures are
``{"error": code, "detail": text}`` with ``code`` one of ``not_found``, ``forbidden``,
``invalid``, ``conflict``, ``too_large`` (DESIGN §5); ``detail`` is always our own sentence,
never an exception's text. An unexpected exception is logged with its traceback and a short
correlation id, and answered ``{"error": "internal", "detail": ..., "correlation_id": id}``
with the same id, so an operator can find the log line without the client seeing the
exception (issue 9). Each call logs exactly one
``tool_call`` event with ``tool``, ``duration_ms`` and ``outcome`` (``ok`` or the error code).

Store calls run in a worker thread (``anyio.to_thread``) so a cold write never stalls the one
event loop every brain's connection shares.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
from mcp.server.fastmcp import FastMCP
from mcp.server.transport_security import TransportSecuritySettings

from robot_mcp_memory.auth import Tenant, current_tenant
from robot_mcp_memory.db import open_index
from robot_mcp_memory.docmodel import DocError, DocTooLarge, ProcessDoc
from robot_mcp_memory.limits import MAX_DOC_BYTES, MAX_K, MAX_LIMIT, MAX_NOTE_BYTES, clamp
from robot_mcp_memory.logs import get_logger
from robot_mcp_memory.settings import Settings
from robot_mcp_memory.store import DamagedRow, Owner, ProcessStore, truncate_query

__all__ = [
    "INSTRUCTIONS",
    "MemoryContext",
    "StoreHolder",
    "ToolFailure",
    "build_server",
    "visible_robots",
]

INSTRUCTIONS = """\
Process memory of the robot fleet. A process is a markdown document distilled from a past \
mission: steps that worked, pitfalls and their fixes, operator notes. Treat a process as \
ADVICE from past executions, not as a script: when reality disagrees with it (a door is \
closed, an object is elsewhere), deviate and do what the situation needs. The system calls \
find_processes automatically at the start of every mission and puts the matches in your \
context; call it yourself only for a sub-task mid-mission."""

_log = get_logger("robot_mcp_memory.server")


class ToolFailure(Exception):
    """An expected tool failure, answered as ``{"error": code, "detail": detail, **extra}``."""

    def __init__(self, code: str, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.extra = extra

    def payload(self) -> dict[str, Any]:
        """The JSON object the client receives."""
        return {"error": self.code, "detail": self.detail, **self.extra}


def visible_robots(robot: str | None, tenant: Tenant | None = None) -> set[str] | None:
    """The ``robot`` values whose documents a call may see; None means every document.

    Shared (``shared: true``) documents are always visible on top of the returned set; the
    store adds them. An unscoped tenant (admin, stdio, an open server) sees everything, or
    what ``robot`` would see when the argument narrows the call. A scoped tenant sees only
    its own robot's documents whatever ``robot`` says: the argument cannot escape the scope.

    This is the one place the fleet registry's group resolution will plug in (a robot in
    group G sees the documents of every robot in G).
    """
    if tenant is not None and tenant.robot is not None:
        return {tenant.robot}
    if robot is None:
        return None
    return {robot}


@dataclass(frozen=True)
class MemoryContext:
    """What each MCP session's lifespan yields: the open store and the settings."""

    store: ProcessStore
    settings: Settings


class StoreHolder:
    """Opens the process store on the first :meth:`acquire` and closes it on the last release.

    Thread-safe. ``opener`` is called with no arguments and must return an open
    :class:`ProcessStore`; its exceptions (``StoreUnreadable``, ``SchemaTooNew``…) propagate
    out of :meth:`acquire` and leave the holder closed.
    """

    def __init__(self, opener: Callable[[], ProcessStore]) -> None:
        self._opener = opener
        self._lock = threading.Lock()
        self._store: ProcessStore | None = None
        self._refs = 0

    @classmethod
    def for_settings(cls, settings: Settings) -> StoreHolder:
        """A holder opening ``settings.data_dir / "index.db"`` (creating the directory)."""

        def opener() -> ProcessStore:
            settings.data_dir.mkdir(parents=True, exist_ok=True)
            return ProcessStore(open_index(settings.data_dir), robot_id=settings.robot_id)

        return cls(opener)

    def acquire(self) -> ProcessStore:
        """Take a reference, opening the store if this is the first one."""
        with self._lock:
            if self._store is None:
                self._store = self._opener()
            self._refs += 1
            return self._store

    def release(self) -> None:
        """Drop a reference; the last one closes the store (flushing queued hot writes)."""
        with self._lock:
            if self._refs == 0:
                return
            self._refs -= 1
            if self._refs == 0 and self._store is not None:
                store, self._store = self._store, None
                store.close()

    @property
    def store(self) -> ProcessStore | None:
        """The open store, or None while nobody holds it."""
        return self._store


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
    """A fresh ``FastMCP("memory")`` with the seven process tools.

    Args:
        settings: validated settings; ``host``/``port`` feed FastMCP's transport settings,
            which also switches on its DNS-rebinding (Host/Origin) protection for loopback.
        holder: the store holder the tools use; by default one for ``settings``. Pass the
            holder the entry point already opened so the server and /healthz share it.
    """
    holder = holder if holder is not None else StoreHolder.for_settings(settings)

    @asynccontextmanager
    async def lifespan(_: FastMCP) -> AsyncIterator[MemoryContext]:
        store = holder.acquire()
        try:
            yield MemoryContext(store=store, settings=settings)
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

    async def call(
        tool: str, fn: Callable[[ProcessStore, Tenant | None], Any], **fields: Any
    ) -> str:
        tenant = current_tenant.get()
        started = time.perf_counter()
        outcome = "ok"
        try:
            store = holder.store
            if store is None:
                raise ToolFailure("unavailable", "the process store is not open")
            result = await anyio.to_thread.run_sync(fn, store, tenant)
        except ToolFailure as failure:
            outcome = failure.code
            result = failure.payload()
        except DocTooLarge as exc:
            outcome = "too_large"
            result = _too_large(exc.field, exc.size, exc.limit).payload()
        except DocError as exc:
            outcome = "conflict" if exc.reason == "conflict" else "invalid"
            result = {
                "error": outcome,
                "detail": str(exc),
                "field": exc.field,
                "reason": exc.reason,
            }
        except sqlite3.IntegrityError:
            outcome = "conflict"
            result = {
                "error": "conflict",
                "detail": "a concurrent write changed the same record; try the call again",
            }
            _log.warning("tool_conflict", tool=tool, exc_info=True)
        except DamagedRow as exc:
            outcome = "internal"
            result = {"error": "internal", "detail": str(exc), "id": exc.id}
        except Exception:
            outcome = "internal"
            correlation_id = secrets.token_hex(4)
            result = {
                "error": "internal",
                "detail": "the server failed to complete this call; an operator can find "
                f"the cause in its log under correlation_id {correlation_id}",
                "correlation_id": correlation_id,
            }
            _log.exception("tool_failed", tool=tool, correlation_id=correlation_id)
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

    @mcp.tool(structured_output=False)
    async def find_processes(query: str, k: int = 3, robot: str | None = None) -> str:
        """Find the stored processes most relevant to a task instruction.

        Processes are ADVICE distilled from past missions: reuse what worked, but deviate
        whenever reality disagrees with a process. The system normally calls this tool
        automatically at mission start with the operator's instruction and injects the
        matches; call it yourself only for a sub-task mid-mission.

        Args:
            query: the instruction in natural language, any length (past 2 KiB only the
                first 2 KiB is searched and the answer says "truncated": true).
            k: how many processes to return, clamped to 1..50.
            robot: narrow to the documents that robot sees (its own plus shared ones).

        Returns JSON {"processes": [{id, title, score, bm25, reliability, success_count,
        failure_count, updated, markdown}], "truncated": bool}, best first; score = bm25
        relevance × reliability (higher is better) and markdown is the full document.
        """
        k_used = clamp(k, 1, MAX_K)

        def run(store: ProcessStore, tenant: Tenant | None) -> dict[str, Any]:
            _check_text("robot", robot)
            text, truncated = truncate_query(query)
            found = store.find(text, k_used, robots=visible_robots(robot, tenant))
            return {
                "truncated": truncated,
                "processes": [
                    {
                        "id": f.doc.id,
                        "title": f.doc.title,
                        "score": f.score,
                        "bm25": f.bm25,
                        "reliability": f.reliability,
                        "success_count": f.doc.success_count,
                        "failure_count": f.doc.failure_count,
                        "updated": f.doc.frontmatter().get("updated"),
                        "markdown": f.doc.render(),
                    }
                    for f in found
                ],
            }

        return await call("find_processes", run, k=k_used, robot=robot)

    @mcp.tool(structured_output=False)
    async def get_process(id: str) -> str:
        """Get one stored process by id, as its full markdown plus its frontmatter fields.

        The document is advice from past missions; deviate when reality disagrees.
        Returns JSON {"id", "markdown", ...frontmatter} or {"error": "not_found"}.
        """

        def run(store: ProcessStore, tenant: Tenant | None) -> dict[str, Any]:
            _visible(store, id, tenant)
            doc = store.get(id)
            if doc is None:  # deleted between the two reads
                raise _not_found(id)
            return {**doc.frontmatter(), "markdown": doc.render()}

        return await call("get_process", run, id=id)

    @mcp.tool(structured_output=False)
    async def save_process(markdown: str) -> str:
        """Store a process document (YAML frontmatter + markdown body, at most 256 KiB).

        Normally called by the system when a taught mission ends. An existing id is updated
        in place (counters kept, `updated` bumped) unless its `source_mission_id` differs,
        in which case the new document gets a suffixed id (`-2`, `-3`…).
        Returns JSON: the stored frontmatter (its `created` is the document's creation
        time) plus "inserted" (true for a new document, false for an update) and
        "renamed_from" when the id was suffixed; {"error": "invalid", "field": ...} names a
        bad frontmatter field.
        """

        def run(store: ProcessStore, tenant: Tenant | None) -> dict[str, Any]:
            _check_size("document", markdown, MAX_DOC_BYTES)
            doc = ProcessDoc.parse(markdown)
            if tenant is not None and tenant.robot is not None:
                doc = _pin_to_tenant(store, doc, tenant)
            saved = store.save(doc)
            out: dict[str, Any] = {**saved.doc.frontmatter(), "inserted": saved.created}
            if saved.renamed_from is not None:
                out["renamed_from"] = saved.renamed_from
            return out

        return await call("save_process", run, markdown_chars=len(markdown))

    @mcp.tool(structured_output=False)
    async def record_outcome(id: str, success: bool, note: str = "") -> str:
        """Record how a mission that used a process went, so flaky processes lose weight.

        Bumps success_count or failure_count and last_used; a non-empty note (at most
        4 KiB) is appended with the date and the flag under the document's "## Outcome log".
        Returns JSON: the process's frontmatter with the updated counters, or not_found.
        """

        def run(store: ProcessStore, tenant: Tenant | None) -> dict[str, Any]:
            _check_text("note", note)
            _check_size("note", note, MAX_NOTE_BYTES)
            _visible(store, id, tenant)
            doc = store.record_outcome(id, success, note)
            if doc is None:
                raise _not_found(id)
            return doc.frontmatter()

        return await call("record_outcome", run, id=id, success=success)

    @mcp.tool(structured_output=False)
    async def delete_process(id: str) -> str:
        """Delete a stored process (its row and its search entry, in one transaction).

        Returns JSON {"deleted": id} or {"error": "not_found"}.
        """

        def run(store: ProcessStore, tenant: Tenant | None) -> dict[str, Any]:
            doc = _visible(store, id, tenant)
            if tenant is not None and tenant.scoped and doc.shared:
                raise ToolFailure(
                    "forbidden",
                    f"process {id!r} is fleet-wide (shared: true); only an admin may delete it",
                )
            if not store.delete(id):
                raise _not_found(id)
            return {"deleted": id}

        return await call("delete_process", run, id=id)

    @mcp.tool(structured_output=False)
    async def list_processes(limit: int = 50, offset: int = 0, robot: str | None = None) -> str:
        """List stored processes as frontmatter summaries (no bodies), oldest id order.

        Args:
            limit: page size, at most 500.
            offset: how many to skip.
            robot: narrow to the documents that robot sees (its own plus shared ones).

        Returns JSON {"processes": [frontmatter...], "limit", "offset"}.
        """

        def run(store: ProcessStore, tenant: Tenant | None) -> dict[str, Any]:
            _check_text("robot", robot)
            if limit < 0 or offset < 0:
                raise ToolFailure(
                    "invalid",
                    f"limit and offset must be >= 0, got limit={limit}, offset={offset}",
                    field="limit" if limit < 0 else "offset",
                )
            used = min(limit, MAX_LIMIT)
            docs = (
                [] if used == 0 else store.list(used, offset, robots=visible_robots(robot, tenant))
            )
            return {
                "processes": [doc.frontmatter() for doc in docs],
                "limit": used,
                "offset": offset,
            }

        return await call("list_processes", run, limit=limit, offset=offset, robot=robot)

    @mcp.tool(structured_output=False)
    async def reindex() -> str:
        """Rebuild the search index from the stored processes (admin only).

        Only needed after a tokenizer or column-weight change: every save already updates
        the index in the same transaction. Returns JSON {"indexed": n}.
        """

        def run(store: ProcessStore, tenant: Tenant | None) -> dict[str, Any]:
            if tenant is not None and tenant.scoped:
                raise ToolFailure("forbidden", "reindex is fleet administration; admin only")
            return {"indexed": store.reindex()}

        return await call("reindex", run)

    return mcp


def _too_large(field: str, size: int, limit: int) -> ToolFailure:
    """The one ``too_large`` answer: the field, the size the client sent and the limit."""
    return ToolFailure(
        "too_large",
        f"the {field} is {size} bytes; the limit is {limit} bytes",
        field=field,
        size=size,
        limit=limit,
    )


def _check_text(field: str, text: str | None) -> None:
    """Refuse a lone surrogate (valid in JSON, not storable or searchable as UTF-8)."""
    if text is None:
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolFailure(
            "invalid",
            f"{field} contains a lone surrogate code point at character {exc.start}; "
            "send valid Unicode text",
            field=field,
        ) from None


def _check_size(field: str, text: str, limit: int) -> None:
    _check_text(field, text)
    size = len(text.encode("utf-8"))
    if size > limit:
        raise _too_large(field, size, limit)


def _not_found(id: str) -> ToolFailure:
    return ToolFailure("not_found", f"no process with id {_quote(id)}")


def _quote(text: str) -> str:
    """``text`` quoted for a message: repr, cut to 80 characters."""
    shown = repr(text)
    return shown if len(shown) <= 80 else shown[:77] + "..."


def _visible(store: ProcessStore, id: str, tenant: Tenant | None) -> Owner:
    """Who owns ``id`` if it exists and the tenant may see it; out of scope reads as absent."""
    _check_text("id", id)
    doc = store.owner(id)
    if doc is None:
        raise _not_found(id)
    robots = visible_robots(None, tenant)
    if robots is not None and not doc.shared and doc.robot not in robots:
        raise _not_found(id)
    return doc


def _pin_to_tenant(store: ProcessStore, doc: ProcessDoc, tenant: Tenant) -> ProcessDoc:
    """A scoped tenant saves as itself: ``robot: unknown`` becomes its id; others are refused."""
    assert tenant.robot is not None
    if doc.shared:
        raise ToolFailure(
            "forbidden", "a scoped robot may not save a fleet-wide (shared: true) document"
        )
    if doc.robot == "unknown":
        doc = doc.model_copy(update={"robot": tenant.robot})
    elif doc.robot != tenant.robot:
        raise ToolFailure(
            "forbidden",
            f"this connection is scoped to robot {tenant.robot!r}; "
            f"it may not save a document of robot {doc.robot!r}",
        )
    existing = store.owner(doc.id)
    if existing is not None:
        robots = visible_robots(None, tenant) or set()
        if existing.shared or existing.robot not in robots:
            raise ToolFailure(
                "forbidden", f"process {doc.id!r} belongs to another scope; choose another id"
            )
    return doc
