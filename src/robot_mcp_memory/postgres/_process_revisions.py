"""The row writes of :class:`~robot_mcp_memory.postgres.processes.PgProcessStore` that keep
revisions: insert a row, update its content, keep the version a write replaces.

Each runs inside the caller's transaction, on a row the caller locked
(``SELECT … FOR UPDATE``) or is inserting (``ON CONFLICT (id) DO NOTHING``), so two
replicas never keep the same revision twice nor bump one revision into two. The rules are
SQLite's (:mod:`robot_mcp_memory.store._writes`): a content change keeps the replaced
version, rendered to markdown with its counters, under its revision number and bumps the
row's ``revision``; the newest ``keep`` versions of the document are kept (by when they
were replaced, then by number), older ones deleted in the same transaction; a re-created
id goes on from the revisions its earlier life left.
"""

from __future__ import annotations

from typing import Any

import psycopg

from robot_mcp_kit.log import get_logger
from robot_mcp_kit.models import format_ts
from robot_mcp_memory._exceptions import DamagedRow
from robot_mcp_memory.documents import ProcessDoc
from robot_mcp_memory.documents.rows import COLUMNS, row_to_doc, tags_json

__all__ = ["ROW", "insert_row", "keep_revision", "merged_counters", "update_row"]

_log = get_logger("robot_mcp_memory.postgres")

Conn = psycopg.Connection[Any]

ROW = f"rid, {COLUMNS}, revision, last_success"
"""The columns a write reads of the row it replaces (``SELECT {ROW} FROM processes``)."""

_INSERT = (
    f"INSERT INTO processes ({COLUMNS}, revision) "  # noqa: S608 - constant columns
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, "
    "1 + coalesce((SELECT max(r.revision) FROM processes_revisions AS r "
    "WHERE r.doc_id = %s), 0)) "
    "ON CONFLICT (id) DO NOTHING RETURNING rid"
)


def insert_row(conn: Conn, doc: ProcessDoc, id: str, robot: str, now: str) -> int | None:
    """Insert ``doc`` as ``id`` (``created`` defaults to ``now``, ``updated`` is ``now``,
    counters as the document carries them); its rid, or None when another transaction
    holds ``id`` (the caller re-reads it)."""
    row = conn.execute(
        _INSERT,
        (
            id,
            doc.title,
            doc.task_pattern,
            tags_json(doc.tags),
            robot,
            format_ts(doc.created) if doc.created else now,
            now,
            doc.success_count,
            doc.failure_count,
            format_ts(doc.last_used) if doc.last_used else None,
            doc.source_mission_id,
            doc.body,
            doc.shared,
            id,
        ),
    ).fetchone()
    return None if row is None else int(row[0])


def update_row(
    conn: Conn, doc: ProcessDoc, row: dict[str, Any], robot: str, now: str, reason: str, keep: int
) -> bool:
    """Replace the content of the locked ``row`` by ``doc``'s (``robot: unknown`` keeps the
    stored robot, a missing ``source_mission_id`` the stored one); the counters are
    ``record_outcome``'s and stay. True when the content changed: then the replaced version
    was kept (``reason``) and ``revision`` went up by one."""
    tags = tags_json(doc.tags)
    new_robot = row["robot"] if robot == "unknown" else robot
    mission = doc.source_mission_id or row["source_mission_id"]
    changed = (doc.title, doc.task_pattern, tags, new_robot, mission, doc.body, doc.shared) != (
        row["title"],
        row["task_pattern"],
        row["tags"],
        row["robot"],
        row["source_mission_id"],
        row["body"],
        bool(row["shared"]),
    )
    if changed:
        keep_revision(conn, row, reason, now, keep)
    conn.execute(
        "UPDATE processes SET title = %s, task_pattern = %s, tags = %s, robot = %s, "
        "updated = %s, source_mission_id = COALESCE(%s, source_mission_id), body = %s, "
        "shared = %s, revision = revision + %s WHERE rid = %s",
        (
            doc.title,
            doc.task_pattern,
            tags,
            new_robot,
            now,
            doc.source_mission_id,
            doc.body,
            doc.shared,
            int(changed),
            row["rid"],
        ),
    )
    return changed


def keep_revision(conn: Conn, row: dict[str, Any], reason: str, now: str, keep: int) -> None:
    """Keep ``row`` (the version being replaced, read with :data:`ROW`) as a revision and
    delete the document's versions past the newest ``keep``. A row too damaged to render
    is not kept (logged ``process_revision_skipped``): the write it precedes goes on."""
    id = str(row["id"])
    try:
        markdown = row_to_doc(row).render()
    except DamagedRow:
        _log.warning("process_revision_skipped", id=id, reason="damaged_row")
        return
    conn.execute(
        "INSERT INTO processes_revisions (doc_id, revision, replaced, reason, markdown) "
        "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (doc_id, revision) DO UPDATE SET "
        "replaced = EXCLUDED.replaced, reason = EXCLUDED.reason, markdown = EXCLUDED.markdown",
        (id, int(row["revision"]), now, reason, markdown),
    )
    conn.execute(
        "DELETE FROM processes_revisions WHERE doc_id = %s AND revision NOT IN "
        "(SELECT revision FROM processes_revisions WHERE doc_id = %s "
        "ORDER BY replaced DESC, revision DESC LIMIT %s)",
        (id, id, max(0, keep)),
    )


def merged_counters(conn: Conn, reason: str) -> tuple[int, int] | None:
    """For a revision a merge replaced (``merge:<id>:<rev>``): the merged-away document's
    (successes, failures) as the merge added them; None otherwise or once pruned."""
    if not reason.startswith("merge:"):
        return None
    merged_id, _, rev = reason[len("merge:") :].rpartition(":")
    row = conn.execute(
        "SELECT markdown FROM processes_revisions WHERE doc_id = %s AND revision = %s",
        (merged_id, int(rev) if rev.isdigit() else -1),
    ).fetchone()
    if row is None:
        return None
    gone = ProcessDoc.parse(str(row[0]))
    return gone.success_count, gone.failure_count
