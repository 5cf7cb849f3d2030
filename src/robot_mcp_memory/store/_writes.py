"""The cold writes of :class:`~robot_mcp_memory.store.ProcessStore`: save, delete, reindex,
and the outcome note appended to a body.

Each write puts a document's row, its search index entry (``processes_fts``, same rowid),
its per-owner term statistics (:mod:`robot_mcp_memory.search._term_index`) and its vectors
(:class:`~robot_mcp_memory._vector_table.VectorTable`) in ONE cold transaction
(:meth:`SqliteStore.transaction`, on the caller's thread, never dropped), so they cannot
disagree and a kill -9 leaves either the old or the new document; after the commit the
in-memory vector index follows. Nothing else is cached, so a write never makes a later
search reload anything. A save never writes
the counters of an existing row: they belong to the hot path (``n = n + 1`` on the kit's
writer thread), so the two paths never overwrite each other.
"""

from __future__ import annotations

import re
import secrets
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from robot_mcp_kit import telemetry
from robot_mcp_kit.log import get_logger
from robot_mcp_kit.models import format_ts
from robot_mcp_kit.store import SqliteStore
from robot_mcp_memory._exceptions import DocError, DocTooLarge
from robot_mcp_memory.documents import Owner, ProcessDoc
from robot_mcp_memory.documents.rows import (
    COLUMNS,
    row_to_doc,
    tags_json,
)
from robot_mcp_memory.limits import (
    MAX_DOC_BYTES,
    MAX_DOC_TERMS,
    MAX_ID_LENGTH,
    MAX_NOTE_CHARS,
)
from robot_mcp_memory.search import (
    DocTerms,
    Pairs,
    Tokenizer,
    VectorTable,
    document_texts,
    index_document,
    owner_key,
    rebuild_term_index,
    unindex_document,
)

__all__ = [
    "ProcessWriter",
    "Saved",
    "append_outcome",
    "document_terms",
    "next_candidate",
    "outcome_line",
    "robot_documents_refusal",
    "same_mission",
]

_log = get_logger("robot_mcp_memory.store")

_SEQUENTIAL_SUFFIXES = 99  # id-2 … id-99, then random ones: nobody can fill the family
_RANDOM_SUFFIX_TRIES = 16

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


def document_terms(
    tokenizer: Tokenizer, title: str, task_pattern: str, tags: str, body: str
) -> DocTerms:
    """A document's terms, refused past :data:`MAX_DOC_TERMS` distinct ones (the limit
    every backend applies, counted by the same tokenizer).

    Raises:
        DocTooLarge: ``field="document"``, ``unit="distinct words"``.
    """
    terms = tokenizer.document(title, task_pattern, tags, body)
    if terms.distinct > MAX_DOC_TERMS:
        raise DocTooLarge(
            terms.distinct,
            MAX_DOC_TERMS,
            unit="distinct words",
            detail=f"the document has {terms.distinct} distinct words; the limit is "
            f"{MAX_DOC_TERMS} per document: split it, or leave out generated text",
        )
    return terms


