"""The seven process tools (memory spec §5): find, get, save, record_outcome, delete, list,
reindex. Each checks its §6a rule (:mod:`.policy`), then calls the :class:`ProcessStore`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp.server.fastmcp import FastMCP

from robot_mcp_memory.docmodel import ProcessDoc
from robot_mcp_memory.limits import MAX_DOC_BYTES, MAX_K, MAX_LIMIT, MAX_NOTE_BYTES, clamp
from robot_mcp_memory.policy import (
    ToolFailure,
    check_text,
    forbidden,
    not_found,
    pin_document,
    require_admin,
    too_large,
    update_guard,
    visible_robots,
)
from robot_mcp_memory.store import Owner, truncate_query
from robot_mcp_memory.tenancy import Tenant

if TYPE_CHECKING:
    from robot_mcp_memory.server import Memory, Run

__all__ = ["register_process_tools"]


def register_process_tools(mcp: FastMCP, run: Run) -> None:
    """Add the seven process tools to ``mcp``; ``run`` executes each call's body."""

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
            robot: narrow to the documents that robot sees (its group's plus shared ones).

        Returns JSON {"processes": [{id, title, score, bm25, semantic, reliability,
        success_count, failure_count, updated, markdown}], "truncated": bool}, best first.
        bm25 is the lexical relevance (0: no word matched), semantic the meaning similarity
        (cosine, null when the server searches lexically), reliability the smoothed success
        rate; score, what results are ranked by, is their fusion × reliability (higher is
        better). markdown is the full document.
        """
        k_used = clamp(k, 1, MAX_K)

        def body(memory: Memory, tenant: Tenant | None) -> dict[str, Any]:
            check_text("robot", robot)
            text, truncated = truncate_query(query)
            robots = visible_robots(memory.fleet, robot, tenant)
            found = memory.processes.find(text, k_used, robots=robots)
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

        return await run("find_processes", body, k=k_used, robot=robot)

    @mcp.tool(structured_output=False)
    async def get_process(id: str) -> str:
        """Get one stored process by id, as its full markdown plus its frontmatter fields.

        The document is advice from past missions; deviate when reality disagrees.
        Returns JSON {"id", "markdown", ...frontmatter} or {"error": "not_found"}.
        """

        def body(memory: Memory, tenant: Tenant | None) -> dict[str, Any]:
            _visible(memory, id, tenant)
            doc = memory.processes.get(id)
            if doc is None:  # deleted between the two reads
                raise not_found(id)
            return {**doc.frontmatter(), "markdown": doc.render()}

        return await run("get_process", body, id=id)

    @mcp.tool(structured_output=False)
    async def save_process(markdown: str) -> str:
        """Store a process document (YAML frontmatter + markdown body, at most 256 KiB).

        Normally called by the system when a taught mission ends. An existing id is updated
        in place (counters kept, `updated` bumped) unless its `source_mission_id` differs,
        in which case the new document gets a suffixed id (`-2`, `-3`…). A robot-scoped
        connection saves as its own robot and never a `shared: true` document.
        Returns JSON: the stored frontmatter (its `created` is the document's creation
        time) plus "inserted" (true for a new document, false for an update) and
        "renamed_from" when the id was suffixed; {"error": "invalid", "field": ...} names a
        bad frontmatter field.
        """

        def body(memory: Memory, tenant: Tenant | None) -> dict[str, Any]:
            _check_size("document", markdown, MAX_DOC_BYTES)
            doc = ProcessDoc.parse(markdown)
            if tenant is not None and tenant.scoped:
                doc = pin_document(doc, tenant)
            saved = memory.processes.save(doc, guard=update_guard(memory.fleet, tenant))
            out: dict[str, Any] = {**saved.doc.frontmatter(), "inserted": saved.created}
            if saved.renamed_from is not None:
                out["renamed_from"] = saved.renamed_from
            return out

        return await run("save_process", body, markdown_chars=len(markdown))

    @mcp.tool(structured_output=False)
    async def record_outcome(id: str, success: bool, note: str = "") -> str:
        """Record how a mission that used a process went, so flaky processes lose weight.

        Bumps success_count or failure_count and last_used; a non-empty note (at most
        4 KiB) is appended with the date and the flag under the document's "## Outcome log".
        Returns JSON: the process's frontmatter with the updated counters, or not_found.
        """

        def body(memory: Memory, tenant: Tenant | None) -> dict[str, Any]:
            _check_size("note", note, MAX_NOTE_BYTES)
            _visible(memory, id, tenant)
            doc = memory.processes.record_outcome(id, success, note)
            if doc is None:
                raise not_found(id)
            return doc.frontmatter()

        return await run("record_outcome", body, id=id, success=success)

    @mcp.tool(structured_output=False)
    async def delete_process(id: str) -> str:
        """Delete a stored process (its row and its search entry, in one transaction).

        Returns JSON {"deleted": id} or {"error": "not_found"}.
        """

        def body(memory: Memory, tenant: Tenant | None) -> dict[str, Any]:
            owner = _visible(memory, id, tenant)
            if tenant is not None and tenant.scoped and owner.shared:
                raise forbidden(
                    f"process {id!r} is fleet-wide (shared: true); only the admin may delete it"
                )
            if not memory.processes.delete(id):
                raise not_found(id)
            return {"deleted": id}

        return await run("delete_process", body, id=id)

    @mcp.tool(structured_output=False)
    async def list_processes(limit: int = 50, offset: int = 0, robot: str | None = None) -> str:
        """List stored processes as frontmatter summaries (no bodies), in id order.

        Args:
            limit: page size, at most 500.
            offset: how many to skip.
            robot: narrow to the documents that robot sees (its group's plus shared ones).

        Returns JSON {"processes": [frontmatter...], "limit", "offset"}.
        """

        def body(memory: Memory, tenant: Tenant | None) -> dict[str, Any]:
            check_text("robot", robot)
            if limit < 0 or offset < 0:
                raise ToolFailure(
                    "invalid",
                    f"limit and offset must be >= 0, got limit={limit}, offset={offset}",
                    field="limit" if limit < 0 else "offset",
                )
            used = min(limit, MAX_LIMIT)
            robots = visible_robots(memory.fleet, robot, tenant)
            docs = [] if used == 0 else memory.processes.list(used, offset, robots=robots)
            return {
                "processes": [doc.frontmatter() for doc in docs],
                "limit": used,
                "offset": offset,
            }

        return await run("list_processes", body, limit=limit, offset=offset, robot=robot)

    @mcp.tool(structured_output=False)
    async def reindex() -> str:
        """Rebuild the search index from the stored processes (admin only).

        Only needed after a tokenizer or column-weight change: every save already updates
        the index in the same transaction. Returns JSON {"indexed": n}.
        """

        def body(memory: Memory, tenant: Tenant | None) -> dict[str, Any]:
            require_admin(tenant, "reindex")
            return {"indexed": memory.processes.reindex()}

        return await run("reindex", body)


def _check_size(field: str, text: str, limit: int) -> None:
    check_text(field, text)
    size = len(text.encode("utf-8"))
    if size > limit:
        raise too_large(field, size, limit)


def _visible(memory: Memory, id: str, tenant: Tenant | None) -> Owner:
    """Who owns ``id`` if it exists and the tenant may see it; out of scope reads as absent."""
    check_text("id", id)
    owner = memory.processes.owner(id)
    if owner is None:
        raise not_found(id)
    robots = visible_robots(memory.fleet, None, tenant)
    if robots is not None and not owner.shared and owner.robot not in robots:
        raise not_found(id)
    return owner
