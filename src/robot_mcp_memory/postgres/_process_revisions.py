"""The row writes of :class:`~robot_mcp_memory.postgres.processes.PgProcessStore` that keep
revisions: insert a row, update its content, keep the version a write replaces; and the
forward step of schema version 2 that gave an id's lives their numbers (:func:`to_lives`).

Each runs inside the caller's transaction, on a row the caller locked
(``SELECT … FOR UPDATE``) or is inserting (``ON CONFLICT (id) DO NOTHING``), so two
replicas never keep the same revision twice nor bump one revision into two. The rules are
SQLite's (:mod:`robot_mcp_memory.store._writes`): a content change keeps the replaced
version, rendered to markdown with its counters, under its life and revision number with
its owner (``robot``, ``shared``), and bumps the row's ``revision``; the newest ``keep``
versions of the id are kept (by when they were replaced, then by life and number), older
ones deleted in the same transaction; an id freed by a delete or a merge and written again
starts a new life at revision 1, and a revert of a deleted id resumes its latest life
(decision 0029).
"""

from __future__ import annotations

from typing import Any

import psycopg
import psycopg.sql

from robot_mcp_kit.log import get_logger
from robot_mcp_kit.models import format_ts
from robot_mcp_memory._exceptions import DamagedRow
from robot_mcp_memory.db import legacy_lives
from robot_mcp_memory.documents import ProcessDoc
from robot_mcp_memory.documents.rows import COLUMNS, row_to_doc, tags_json
from robot_mcp_memory.store import revision_owner

__all__ = [
    "LATEST_LIFE_SQL",
    "ROW",
    "insert_row",
    "keep_revision",
    "merged_counters",
    "to_lives",
    "update_row",
]

_log = get_logger("robot_mcp_memory.postgres")

Conn = psycopg.Connection[Any]

ROW = f"rid, {COLUMNS}, revision, last_success, life"
"""The columns a write reads of the row it replaces (``SELECT {ROW} FROM processes``)."""

LATEST_LIFE_SQL = (
    "SELECT max(life) FROM (SELECT life FROM processes WHERE id = %s "
    "UNION ALL SELECT life FROM processes_revisions WHERE doc_id = %s) AS lives"
)
"""The latest life of an id (its row's, else the highest kept; NULL when neither), bound
``(id, id)``."""

_INSERT = (
    f"INSERT INTO processes ({COLUMNS}) "  # noqa: S608 - constant columns
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (id) DO NOTHING RETURNING rid"
)

# Run after the row is inserted, as its own statement: its snapshot sees every revision a
# concurrent delete or merge of the id kept (an INSERT that met the deleted row's index
# entry waited for that transaction), and no later one can end a life of the id while this
# transaction holds its row.
_PLACE_IN_LIFE = (
    "UPDATE processes AS p SET life = l.life, revision = 1 + coalesce((SELECT "
    "max(r.revision) FROM processes_revisions AS r WHERE r.doc_id = p.id "
    "AND r.life = l.life), 0) FROM (SELECT CASE WHEN %s AND max(life) IS NOT NULL "
    "THEN max(life) ELSE coalesce(max(life), 0) + 1 END AS life FROM processes_revisions "
    "WHERE doc_id = %s) AS l WHERE p.rid = %s"
)


def insert_row(
    conn: Conn, doc: ProcessDoc, id: str, robot: str, now: str, *, resume_life: bool = False
) -> int | None:
    """Insert ``doc`` as ``id`` (``created`` defaults to ``now``, ``updated`` is ``now``,
    counters as the document carries them) in a new life of the id (its highest kept life
    plus one) at revision 1, or with ``resume_life`` (a revert bringing a deleted id back)
    in its latest life after that life's kept revisions; its rid, or None when another
    transaction holds ``id`` (the caller re-reads it)."""
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
        ),
    ).fetchone()
    if row is None:
        return None
    rid = int(row[0])
    conn.execute(_PLACE_IN_LIFE, (resume_life, id, rid))
    return rid


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
    """Keep ``row`` (the version being replaced, read with :data:`ROW`) as a revision of
    its life, with its owner, and delete the id's versions past the newest ``keep``. A row
    too damaged to render is not kept (logged ``process_revision_skipped``): the write it
    precedes goes on."""
    id = str(row["id"])
    try:
        markdown = row_to_doc(row).render()
    except DamagedRow:
        _log.warning("process_revision_skipped", id=id, reason="damaged_row")
        return
    conn.execute(
        "INSERT INTO processes_revisions (doc_id, life, revision, replaced, reason, markdown, "
        "robot, shared) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
        "ON CONFLICT (doc_id, life, revision) DO UPDATE SET replaced = EXCLUDED.replaced, "
        "reason = EXCLUDED.reason, markdown = EXCLUDED.markdown, robot = EXCLUDED.robot, "
        "shared = EXCLUDED.shared",
        (
            id,
            int(row["life"]),
            int(row["revision"]),
            now,
            reason,
            markdown,
            str(row["robot"]),
            bool(row["shared"]),
        ),
    )
    conn.execute(
        "DELETE FROM processes_revisions WHERE doc_id = %s AND (life, revision) NOT IN "
        "(SELECT life, revision FROM processes_revisions WHERE doc_id = %s "
        "ORDER BY replaced DESC, life DESC, revision DESC LIMIT %s)",
        (id, id, max(0, keep)),
    )


