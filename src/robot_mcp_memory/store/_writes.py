"""The cold writes of :class:`~robot_mcp_memory.store.ProcessStore`: save, delete, reindex,
and the outcome note appended to a body.

Each write puts a document's row, its search index entry (``processes_fts``, same rowid)
and its vectors (:class:`~robot_mcp_memory._vector_table.VectorTable`) in ONE cold
transaction (:meth:`SqliteStore.transaction`, on the caller's thread, never dropped), so
they cannot disagree and a kill -9 leaves either the old or the new document; after the
commit the in-memory copies (typo vocabulary, vector index) follow. A save never writes
the counters of an existing row: they belong to the hot path (``n = n + 1`` on the kit's
writer thread), so the two paths never overwrite each other.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from robot_mcp_kit.log import get_logger
from robot_mcp_kit.models import format_ts
from robot_mcp_kit.store import SqliteStore
from robot_mcp_memory._exceptions import DocError
from robot_mcp_memory.documents import Owner, ProcessDoc
from robot_mcp_memory.documents.rows import (
    COLUMNS,
    row_to_doc,
    tags_json,
)
from robot_mcp_memory.limits import (
    MAX_DOC_BYTES,
    MAX_ID_LENGTH,
    MAX_NOTE_CHARS,
)
from robot_mcp_memory.search import (
    Pairs,
    TypoRepair,
    VectorTable,
    document_texts,
)

__all__ = ["ProcessWriter", "Saved", "append_outcome", "outcome_line"]

_log = get_logger("robot_mcp_memory.store")

_MAX_SUFFIX = 1000  # id-2 … id-1000: beyond that, something is generating ids in a loop

_OUTCOME_HEADING = re.compile(r"^##[ \t]+outcome log[ \t]*$", re.MULTILINE | re.IGNORECASE)
_SECTION_END = re.compile(r"^#{1,2}[ \t]", re.MULTILINE)


@dataclass(frozen=True)
class Saved:
    """The outcome of :meth:`ProcessStore.save <robot_mcp_memory.store.ProcessStore.save>`.

    ``doc`` is the document as stored (its final id, counters, timestamps); ``created`` is
    False when an existing document was updated; ``renamed_from`` is the id the caller
    asked for when the document was stored under a suffixed one (``-2``, ``-3``…).
    """

    doc: ProcessDoc
    created: bool
    renamed_from: str | None


def _suffixed(base: str, n: int) -> str:
    suffix = f"-{n}"
    return base[: MAX_ID_LENGTH - len(suffix)].rstrip("-") + suffix


def _same_mission(stored: str | None, incoming: str | None) -> bool:
    return stored is None or incoming is None or stored == incoming


def outcome_line(when: str, success: bool, note: str) -> str:
    """The Outcome log line ``- <ts> success|failure: <note>`` (whitespace collapsed, cut
    to :data:`~robot_mcp_memory.limits.MAX_NOTE_CHARS`). Pure."""
    text = " ".join(note.split())
    if len(text) > MAX_NOTE_CHARS:
        text = text[: MAX_NOTE_CHARS - 1] + "…"
    return f"- {when} {'success' if success else 'failure'}: {text}"


def append_outcome(body: str, line: str) -> str:
    """Return ``body`` with ``line`` appended under ``## Outcome log`` (created at the end if
    missing). Pure."""
    heading = _OUTCOME_HEADING.search(body)
    if heading is None:
        return body.rstrip("\n") + "\n\n## Outcome log\n" + line + "\n"
    start = heading.end()
    following = _SECTION_END.search(body, start)
    end = following.start() if following else len(body)
    section = body[start:end].rstrip("\n")
    rest = body[end:]
    return body[:start] + section + "\n" + line + "\n" + ("\n" if rest else "") + rest


class ProcessWriter:
    """The cold write path of one ``index.db`` (see the module docstring).

    Args:
        store: the kit store.
        robot_id: replaces a saved document's ``robot: unknown``.
        clock: the time source.
        vectors: the vector table every write keeps in step.
        typos: the typo repair whose vocabulary every write invalidates.
    """

    def __init__(
        self,
        store: SqliteStore,
        *,
        robot_id: str,
        clock: Callable[[], datetime],
        vectors: VectorTable,
        typos: TypoRepair,
    ) -> None:
        self.store = store
        self.robot_id = robot_id
        self._clock = clock
        self._vectors = vectors
        self._typos = typos

    def save(self, doc: ProcessDoc, *, guard: Callable[[Owner], None] | None = None) -> Saved:
        """See :meth:`robot_mcp_memory.store.ProcessStore.save`."""
        now = format_ts(self._clock())
        robot = doc.robot if doc.robot != "unknown" else self.robot_id
        base = doc.id
        # Embedded before the transaction (the text does not depend on the final id), so
        # the write lock is not held while the model runs.
        vectors = self._vectors.embed(
            [document_texts(doc.title, doc.task_pattern, doc.tags, doc.body)]
        )
        with self.store.transaction() as conn:
            candidate, n = base, 1
            while True:
                row = conn.execute(
                    "SELECT rowid, id, robot, shared, source_mission_id FROM processes "
                    "WHERE id = ?",
                    (candidate,),
                ).fetchone()
                if row is None:
                    rowid = self._insert(conn, doc, candidate, robot, now)
                    created = True
                    break
                if _same_mission(row["source_mission_id"], doc.source_mission_id):
                    if guard is not None:
                        guard(
                            Owner(
                                id=str(row["id"]),
                                robot=str(row["robot"]),
                                shared=bool(row["shared"]),
                            )
                        )
                    rowid = self._update(conn, doc, candidate, row, robot, now)
                    created = False
                    break
                n += 1
                if n > _MAX_SUFFIX:
                    raise DocError(
                        "id",
                        "conflict",
                        f"id {base!r} and its suffixed forms up to "
                        f"{_suffixed(base, _MAX_SUFFIX)!r} all belong to other missions; "
                        "choose a different id",
                    )
                candidate = _suffixed(base, n)
            self._vectors.write(conn, rowid, vectors)
            stored = conn.execute(
                f"SELECT {COLUMNS} FROM processes WHERE id = ?",  # noqa: S608
                (candidate,),
            ).fetchone()
        self._written(rowid, vectors, str(stored["robot"]), bool(stored["shared"]))
        return Saved(
            doc=row_to_doc(stored),
            created=created,
            renamed_from=base if candidate != base else None,
        )

    def _insert(
        self, conn: sqlite3.Connection, doc: ProcessDoc, id: str, robot: str, now: str
    ) -> int:
        tags = tags_json(doc.tags)
        cursor = conn.execute(
            f"INSERT INTO processes ({COLUMNS}) "  # noqa: S608 - constant columns
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                id,
                doc.title,
                doc.task_pattern,
                tags,
                robot,
                format_ts(doc.created) if doc.created else now,
                now,
                doc.success_count,
                doc.failure_count,
                format_ts(doc.last_used) if doc.last_used else None,
                doc.source_mission_id,
                doc.body,
                int(doc.shared),
            ),
        )
        rowid = int(cursor.lastrowid or 0)
        _index(conn, rowid, id, doc.title, doc.task_pattern, tags, doc.body)
        return rowid

    def _update(
        self,
        conn: sqlite3.Connection,
        doc: ProcessDoc,
        id: str,
        row: sqlite3.Row,
        robot: str,
        now: str,
    ) -> int:
        tags = tags_json(doc.tags)
        # Content columns only: the counters belong to the hot path (n = n + 1 on the
        # writer thread) and an absolute write here could undo a queued increment.
        conn.execute(
            "UPDATE processes SET title = ?, task_pattern = ?, tags = ?, robot = ?, "
            "updated = ?, source_mission_id = COALESCE(?, source_mission_id), body = ?, "
            "shared = ? WHERE id = ?",
            (
                doc.title,
                doc.task_pattern,
                tags,
                row["robot"] if robot == "unknown" else robot,
                now,
                doc.source_mission_id,
                doc.body,
                int(doc.shared),
                id,
            ),
        )
        _index(conn, row["rowid"], id, doc.title, doc.task_pattern, tags, doc.body)
        return int(row["rowid"])

    def delete(self, id: str) -> bool:
        """Remove the document and its index entry in one transaction; False if unknown."""
        with self.store.transaction() as conn:
            row = conn.execute("SELECT rowid FROM processes WHERE id = ?", (id,)).fetchone()
            if row is None:
                return False
            conn.execute("DELETE FROM processes WHERE id = ?", (id,))
            _unindex(conn, row["rowid"])
            self._vectors.write(conn, row["rowid"], None)
        self._written(int(row["rowid"]), None, "", False)
        return True

    def reindex(self) -> int:
        """Rebuild ``processes_fts`` (and, with an embedder, every document's vectors) from
        the rows; return how many documents it indexed.

        Flushes queued hot writes first, then deletes and refills the index in one
        transaction; the vectors are then recomputed in batches (:meth:`sync_vectors`).
        For a tokenizer, weight or model change — the index cannot drift from the rows,
        since every write updates both in one transaction.
        """
        self.store.flush()
        with self.store.transaction() as conn:
            conn.execute("DELETE FROM processes_fts")
            conn.execute(
                "INSERT INTO processes_fts (rowid, id, title, task_pattern, tags, body) "
                "SELECT rowid, id, title, task_pattern, tags, body FROM processes"
            )
            conn.execute("INSERT INTO processes_fts (processes_fts) VALUES ('optimize')")
            n = int(conn.execute("SELECT count(*) FROM processes").fetchone()[0])
            self._vectors.clear_table(conn)
        self._typos.invalidate()
        self._vectors.sync()
        _log.info("processes_reindexed", indexed=n)
        return n

    def append_note(self, id: str, line: str) -> str | None:
        """Append ``line`` under the body's Outcome log, with the index entry and vectors,
        in one transaction; the new body, or None (unknown id, or over the size limit)."""
        with self.store.transaction() as conn:
            row = conn.execute(
                f"SELECT rowid, {COLUMNS} FROM processes WHERE id = ?",  # noqa: S608
                (id,),
            ).fetchone()
            if row is None:
                return None
            body = append_outcome(row["body"], line)
            doc = row_to_doc(row)
            doc.body = body
            if len(doc.render().encode("utf-8", "surrogatepass")) > MAX_DOC_BYTES:
                _log.warning("process_outcome_note_skipped", id=id, reason="too_large")
                return None
            conn.execute("UPDATE processes SET body = ? WHERE id = ?", (body, id))
            _index(conn, row["rowid"], id, row["title"], row["task_pattern"], row["tags"], body)
            # The whole-document vector follows the body (embedded under the write lock:
            # the body is only known here; one document is well under a millisecond).
            vectors = self._vectors.embed(
                [document_texts(doc.title, doc.task_pattern, doc.tags, body)]
            )
            self._vectors.write(conn, row["rowid"], vectors)
        self._written(int(row["rowid"]), vectors, doc.robot, doc.shared)
        return body

    def _written(self, rowid: int, vectors: Pairs | None, robot: str, shared: bool) -> None:
        """After a committed write: the in-memory copies follow the table."""
        self._typos.invalidate()
        self._vectors.committed(rowid, vectors, robot, shared)


# --- index helpers ----------------------------------------------------------------


def _index(
    conn: sqlite3.Connection,
    rowid: int | None,
    id: str,
    title: str,
    task_pattern: str,
    tags: str,
    body: str,
) -> None:
    # The index row shares the document row's rowid: search joins the two on it, and a
    # document's entry is found without scanning the (UNINDEXED) id column. An entry
    # already at that rowid can only be a stale one (the rows' rowids are unique), so it
    # is replaced.
    conn.execute("DELETE FROM processes_fts WHERE rowid = ?", (rowid,))
    conn.execute(
        "INSERT INTO processes_fts (rowid, id, title, task_pattern, tags, body) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (rowid, id, title, task_pattern, tags, body),
    )


def _unindex(conn: sqlite3.Connection, rowid: int) -> None:
    conn.execute("DELETE FROM processes_fts WHERE rowid = ?", (rowid,))
