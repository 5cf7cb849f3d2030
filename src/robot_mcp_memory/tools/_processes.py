"""The process tools: memory spec §5's seven (find, get, save, record_outcome, delete, list,
reindex) and the admin's two (revert_process, merge_processes).

Every document in an answer carries its ``revision``, and the summaries of find and list
its ``stale`` mark and ``last_success`` (:class:`~robot_mcp_memory.processes.DocState`);
``get_process`` returns a kept revision on request, ``save_process`` checks an
``expected_revision`` and names the caller-visible ``near_duplicates`` of what it saved.
Revisions are read within one life of an id (decision 0029): a robot reads those of the
current document's life that it may read by their own owner
(:func:`~robot_mcp_memory._policy.may_read_revision`); the admin also addresses an earlier
life with ``life`` (``get_process``, ``revert_process``), and its answers name the
``lives`` an id has had.

Each tool is a handler here — ``find_processes(memory, tenant, *, query, k, robot) -> dict``,
callable without MCP — that checks its §6a rule (:mod:`robot_mcp_memory._policy`), then
calls the process store; :func:`register` adds the thin async wrappers carrying the
LLM-facing descriptions, each handing its handler to the :class:`ToolRunner`.

The two answers that grow with the store are bounded in bytes on the wire
(``max_answer_bytes``, :data:`~robot_mcp_memory._limits.MAX_ANSWER_BYTES` by default,
counted by :func:`~robot_mcp_memory.tools.wire_bytes` as the runner sends them): a find
carries the markdown of its results, best first, while the answer stays within the bound
and lists the rest without it (``markdown_omitted``, ``size_note``); a list page stops
early (``next_offset``, ``size_note``). The best result's markdown, and a page's first
summary, are always included, so an answer is never empty of what the caller needs first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Final

from mcp.server.fastmcp import FastMCP
from mcp.types import CallToolResult
from pydantic import ValidatorFunctionWrapHandler, WrapValidator

from robot_mcp_memory._exceptions import ToolFailure, quote
from robot_mcp_memory._limits import (
    MAX_ANSWER_BYTES,
    MAX_DOC_BYTES,
    MAX_K,
    MAX_LIMIT,
    MAX_NOTE_BYTES,
    clamp,
)
from robot_mcp_memory._policy import (
    check_text,
    may_add_note,
    may_read_revision,
    pin_document,
    require_admin,
    updatable,
    visible_owner,
    visible_robots,
)
from robot_mcp_memory.processes import ProcessDoc, truncate_query
from robot_mcp_memory.shares import Lane
from robot_mcp_memory.tools._runner import (
    Answer,
    ToolRunner,
    add_tool,
    answer_bytes,
    wire_bytes,
)

if TYPE_CHECKING:
    from robot_mcp_memory.services import Memory
    from robot_mcp_memory.tenant import Tenant

_MAX_WHOLE_NUMBER: Final = 2**63 - 1
"""The largest revision, life, expected revision, limit or offset a tool takes: what both
stores hold (SQLite's INTEGER, PostgreSQL's bigint)."""


def _booleans_as_sent(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """Pass a JSON true/false to the tool as it came (it refuses it, naming the argument)
    instead of letting the framework read it as 1 or 0."""
    return value if isinstance(value, bool) else handler(value)


_WholeNumber = Annotated[int, WrapValidator(_booleans_as_sent)]
"""A tool's whole-number argument: an ``integer`` in its input schema; a boolean reaches
the tool's body as it was sent, for :func:`_check_whole` to refuse."""


def _check_whole(name: str, value: int | None, *, minimum: int, note: str = "") -> None:
    """Refuse a boolean, or a whole number outside ``minimum``..:data:`_MAX_WHOLE_NUMBER`,
    as ``invalid`` naming ``name``; None passes (left out)."""
    if value is None:
        return
    if isinstance(value, bool):
        raise ToolFailure.invalid(
            name, f"{name} must be a whole number, got {str(value).lower()} (a boolean)"
        )
    if value < minimum:
        raise ToolFailure.invalid(name, f"{name} must be >= {minimum}{note}, got {value}")
    if value > _MAX_WHOLE_NUMBER:
        digits = str(value)
        shown = digits if len(digits) <= 40 else f"{digits[:20]}... ({len(digits)} digits)"
        raise ToolFailure.invalid(
            name, f"{name} must be at most {_MAX_WHOLE_NUMBER} (2**63 - 1), got {shown}"
        )


