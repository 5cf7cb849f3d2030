"""The seven process tools (memory spec §5): find, get, save, record_outcome, delete, list,
reindex.

Each tool is a handler here — ``find_processes(memory, tenant, *, query, k, robot) -> dict``,
callable without MCP — that checks its §6a rule (:mod:`robot_mcp_memory.policy`), then
calls the process store; :func:`register` adds the thin async wrappers carrying the
LLM-facing descriptions, each handing its handler to the :class:`ToolRunner`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.fastmcp import FastMCP
from mcp.types import CallToolResult

from robot_mcp_memory._exceptions import ToolFailure
from robot_mcp_memory.documents import ProcessDoc
from robot_mcp_memory.limits import (
    MAX_DOC_BYTES,
    MAX_K,
    MAX_LIMIT,
    MAX_NOTE_BYTES,
    clamp,
)
from robot_mcp_memory.policy import (
    check_text,
    pin_document,
    require_admin,
    updatable,
    visible_owner,
    visible_robots,
)
from robot_mcp_memory.search import truncate_query
from robot_mcp_memory.tools._runner import (
    Answer,
    ToolRunner,
    add_tool,
)

if TYPE_CHECKING:
    from robot_mcp_memory.services import Memory
    from robot_mcp_memory.tenant import Tenant

__all__ = [
    "delete_process",
    "find_processes",
    "get_process",
    "list_processes",
    "record_outcome",
    "register",
    "reindex",
    "save_process",
]


def _k(k: int) -> int:
    """How many processes a find returns: ``k`` clamped to ``1..MAX_K``."""
    return clamp(k, 1, MAX_K)


def find_processes(
    memory: Memory, tenant: Tenant | None, *, query: str, k: int = 3, robot: str | None = None
) -> dict[str, Any]:
    """The ``find_processes`` tool's body (its description is the wrapper's)."""
    check_text("robot", robot)
    text, truncated = truncate_query(query)
    robots = visible_robots(memory.fleet, robot, tenant)
    found = memory.processes.find(text, _k(k), robots=robots)
    return {
        "truncated": truncated,
        "processes": [
            {
                "id": f.doc.id,
                "title": f.doc.title,
                "score": f.score,
                "bm25": f.bm25,
                "semantic": f.semantic,
                "reliability": f.reliability,
                "success_count": f.doc.success_count,
                "failure_count": f.doc.failure_count,
                "updated": f.doc.frontmatter().get("updated"),
                "markdown": f.doc.render(),
            }
            for f in found
        ],
    }


def get_process(memory: Memory, tenant: Tenant | None, *, id: str) -> dict[str, Any]:
    """The ``get_process`` tool's body (its description is the wrapper's)."""
    visible_owner(memory.processes, memory.fleet, id, tenant)
    doc = memory.processes.get(id)
    if doc is None:  # deleted between the two reads
        raise ToolFailure.not_found(id)
    return {**doc.frontmatter(), "markdown": doc.render()}


def save_process(memory: Memory, tenant: Tenant | None, *, markdown: str) -> dict[str, Any]:
    """The ``save_process`` tool's body (its description is the wrapper's)."""
    _check_size("document", markdown, MAX_DOC_BYTES)
    doc = ProcessDoc.parse(markdown)
    scoped = tenant is not None and tenant.scoped
    if scoped:
        assert tenant is not None
        doc = pin_document(doc, tenant)
    saved = memory.processes.save(
        doc,
        may_update=updatable(memory.fleet, tenant),
        max_robot_documents=memory.robot_max_documents if scoped else None,
    )
    out: dict[str, Any] = {**saved.doc.frontmatter(), "inserted": saved.created}
    if saved.renamed_from is not None:
        out["renamed_from"] = saved.renamed_from
    return out


def record_outcome(
    memory: Memory, tenant: Tenant | None, *, id: str, success: bool, note: str = ""
) -> dict[str, Any]:
    """The ``record_outcome`` tool's body (its description is the wrapper's)."""
    _check_size("note", note, MAX_NOTE_BYTES)
    visible_owner(memory.processes, memory.fleet, id, tenant)
    doc = memory.processes.record_outcome(id, success, note)
    if doc is None:
        raise ToolFailure.not_found(id)
    return doc.frontmatter()


def delete_process(memory: Memory, tenant: Tenant | None, *, id: str) -> dict[str, Any]:
    """The ``delete_process`` tool's body (its description is the wrapper's)."""
    owner = visible_owner(memory.processes, memory.fleet, id, tenant)
    if tenant is not None and tenant.scoped and owner.shared:
        raise ToolFailure.forbidden(
            f"process {id!r} is fleet-wide (shared: true); only the admin may delete it"
        )
    if not memory.processes.delete(id):
        raise ToolFailure.not_found(id)
    return {"deleted": id}


def list_processes(
    memory: Memory,
    tenant: Tenant | None,
    *,
    limit: int = 50,
    offset: int = 0,
    robot: str | None = None,
) -> dict[str, Any]:
    """The ``list_processes`` tool's body (its description is the wrapper's)."""
    check_text("robot", robot)
    if limit < 0 or offset < 0:
        raise ToolFailure.invalid(
            "limit" if limit < 0 else "offset",
            f"limit and offset must be >= 0, got limit={limit}, offset={offset}",
        )
    used = min(limit, MAX_LIMIT)
    robots = visible_robots(memory.fleet, robot, tenant)
    docs = [] if used == 0 else memory.processes.list(used, offset, robots=robots)
    return {
        "processes": [doc.frontmatter() for doc in docs],
        "limit": used,
        "offset": offset,
    }


def reindex(memory: Memory, tenant: Tenant | None) -> dict[str, Any]:
    """The ``reindex`` tool's body (its description is the wrapper's)."""
    require_admin(tenant, "reindex")
    return {"indexed": memory.processes.reindex()}


def register(mcp: FastMCP, runner: ToolRunner) -> None:
    """Add the seven process tools to ``mcp``; ``runner`` runs each call."""

    async def _find_processes(
        query: str, k: int = 3, robot: str | None = None
    ) -> Annotated[CallToolResult, Answer]:
        """Find the stored processes most relevant to a task instruction.

        Processes are ADVICE distilled from past missions: reuse what worked, but deviate
        whenever reality disagrees with a process. The system normally calls this tool
        automatically at mission start with the operator's instruction and injects the
        matches; call it yourself only for a sub-task mid-mission.

        Args:
            query: the instruction in natural language, any length (past 2 KiB only the
                first 2 KiB is searched and the answer says "truncated": true).
            k: how many processes to return, clamped to 1..50.
            robot: narrow to the documents that robot sees (its group's plus shared ones).

        Returns JSON {"processes": [{id, title, score, bm25, semantic, reliability,
        success_count, failure_count, updated, markdown}], "truncated": bool}, best first.
        bm25 is the lexical relevance (0: no word matched), semantic the meaning similarity
        (cosine, null when the server searches lexically), reliability the smoothed success
        rate; score, what results are ranked by, is their fusion × reliability (higher is
        better). markdown is the full document.
        """
        return await runner.run(
            "find_processes",
            find_processes,
            {"query": query, "k": k, "robot": robot},
            k=_k(k),
            robot=robot,
        )

    add_tool(mcp, "find_processes", _find_processes)

    async def _get_process(id: str) -> Annotated[CallToolResult, Answer]:
        """Get one stored process by id, as its full markdown plus its frontmatter fields.

        The document is advice from past missions; deviate when reality disagrees.
        Returns JSON {"id", "markdown", ...frontmatter} or {"error": "not_found"}.
        """
        return await runner.run("get_process", get_process, {"id": id}, id=id)

    add_tool(mcp, "get_process", _get_process)

    async def _save_process(markdown: str) -> Annotated[CallToolResult, Answer]:
        """Store a process document (YAML frontmatter + markdown body, at most 256 KiB).

        Normally called by the system when a taught mission ends. An existing id is updated
        in place (counters kept, `updated` bumped) unless its `source_mission_id` differs
        or it is not this connection's to update, in which case the new document gets a
        suffixed id (`-2`, `-3`…). A robot-scoped connection saves as its own robot and
        never a `shared: true` document.
        Returns JSON: the stored frontmatter (its `created` is the document's creation
        time) plus "inserted" (true for a new document, false for an update) and
        "renamed_from" when the id was suffixed; {"error": "invalid", "field": ...} names a
        bad frontmatter field.
        """
        return await runner.run(
            "save_process", save_process, {"markdown": markdown}, markdown_chars=len(markdown)
        )

    add_tool(mcp, "save_process", _save_process)

    async def _record_outcome(
        id: str, success: bool, note: str = ""
    ) -> Annotated[CallToolResult, Answer]:
        """Record how a mission that used a process went, so flaky processes lose weight.

        Bumps success_count or failure_count and last_used; a non-empty note (at most
        4 KiB) is appended with the date and the flag under the document's "## Outcome log".
        Returns JSON: the process's frontmatter with the updated counters, or not_found.
        """
        return await runner.run(
            "record_outcome",
            record_outcome,
            {"id": id, "success": success, "note": note},
            id=id,
            success=success,
        )

    add_tool(mcp, "record_outcome", _record_outcome)

    async def _delete_process(id: str) -> Annotated[CallToolResult, Answer]:
        """Delete a stored process (its row and its search entry, in one transaction).

        Returns JSON {"deleted": id} or {"error": "not_found"}.
        """
        return await runner.run("delete_process", delete_process, {"id": id}, id=id)

    add_tool(mcp, "delete_process", _delete_process)

    async def _list_processes(
        limit: int = 50, offset: int = 0, robot: str | None = None
    ) -> Annotated[CallToolResult, Answer]:
        """List stored processes as frontmatter summaries (no bodies), in id order.

        Args:
            limit: page size, at most 500.
            offset: how many to skip.
            robot: narrow to the documents that robot sees (its group's plus shared ones).

        Returns JSON {"processes": [frontmatter...], "limit", "offset"}.
        """
        return await runner.run(
            "list_processes",
            list_processes,
            {"limit": limit, "offset": offset, "robot": robot},
            limit=limit,
            offset=offset,
            robot=robot,
        )

    add_tool(mcp, "list_processes", _list_processes)

    async def _reindex() -> Annotated[CallToolResult, Answer]:
        """Rebuild the search index from the stored processes (admin only).

        Only needed after a tokenizer or column-weight change: every save already updates
        the index in the same transaction. Returns JSON {"indexed": n}.
        """
        return await runner.run("reindex", reindex, {})

    add_tool(mcp, "reindex", _reindex)


def _check_size(field: str, text: str, limit: int) -> None:
    check_text(field, text)
    size = len(text.encode("utf-8"))
    if size > limit:
        raise ToolFailure.too_large(field, size, limit)