def merged_counters(conn: Conn, reason: str, replaced: str) -> tuple[int, int] | None:
    """For a revision a merge replaced (``merge:<id>:<rev>``, kept at ``replaced``): the
    merged-away document's (successes, failures) as the merge added them (the version the
    same merge kept: ``merged``, the same ``replaced``); None otherwise or once pruned."""
    if not reason.startswith("merge:"):
        return None
    merged_id, _, rev = reason[len("merge:") :].rpartition(":")
    row = conn.execute(
        "SELECT markdown FROM processes_revisions WHERE doc_id = %s AND revision = %s "
        "AND reason = 'merged' AND replaced = %s",
        (merged_id, int(rev) if rev.isdigit() else -1, replaced),
    ).fetchone()
    if row is None:
        return None
    gone = ProcessDoc.parse(str(row[0]))
    return gone.success_count, gone.failure_count


def to_lives(conn: Conn) -> None:
    """Schema step 1 -> 2: ``processes.life``, and ``life``, ``robot`` and ``shared`` on
    every kept revision under the key ``(doc_id, life, revision)``; every revision kept.

    Version 1 numbered an id's revisions on across its lives, so each id's lives are told
    apart by the revisions that ended one (:func:`robot_mcp_memory.db.legacy_lives`); each
    revision's owner is read from its own frontmatter
    (:func:`robot_mcp_memory.store.revision_owner`; unreadable: no owner, the admin's only).
    """
    conn.execute("ALTER TABLE processes ADD COLUMN life BIGINT NOT NULL DEFAULT 1")
    conn.execute(
        "ALTER TABLE processes_revisions ADD COLUMN life BIGINT NOT NULL DEFAULT 1, "
        "ADD COLUMN robot TEXT, ADD COLUMN shared BOOLEAN"
    )
    for (name,) in conn.execute(
        "SELECT conname FROM pg_constraint WHERE conrelid = 'processes_revisions'::regclass "
        "AND contype = 'p'"
    ).fetchall():
        conn.execute(
            psycopg.sql.SQL("ALTER TABLE processes_revisions DROP CONSTRAINT {}").format(
                psycopg.sql.Identifier(name)
            )
        )
    kept: dict[str, list[tuple[int, str]]] = {}
    for doc_id, revision, reason in conn.execute(
        "SELECT doc_id, revision, reason FROM processes_revisions"
    ).fetchall():
        kept.setdefault(str(doc_id), []).append((int(revision), str(reason)))
    with conn.cursor() as cur:
        for doc_id, revisions in kept.items():
            lives, now = legacy_lives(revisions)
            cur.executemany(
                "UPDATE processes_revisions SET life = %s WHERE doc_id = %s AND revision = %s",
                [(life, doc_id, revision) for revision, life in lives.items()],
            )
            cur.execute("UPDATE processes SET life = %s WHERE id = %s", (now, doc_id))
            owners = []
            for revision, markdown in conn.execute(
                "SELECT revision, markdown FROM processes_revisions WHERE doc_id = %s",
                (doc_id,),
            ).fetchall():
                robot, shared = revision_owner(str(markdown))
                owners.append((robot, shared, doc_id, revision))
            cur.executemany(
                "UPDATE processes_revisions SET robot = %s, shared = %s "
                "WHERE doc_id = %s AND revision = %s",
                owners,
            )
    conn.execute("ALTER TABLE processes_revisions ADD PRIMARY KEY (doc_id, life, revision)")