__all__ = [
    "ADMIN_TOOLS",
    "delete_process",
    "find_processes",
    "get_process",
    "list_processes",
    "merge_processes",
    "record_outcome",
    "register",
    "reindex",
    "revert_process",
    "save_process",
]

ADMIN_TOOLS = frozenset({"reindex", "revert_process", "merge_processes"})
"""The process tools a scoped (robot) connection can never call."""


def _marks(memory: Memory, ids: list[str]) -> dict[str, dict[str, Any]]:
    """Per id: its ``revision``, ``stale`` mark and ``last_success`` (one read)."""
    return {
        id: {"revision": st.revision, "stale": st.stale, "last_success": st.last_success}
        for id, st in memory.processes.states(ids).items()
    }


def _k(k: int) -> int:
    """How many processes a find returns: ``k`` clamped to ``1..MAX_K``."""
    return clamp(k, 1, MAX_K)


def find_processes(
    memory: Memory,
    tenant: Tenant | None,
    *,
    query: str,
    k: int = 3,
    robot: str | None = None,
    max_answer_bytes: int = MAX_ANSWER_BYTES,
) -> dict[str, Any]:
    """The ``find_processes`` tool's body (its description is the wrapper's).

    Every result is listed; its ``markdown`` is null when including it would take the
    answer past ``max_answer_bytes`` (the best result's never is), and those ids are then
    named in ``markdown_omitted`` with a ``size_note``.
    """
    check_text("robot", robot)
    text, truncated = truncate_query(query)
    robots = visible_robots(memory.fleet, robot, tenant)
    found = memory.processes.find(text, _k(k), robots=robots)
    results: list[dict[str, Any]] = [
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
            "revision": None,
            "stale": False,
            "last_success": None,
            "markdown": None,
        }
        for f in found
    ]
    marks = _marks(memory, [f.doc.id for f in found])
    for result in results:
        result.update(marks.get(result["id"], {}))
    answer: dict[str, Any] = {"truncated": truncated, "processes": results}
    # Room for the markdown: the bound less the answer with every markdown left out and
    # named (the longest the omission fields can be), so adding them at the end fits.
    every_id = [r["id"] for r in results]
    room = max_answer_bytes - answer_bytes(
        {**answer, **_omitted(every_id, len(every_id), max_answer_bytes)}
    )
    omitted: list[str] = []
    for rank, (result, f) in enumerate(zip(results, found, strict=True)):
        # A markdown costs at least twice its length on the wire: skip rendering it when
        # that alone would not fit.
        if rank > 0 and 2 * len(f.doc.body) > room + wire_bytes(None):
            omitted.append(result["id"])
            continue
        markdown = f.doc.render()
        cost = wire_bytes(markdown) - wire_bytes(None)
        if rank > 0 and cost > room:
            omitted.append(result["id"])
            continue
        result["markdown"] = markdown
        room -= cost
    if omitted:
        answer.update(_omitted(omitted, len(omitted), max_answer_bytes))
    return answer


def _omitted(ids: list[str], count: int, max_answer_bytes: int) -> dict[str, Any]:
    return {
        "markdown_omitted": ids,
        "size_note": f"the markdown of {count} result(s) is left out to keep this answer "
        f"under {max_answer_bytes} bytes; fetch each with get_process(id)",
    }