def same_mission(stored: str | None, incoming: str | None) -> bool:
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
        tokenizer: the index's tokenizer (a document's terms for the per-owner statistics).
    """

    def __init__(
        self,
        store: SqliteStore,
        *,
        robot_id: str,
        clock: Callable[[], datetime],
        vectors: VectorTable,
        tokenizer: Tokenizer,
    ) -> None:
        self.store = store
        self.robot_id = robot_id
        self._clock = clock
        self._vectors = vectors
        self._tokenizer = tokenizer

    def terms(self, title: str, task_pattern: str, tags: str, body: str) -> DocTerms:
        """A document's terms, refused past :data:`MAX_DOC_TERMS` distinct ones
        (:func:`document_terms`)."""
        return document_terms(self._tokenizer, title, task_pattern, tags, body)

    def save(
        self,
        doc: ProcessDoc,
        *,
        may_update: Callable[[Owner], bool] | None = None,
        max_robot_documents: int | None = None,
    ) -> Saved:
        """See :meth:`robot_mcp_memory.store.ProcessStore.save`.

        In a span ``memory.write`` (telemetry on): the id, sizes and whether it was created.
        """
        with telemetry.span(
            "memory.write",
            {"robot_mcp.memory.write": "save", "robot_mcp.memory.body_chars": len(doc.body)},
        ) as current:
            saved = self._save(doc, may_update, max_robot_documents)
            if current is not None:
                telemetry.set_attributes(
                    current,
                    **{
                        "robot_mcp.memory.id": saved.doc.id,
                        "robot_mcp.memory.created": saved.created,
                        "robot_mcp.memory.renamed": saved.renamed_from is not None,
                    },
                )
        return saved

    def _save(
        self,
        doc: ProcessDoc,
        may_update: Callable[[Owner], bool] | None,
        max_robot_documents: int | None,
    ) -> Saved:
        now = format_ts(self._clock())
        robot = doc.robot if doc.robot != "unknown" else self.robot_id
        base = doc.id
        # Terms and vectors are computed before the transaction (the text does not depend
        # on the final id), so the write lock is not held while they are.
        terms = self.terms(doc.title, doc.task_pattern, tags_json(doc.tags), doc.body)
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
                    if max_robot_documents is not None:
                        _check_robot_documents(conn, robot, max_robot_documents)
                    rowid = self._insert(conn, doc, candidate, robot, now)
                    created = True
                    break
                # A row the caller may not update is another mission's whatever its
                # source_mission_id says: the answer never depends on a document the caller
                # may not read (decision 0022).
                owner = Owner(
                    id=str(row["id"]), robot=str(row["robot"]), shared=bool(row["shared"])
                )
                if (may_update is None or may_update(owner)) and same_mission(
                    row["source_mission_id"], doc.source_mission_id
                ):
                    rowid = self._update(conn, doc, candidate, row, robot, now)
                    created = False
                    break
                n += 1
                candidate = next_candidate(base, n)
            stored = conn.execute(
                f"SELECT {COLUMNS} FROM processes WHERE id = ?",  # noqa: S608
                (candidate,),
            ).fetchone()
            index_document(
                conn, rowid, owner_key(str(stored["robot"]), bool(stored["shared"])), terms
            )
            self._vectors.write(conn, rowid, vectors)
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
        with (
            telemetry.span(
                "memory.write", {"robot_mcp.memory.write": "delete", "robot_mcp.memory.id": id}
            ),
            self.store.transaction() as conn,
        ):
            row = conn.execute("SELECT rowid FROM processes WHERE id = ?", (id,)).fetchone()
            if row is None:
                return False
            conn.execute("DELETE FROM processes WHERE id = ?", (id,))
            _unindex(conn, row["rowid"])
            unindex_document(conn, row["rowid"])
            self._vectors.write(conn, row["rowid"], None)
        self._written(int(row["rowid"]), None, "", False)
        return True

    def reindex(self) -> int:
        """Rebuild ``processes_fts`` (and, with an embedder, every document's vectors) from
        the rows; return how many documents it indexed.

        Flushes queued hot writes first, then deletes and refills the index and the
        per-owner statistics in one transaction; the vectors are then recomputed in
        batches (:meth:`sync_vectors`).
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
            n = rebuild_term_index(conn, self._tokenizer)
            self._vectors.clear_table(conn)
        self._vectors.sync()
        _log.info("processes_reindexed", indexed=n)
        return n

    def append_note(self, id: str, line: str) -> str | None:
        """Append ``line`` under the body's Outcome log, with the index entry and vectors,
        in one transaction; the new body, or None (unknown id, or over the size limit)."""
        with (
            telemetry.span(
                "memory.write", {"robot_mcp.memory.write": "note", "robot_mcp.memory.id": id}
            ),
            self.store.transaction() as conn,
        ):
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
            # The note is searchable like the rest of the body (tokenized under the write
            # lock: the body is only known here; at most a few milliseconds).
            terms = self._tokenizer.document(row["title"], row["task_pattern"], row["tags"], body)
            owner = owner_key(str(row["robot"]), bool(row["shared"]))
            index_document(conn, row["rowid"], owner, terms)
            # The whole-document vector follows the body (embedded under the write lock:
            # the body is only known here; one document is well under a millisecond).
            vectors = self._vectors.embed(
                [document_texts(doc.title, doc.task_pattern, doc.tags, body)]
            )
            self._vectors.write(conn, row["rowid"], vectors)
        self._written(int(row["rowid"]), vectors, doc.robot, doc.shared)
        return body

    def _written(self, rowid: int, vectors: Pairs | None, robot: str, shared: bool) -> None:
        """After a committed write: the in-memory vector index follows the table."""
        self._vectors.committed(rowid, vectors, robot, shared)


# --- helpers ------------------------------------------------------------------------


def next_candidate(base: str, n: int) -> str:
    """The id the collision rule tries ``n``-th: ``base-2`` … ``base-99``, then random.

    Past the sequential family the suffix is random (six hex digits), so no one — however
    many ids they hold — can fill every id another save would go to.
    """
    if n <= _SEQUENTIAL_SUFFIXES:
        return _suffixed(base, n)
    if n > _SEQUENTIAL_SUFFIXES + _RANDOM_SUFFIX_TRIES:
        raise DocError(
            "id",
            "conflict",
            f"id {base!r}, its suffixed forms up to {_suffixed(base, _SEQUENTIAL_SUFFIXES)!r} "
            f"and {_RANDOM_SUFFIX_TRIES} random ones are all taken; choose a different id",
        )
    return base[: MAX_ID_LENGTH - 7].rstrip("-") + "-" + secrets.token_hex(3)


def robot_documents_refusal(robot: str, owned: int, limit: int) -> DocTooLarge:
    """The refusal of a new document of ``robot``, which already owns ``owned``. Pure."""
    return DocTooLarge(
        owned + 1,
        limit,
        field="documents",
        unit="documents",
        detail=f"robot {robot!r} already has {owned} documents, the most one robot may "
        f"have ({limit}, MEMORY_ROBOT_MAX_DOCUMENTS): update an existing one (same id and "
        "source_mission_id) or delete one with delete_process",
    )


def _check_robot_documents(conn: sqlite3.Connection, robot: str, limit: int) -> None:
    """Refuse a new document of ``robot`` when it already owns ``limit`` (in the save's
    transaction, so concurrent saves cannot both pass)."""
    owned = int(
        conn.execute("SELECT count(*) FROM processes WHERE robot = ?", (robot,)).fetchone()[0]
    )
    if owned >= limit:
        raise robot_documents_refusal(robot, owned, limit)


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