def get_process(
    memory: Memory,
    tenant: Tenant | None,
    *,
    id: str,
    revision: int | None = None,
    life: int | None = None,
) -> dict[str, Any]:
    """The ``get_process`` tool's body (its description is the wrapper's).

    A scoped caller reads the current document, and the kept revisions of its current life
    that it may read by the owner each had (:func:`may_read_revision`; any other reads as
    not kept); ``life`` is refused to it. The admin reads any life of the id, also after a
    delete or a merge (``life`` omitted: the latest), and its answer says which ``life`` is
    shown and which ``lives`` the id has had; ``get_process(id, life=n)`` without a
    revision shows the newest kept version of an earlier life ``n``.
    """
    check_text("id", id)
    scoped = tenant is not None and tenant.scoped
    if scoped and life is not None:
        raise ToolFailure.forbidden(
            "life addresses an earlier life of an id (a document deleted or merged away "
            "whose id was saved again), which only the admin token reads; leave life out to "
            "read the current document and its revisions"
        )
    _check_whole("revision", revision, minimum=1)
    _check_whole("life", life, minimum=1)
    if scoped or memory.processes.owner(id) is not None or (revision is None and life is None):
        visible_owner(memory.processes, memory.fleet, id, tenant)
    state = memory.processes.states([id]).get(id)
    current = None if state is None else state.revision
    if scoped and state is None:  # deleted between the reads
        raise ToolFailure.not_found(id)
    lives = [] if scoped else memory.processes.lives(id)
    if life is not None:
        shown_life = life
    elif state is not None:
        shown_life = state.life
    else:
        shown_life = lives[-1] if lives else 1
    in_current = state is not None and state.life == shown_life
    visible = visible_robots(memory.fleet, None, tenant)
    kept = [
        r
        for r in memory.processes.revisions(id, life=shown_life)
        if may_read_revision(visible, r.robot, r.shared)
    ]
    if revision is None and not in_current:
        revision = kept[0].revision if kept else None
        if revision is None:
            raise ToolFailure(
                "not_found", f"process {quote(id)} has no kept revision in life {shown_life}"
            )
    if revision is None or (in_current and revision == current):
        doc = memory.processes.get(id)
        shown = current
    else:
        known = any(r.revision == revision for r in kept)
        doc = memory.processes.get_revision(id, revision, life=shown_life) if known else None
        shown = revision
        if doc is None:
            numbers = ", ".join(str(r.revision) for r in kept) or "none"
            where = "" if scoped or life is None else f" in life {shown_life}"
            others = [str(n) for n in lives if n != shown_life]
            hint = f"; other lives: {', '.join(others)}, read with life=n" if others else ""
            raise ToolFailure(
                "not_found",
                f"process {quote(id)} has no kept revision {revision}{where} (current: "
                f"{current}; kept: {numbers}{hint})",
            )
    if doc is None:  # deleted between the reads
        raise ToolFailure.not_found(id)
    answer: dict[str, Any] = {
        **doc.frontmatter(),
        "markdown": doc.render(),
        "revision": shown,
        "current_revision": current,
        "revisions": [
            {"revision": r.revision, "replaced": r.replaced, "reason": r.reason} for r in kept
        ],
    }
    if state is not None:
        answer.update(stale=state.stale, last_success=state.last_success)
    if not scoped:
        answer.update(life=shown_life, lives=lives)
    return answer


def save_process(
    memory: Memory,
    tenant: Tenant | None,
    *,
    markdown: str,
    expected_revision: int | None = None,
) -> dict[str, Any]:
    """The ``save_process`` tool's body (its description is the wrapper's)."""
    _check_size("document", markdown, MAX_DOC_BYTES)
    _check_whole("expected_revision", expected_revision, minimum=0, note=" (0: the id must be new)")
    doc = ProcessDoc.parse(markdown)
    scoped = tenant is not None and tenant.scoped
    if scoped:
        assert tenant is not None
        doc = pin_document(doc, tenant)
    saved = memory.processes.save(
        doc,
        may_update=updatable(memory.fleet, tenant),
        max_robot_documents=memory.robot_max_documents if scoped else None,
        expected_revision=expected_revision,
    )
    out: dict[str, Any] = {
        **saved.doc.frontmatter(),
        "inserted": saved.created,
        "revision": saved.revision,
    }
    if saved.renamed_from is not None:
        out["renamed_from"] = saved.renamed_from
    robots = visible_robots(memory.fleet, None, tenant)
    out["near_duplicates"] = [
        {"id": n.id, "title": n.title, "similarity": n.similarity}
        for n in memory.processes.near_duplicates(saved.doc.id, robots=robots)
    ]
    return out


def record_outcome(
    memory: Memory, tenant: Tenant | None, *, id: str, success: bool, note: str = ""
) -> dict[str, Any]:
    """The ``record_outcome`` tool's body (its description is the wrapper's)."""
    _check_size("note", note, MAX_NOTE_BYTES)
    owner = visible_owner(memory.processes, memory.fleet, id, tenant)
    note_refused = bool(note.strip()) and not may_add_note(tenant, owner)
    doc = memory.processes.record_outcome(id, success, "" if note_refused else note)
    if doc is None:
        raise ToolFailure.not_found(id)
    out = doc.frontmatter()
    if note_refused:
        out["note_added"] = False
        out["note_detail"] = (
            f"process {quote(id)} is fleet-wide (shared: true) and read by every group, so "
            "a robot's outcome notes are not added to its text; the outcome was counted. "
            "Save an improved process of your own under a new id with save_process, or "
            "tell the operator"
        )
    return out


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
    stale: bool | None = None,
    max_answer_bytes: int = MAX_ANSWER_BYTES,
) -> dict[str, Any]:
    """The ``list_processes`` tool's body (its description is the wrapper's).

    The page stops before the summary that would take the answer past
    ``max_answer_bytes`` (never before the first), saying so with ``next_offset`` and a
    ``size_note``.
    """
    check_text("robot", robot)
    if limit < 0 or offset < 0:
        raise ToolFailure.invalid(
            "limit" if limit < 0 else "offset",
            f"limit and offset must be >= 0, got limit={limit}, offset={offset}",
        )
    _check_whole("limit", limit, minimum=0)
    _check_whole("offset", offset, minimum=0)
    used = min(limit, MAX_LIMIT)
    robots = visible_robots(memory.fleet, robot, tenant)
    docs = [] if used == 0 else memory.processes.list(used, offset, robots=robots, stale=stale)
    marks = _marks(memory, [d.id for d in docs])
    answer: dict[str, Any] = {"processes": [], "limit": used, "offset": offset}
    # The bound less the answer without summaries but with the longest cut fields.
    room = max_answer_bytes - answer_bytes(
        {**answer, **_cut(offset + used, used, used, max_answer_bytes)}
    )
    for doc in docs:
        summary = {**doc.frontmatter(), **marks.get(doc.id, {})}
        cost = wire_bytes(summary) + 3  # and its separator: "," once, ", " in the text
        if answer["processes"] and cost > room:
            break
        answer["processes"].append(summary)
        room -= cost
    taken = len(answer["processes"])
    if taken < len(docs):
        answer.update(_cut(offset + taken, taken, used, max_answer_bytes))
    return answer


def _cut(next_offset: int, taken: int, asked: int, max_answer_bytes: int) -> dict[str, Any]:
    return {
        "next_offset": next_offset,
        "size_note": f"this page holds {taken} of the {asked} summaries asked for, to keep "
        f"this answer under {max_answer_bytes} bytes; call "
        f"list_processes(offset={next_offset}) for the rest",
    }


def reindex(memory: Memory, tenant: Tenant | None) -> dict[str, Any]:
    """The ``reindex`` tool's body (its description is the wrapper's)."""
    require_admin(tenant, "reindex")
    return {"indexed": memory.processes.reindex()}


def revert_process(
    memory: Memory, tenant: Tenant | None, *, id: str, revision: int, life: int | None = None
) -> dict[str, Any]:
    """The ``revert_process`` tool's body (its description is the wrapper's).

    ``life`` names the life of the id the revision is in (omitted: the latest); the
    document comes back in the id's current life (a deleted one in its latest).
    """
    require_admin(tenant, "revert_process")
    check_text("id", id)
    _check_whole("revision", revision, minimum=1)
    _check_whole("life", life, minimum=1)
    saved = memory.processes.revert(id, revision, life=life)
    if saved is None:
        kept = (
            ", ".join(str(r.revision) for r in memory.processes.revisions(id, life=life)) or "none"
        )
        where = "" if life is None else f" in life {life}"
        raise ToolFailure(
            "not_found",
            f"process {quote(id)} has no kept revision {revision}{where} (kept: {kept})",
        )
    return {
        **saved.doc.frontmatter(),
        "revision": saved.revision,
        "reverted_to": revision,
        "recreated": saved.created,
    }


def merge_processes(
    memory: Memory, tenant: Tenant | None, *, keep_id: str, merge_id: str
) -> dict[str, Any]:
    """The ``merge_processes`` tool's body (its description is the wrapper's)."""
    require_admin(tenant, "merge_processes")
    if keep_id == merge_id:
        raise ToolFailure.invalid("merge_id", "merge_id must differ from keep_id")
    merged = memory.processes.merge(keep_id, merge_id)
    if merged is None:
        missing = keep_id if memory.processes.owner(keep_id) is None else merge_id
        raise ToolFailure.not_found(missing)
    kept = merged.kept
    return {
        **kept.doc.frontmatter(),
        "revision": kept.revision,
        "merged": merged.merged_id,
        "merged_revision": merged.merged_revision,
        "merged_life": merged.merged_life,
        "undo": f"revert_process(id={keep_id!r}, revision={kept.revision - 1}) and "
        f"revert_process(id={merged.merged_id!r}, revision={merged.merged_revision}, "
        f"life={merged.merged_life})",
    }


def register(mcp: FastMCP, runner: ToolRunner) -> None:
    """Add the nine process tools to ``mcp``; ``runner`` runs each call."""

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
        success_count, failure_count, updated, revision, stale, last_success, markdown}],
        "truncated": bool}, best first. stale: true marks a process whose recent outcomes
        are mostly failures (last_success: when it last worked): prefer another, or use it
        with care.
        bm25 is the lexical relevance (0: no word matched), semantic the meaning similarity
        (cosine, null when the server searches lexically), reliability the smoothed success
        rate; score, what results are ranked by, is their fusion × reliability (higher is
        better). markdown is the full document. An answer is kept within a size bound
        (512 KiB unless the operator set another): when documents are large, results past
        it come with "markdown": null, their ids in "markdown_omitted" and a "size_note";
        fetch each of those with get_process(id) if you need it. The best result always
        has its markdown.
        """
        return await runner.run(
            "find_processes",
            find_processes,
            {"query": query, "k": k, "robot": robot, "max_answer_bytes": runner.max_answer_bytes},
            lane=Lane.DOCUMENTS,
            k=_k(k),
            robot=robot,
        )

    add_tool(mcp, "find_processes", _find_processes)

    async def _get_process(
        id: str, revision: _WholeNumber | None = None, life: _WholeNumber | None = None
    ) -> Annotated[CallToolResult, Answer]:
        """Get one stored process by id, as its full markdown plus its frontmatter fields.

        The document is advice from past missions; deviate when reality disagrees.

        Args:
            id: the process id.
            revision: an earlier revision to return instead of the current one (the
                answer's "revisions" lists the kept ones).
            life: admin only. An id whose document was deleted or merged away and then
                saved again starts a new life with its own revisions; life names an
                earlier one to read (the answer's "lives" lists them).

        Returns JSON {"id", "markdown", ...frontmatter, "revision", "current_revision",
        "revisions": [{revision, replaced, reason}], "stale", "last_success"} (the admin's
        also "life" and "lives") or {"error": "not_found"}. Pass "current_revision" as
        save_process's expected_revision when you save an edit of it.
        """
        return await runner.run(
            "get_process",
            get_process,
            {"id": id, "revision": revision, "life": life},
            lane=Lane.DOCUMENTS,
            id=id,
        )

    add_tool(mcp, "get_process", _get_process)

    async def _save_process(
        markdown: str, expected_revision: _WholeNumber | None = None
    ) -> Annotated[CallToolResult, Answer]:
        """Store a process document (YAML frontmatter + markdown body, at most 256 KiB).

        Normally called by the system when a taught mission ends. An existing id is updated
        in place (counters kept, `updated` bumped, the previous version kept as a revision)
        unless its `source_mission_id` differs or it is not this connection's to update, in
        which case the new document gets a suffixed id (`-2`, `-3`…). A robot-scoped
        connection saves as its own robot and never a `shared: true` document.

        Args:
            markdown: the document.
            expected_revision: the revision you edited (get_process's "current_revision");
                the save then updates that id in place only if nobody changed it since,
                else answers {"error": "conflict", "current_revision": n} and stores
                nothing. 0 means "this id must be new".

        Returns JSON: the stored frontmatter (its `created` is the document's creation
        time) plus "inserted" (true for a new document, false for an update), "revision",
        "renamed_from" when the id was suffixed, and "near_duplicates": [{id, title,
        similarity}] naming stored near-copies of it (consider updating one of those
        instead); {"error": "invalid", "field": ...} names a bad frontmatter field.
        """
        return await runner.run(
            "save_process",
            save_process,
            {"markdown": markdown, "expected_revision": expected_revision},
            lane=Lane.DOCUMENTS,
            markdown_chars=len(markdown),
        )

    add_tool(mcp, "save_process", _save_process)

    async def _record_outcome(
        id: str, success: bool, note: str = ""
    ) -> Annotated[CallToolResult, Answer]:
        """Record how a mission that used a process went, so flaky processes lose weight.

        Bumps success_count or failure_count and last_used; a non-empty note (at most
        4 KiB) is appended with the date and the flag under the document's "## Outcome log".
        A fleet-wide (shared: true) document takes notes from the admin only: a robot's
        outcome is counted but its note is not added, and the answer says "note_added":
        false with a "note_detail".
        Returns JSON: the process's frontmatter with the updated counters, or not_found.
        """
        return await runner.run(
            "record_outcome",
            record_outcome,
            {"id": id, "success": success, "note": note},
            lane=Lane.DOCUMENTS,
            id=id,
            success=success,
        )

    add_tool(mcp, "record_outcome", _record_outcome)

    async def _delete_process(id: str) -> Annotated[CallToolResult, Answer]:
        """Delete a stored process (its row and its search entry, in one transaction).

        Returns JSON {"deleted": id} or {"error": "not_found"}.
        """
        return await runner.run(
            "delete_process", delete_process, {"id": id}, lane=Lane.DOCUMENTS, id=id
        )

    add_tool(mcp, "delete_process", _delete_process)

    async def _list_processes(
        limit: _WholeNumber = 50,
        offset: _WholeNumber = 0,
        robot: str | None = None,
        stale: bool | None = None,
    ) -> Annotated[CallToolResult, Answer]:
        """List stored processes as frontmatter summaries (no bodies), in id order.

        Args:
            limit: page size, at most 500.
            offset: how many to skip.
            robot: narrow to the documents that robot sees (its group's plus shared ones).
            stale: true lists only stale processes (recent outcomes mostly failures), false
                only the others; omitted, all.

        Returns JSON {"processes": [frontmatter + revision, stale, last_success...],
        "limit", "offset"}. Nothing is ever deleted for being stale. A page that would
        pass the answer size bound (512 KiB unless the operator set another) stops early
        with "next_offset" and a "size_note": call again with offset=next_offset for the
        rest.
        """
        return await runner.run(
            "list_processes",
            list_processes,
            {
                "limit": limit,
                "offset": offset,
                "robot": robot,
                "stale": stale,
                "max_answer_bytes": runner.max_answer_bytes,
            },
            lane=Lane.DOCUMENTS,
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
        return await runner.run("reindex", reindex, {}, lane=Lane.DOCUMENTS)

    add_tool(mcp, "reindex", _reindex)

    async def _revert_process(
        id: str, revision: _WholeNumber, life: _WholeNumber | None = None
    ) -> Annotated[CallToolResult, Answer]:
        """Make an earlier revision of a process current again (admin only).

        The current version is kept as a revision first, so a revert can itself be
        reverted; the counters stay (reverting the version a merge replaced takes the
        merged document's counts off again). A deleted or merged-away process comes back.
        get_process(id) lists the kept revisions; life names the life of the id the
        revision is in (omitted: the latest; get_process's "lives" lists them). Returns
        JSON: the frontmatter plus "revision", "reverted_to" and "recreated".
        """
        return await runner.run(
            "revert_process",
            revert_process,
            {"id": id, "revision": revision, "life": life},
            lane=Lane.DOCUMENTS,
            id=id,
        )

    add_tool(mcp, "revert_process", _revert_process)

    async def _merge_processes(keep_id: str, merge_id: str) -> Annotated[CallToolResult, Answer]:
        """Merge a near-copy into another process (admin only).

        keep_id gets both documents' counters added and merge_id's outcome-log lines
        appended; merge_id is deleted but kept as a revision, and keep_id's previous
        version too, so the merge is undone by the two reverts the answer's "undo" names.
        Returns JSON: keep_id's frontmatter plus "revision", "merged", "merged_revision",
        "merged_life" and "undo".
        """
        return await runner.run(
            "merge_processes",
            merge_processes,
            {"keep_id": keep_id, "merge_id": merge_id},
            lane=Lane.DOCUMENTS,
            id=keep_id,
        )

    add_tool(mcp, "merge_processes", _merge_processes)


def _check_size(field: str, text: str, limit: int) -> None:
    check_text(field, text)
    size = len(text.encode("utf-8"))
    if size > limit:
        raise ToolFailure.too_large(field, size, limit)
