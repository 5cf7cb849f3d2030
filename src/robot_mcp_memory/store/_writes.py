"""The cold writes of :class:`~robot_mcp_memory.store.ProcessStore`: save, delete, revert,
merge, reindex, and the outcome note appended to a body.

Every write that changes a document's content (a save with other content, a revert, a
merge, a delete) first keeps the version it replaces in ``processes_revisions`` (its
markdown as :meth:`ProcessDoc.render` writes it, counters included, with the row's
``life`` and its owner: ``robot``, ``shared``) and bumps the row's ``revision``; the newest
``revisions_keep`` versions of the id are kept, older ones pruned through the kit's
chokepoint (``SqliteStore.prune``), all in the write's one transaction. A save with the
same content, and an outcome note, are not new revisions.

Lives (decision 0029): an id freed by a delete or a merge and written again by a save or a
load starts a new life (the id's highest life plus one), numbered from revision 1; an
earlier life's revisions stay under their own life number. A revert of a deleted id brings
the document back in the id's latest life (undoing the delete), after its kept revisions.

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
from robot_mcp_memory._exceptions import DamagedRow, DocError, DocTooLarge, RevisionConflict
from robot_mcp_memory.documents import Owner, ProcessDoc
from robot_mcp_memory.documents.rows import (
    COLUMNS,
    Row,
    row_to_doc,
    tags_json,
)
from robot_mcp_memory.limits import (
    MAX_COUNT,
    MAX_DOC_BYTES,
    MAX_DOC_TERMS,
    MAX_ID_LENGTH,
    MAX_NOTE_CHARS,
    REVISIONS_KEEP,
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
    "LATEST_LIFE_SQL",
    "Imported",
    "Merged",
    "ProcessWriter",
    "Saved",
    "append_outcome",
    "document_terms",
    "import_verdict",
    "next_candidate",
    "outcome_line",
    "outcome_lines",
    "robot_documents_refusal",
    "same_mission",
]

_log = get_logger("robot_mcp_memory.store")

_ROW = f"{COLUMNS}, revision, life"
"""The columns a write reads of the row it replaces or keeps (after ``rowid``)."""

LATEST_LIFE_SQL = (
    "SELECT max(life) FROM (SELECT life FROM processes WHERE id = ? "
    "UNION ALL SELECT life FROM processes_revisions WHERE doc_id = ?)"
)
"""The latest life of an id (its row's, else the highest kept; NULL when neither), bound
``(id, id)``."""

_SEQUENTIAL_SUFFIXES = 99  # id-2 … id-99, then random ones: nobody can fill the family
_RANDOM_SUFFIX_TRIES = 16

_OUTCOME_HEADING = re.compile(r"^##[ \t]+outcome log[ \t]*$", re.MULTILINE | re.IGNORECASE)
_SECTION_END = re.compile(r"^#{1,2}[ \t]", re.MULTILINE)


@dataclass(frozen=True)
class Saved:
    """The outcome of :meth:`ProcessStore.save <robot_mcp_memory.store.ProcessStore.save>`.

    ``doc`` is the document as stored (its final id, counters, timestamps); ``created`` is
    False when an existing document was updated; ``renamed_from`` is the id the caller
    asked for when the document was stored under a suffixed one (``-2``, ``-3``…);
    ``revision`` is the stored document's revision (a save that changed nothing leaves it).
    """

    doc: ProcessDoc
    created: bool
    renamed_from: str | None
    revision: int = 1


@dataclass(frozen=True)
class Imported:
    """What ``import_document`` did: ``action`` is ``inserted``, ``skipped`` (the same
    document is stored under that id), ``conflict`` (another one is; nothing written) or
    ``suffixed`` (stored under ``id``, a suffixed form of the document's id)."""

    action: str
    id: str


@dataclass(frozen=True)
class Merged:
    """The outcome of a merge: the kept document as stored, and the revision (of its
    life ``merged_life``) under which the merged-away document was kept (revert it to
    bring that document back)."""

    kept: Saved
    merged_id: str
    merged_revision: int
    merged_life: int = 1


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
        revisions_keep: earlier versions kept per document (``MEMORY_REVISIONS_KEEP``).
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
        revisions_keep: int = REVISIONS_KEEP,
    ) -> None:
        self.store = store
        self.robot_id = robot_id
        self._clock = clock
        self._vectors = vectors
        self._tokenizer = tokenizer
        self.revisions_keep = revisions_keep

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
        expected_revision: int | None = None,
    ) -> Saved:
        """See :meth:`robot_mcp_memory.store.ProcessStore.save`.

        In a span ``memory.write`` (telemetry on): the id, sizes and whether it was created.
        """
        with telemetry.span(
            "memory.write",
            {"robot_mcp.memory.write": "save", "robot_mcp.memory.body_chars": len(doc.body)},
        ) as current:
            saved = self._save(doc, may_update, max_robot_documents, expected_revision)
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
        expected_revision: int | None,
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
                    f"SELECT rowid, {_ROW} FROM processes WHERE id = ?",  # noqa: S608
                    (candidate,),
                ).fetchone()
                if row is None:
                    if expected_revision and candidate == base:
                        raise RevisionConflict(base, expected_revision, None)
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
                updatable = may_update is None or may_update(owner)
                if updatable and expected_revision is not None and candidate == base:
                    # The caller names the revision it edited: this is its document, whatever
                    # the mission, and it must still be at that revision (issue 22).
                    if int(row["revision"]) != expected_revision:
                        raise RevisionConflict(base, expected_revision, int(row["revision"]))
                    rowid = self._update(conn, doc, candidate, row, robot, now, "save")
                    created = False
                    break
                if updatable and same_mission(row["source_mission_id"], doc.source_mission_id):
                    rowid = self._update(conn, doc, candidate, row, robot, now, "save")
                    created = False
                    break
                n += 1
                candidate = next_candidate(base, n)
            stored = self._reindexed(conn, candidate, rowid, terms, vectors)
        self._written(rowid, vectors, str(stored["robot"]), bool(stored["shared"]))
        return Saved(
            doc=row_to_doc(stored),
            created=created,
            renamed_from=base if candidate != base else None,
            revision=int(stored["revision"]),
        )

    def _reindexed(
        self,
        conn: sqlite3.Connection,
        id: str,
        rowid: int,
        terms: DocTerms,
        vectors: Pairs | None,
    ) -> sqlite3.Row:
        """The statistics and vectors of the row just written; the row as stored."""
        stored: sqlite3.Row = conn.execute(
            f"SELECT {_ROW} FROM processes WHERE id = ?",  # noqa: S608
            (id,),
        ).fetchone()
        index_document(conn, rowid, owner_key(str(stored["robot"]), bool(stored["shared"])), terms)
        self._vectors.write(conn, rowid, vectors)
        return stored

    def _keep_revision(
        self, conn: sqlite3.Connection, row: sqlite3.Row, reason: str, now: str
    ) -> None:
        """Keep ``row`` (the version being replaced, read with :data:`_ROW`) as a revision
        of its life, with its owner; prune past the bound.

        A row too damaged to render is not kept (logged): the write it precedes goes on.
        """
        id = str(row["id"])
        try:
            markdown = row_to_doc(row).render()
        except DamagedRow:
            _log.warning("process_revision_skipped", id=id, reason="damaged_row")
            return
        conn.execute(
            "INSERT OR REPLACE INTO processes_revisions (doc_id, life, revision, replaced, "
            "reason, markdown, robot, shared) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                id,
                int(row["life"]),
                int(row["revision"]),
                now,
                reason,
                markdown,
                str(row["robot"]),
                int(bool(row["shared"])),
            ),
        )
        # The kit's chokepoint, nested in this transaction (a savepoint), confined to this
        # document's revisions (the primary key's prefix serves it: no table scan).
        self.store.prune(
            "processes_revisions", keep_last=self.revisions_keep, within={"doc_id": id}
        )

    def _insert(
        self,
        conn: sqlite3.Connection,
        doc: ProcessDoc,
        id: str,
        robot: str,
        now: str,
        *,
        resume_life: bool = False,
    ) -> int:
        """Insert ``doc`` as the free ``id``: in a new life of the id (its highest kept
        life plus one, 1 for a new id), at revision 1; with ``resume_life`` (a revert
        bringing a deleted id back) in its latest life, after that life's kept revisions.
        """
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
        latest = conn.execute(
            "SELECT coalesce(max(life), 0) FROM processes_revisions WHERE doc_id = ?", (id,)
        ).fetchone()[0]
        life = int(latest) if resume_life and latest else int(latest) + 1
        conn.execute(
            "UPDATE processes SET life = ?, revision = 1 + coalesce((SELECT max(revision) "
            "FROM processes_revisions WHERE doc_id = ? AND life = ?), 0) WHERE rowid = ?",
            (life, id, life, rowid),
        )
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
        reason: str,
    ) -> int:
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
            self._keep_revision(conn, row, reason, now)
        # Content columns only: the counters belong to the hot path (n = n + 1 on the
        # writer thread) and an absolute write here could undo a queued increment.
        conn.execute(
            "UPDATE processes SET title = ?, task_pattern = ?, tags = ?, robot = ?, "
            "updated = ?, source_mission_id = COALESCE(?, source_mission_id), body = ?, "
            "shared = ?, revision = revision + ? WHERE id = ?",
            (
                doc.title,
                doc.task_pattern,
                tags,
                new_robot,
                now,
                doc.source_mission_id,
                doc.body,
                int(doc.shared),
                int(changed),
                id,
            ),
        )
        _index(conn, row["rowid"], id, doc.title, doc.task_pattern, tags, doc.body)
        return int(row["rowid"])

    def delete(self, id: str, *, reason: str = "delete") -> bool:
        """Remove the document and its index entry in one transaction, keeping its last
        version as a revision (``reason``); False if unknown."""
        with (
            telemetry.span(
                "memory.write", {"robot_mcp.memory.write": "delete", "robot_mcp.memory.id": id}
            ),
            self.store.transaction() as conn,
        ):
            row = conn.execute(
                f"SELECT rowid, {_ROW} FROM processes WHERE id = ?",  # noqa: S608
                (id,),
            ).fetchone()
            if row is None:
                return False
            self._keep_revision(conn, row, reason, format_ts(self._clock()))
            conn.execute("DELETE FROM processes WHERE id = ?", (id,))
            _unindex(conn, row["rowid"])
            unindex_document(conn, row["rowid"])
            self._vectors.write(conn, row["rowid"], None)
        self._written(int(row["rowid"]), None, "", False)
        return True

    def import_document(self, doc: ProcessDoc, *, suffix: bool) -> Imported:
        """Store ``doc`` exactly as given (timestamps, counters, robot), for ``load``.

        The same document already under its id (the same rendered markdown) is skipped;
        another one there is a conflict, which writes nothing unless ``suffix``, when the
        document goes to the first free id of the save rule's family (``-2``, ``-3``…).
        """
        markdown = doc.render()
        terms = self.terms(doc.title, doc.task_pattern, tags_json(doc.tags), doc.body)
        vectors = self._vectors.embed(
            [document_texts(doc.title, doc.task_pattern, doc.tags, doc.body)]
        )
        with self.store.transaction() as conn:
            candidate, n = doc.id, 1
            while True:
                row = conn.execute(
                    f"SELECT {COLUMNS} FROM processes WHERE id = ?",  # noqa: S608
                    (candidate,),
                ).fetchone()
                if row is None:
                    break
                if candidate == doc.id:
                    verdict = import_verdict(row, doc.id, markdown, suffix=suffix)
                    if verdict is not None:
                        return verdict
                n += 1
                candidate = next_candidate(doc.id, n)
            stored_doc = doc if candidate == doc.id else doc.model_copy(update={"id": candidate})
            updated = format_ts(doc.updated) if doc.updated else format_ts(self._clock())
            rowid = self._insert(conn, stored_doc, candidate, doc.robot, updated)
            stored = self._reindexed(conn, candidate, rowid, terms, vectors)
        self._written(rowid, vectors, str(stored["robot"]), bool(stored["shared"]))
        return Imported("inserted" if candidate == doc.id else "suffixed", candidate)

    def revert(self, id: str, revision: int, *, life: int | None = None) -> Saved | None:
        """Make revision ``revision`` of ``id``'s life ``life`` (None: its latest) the
        current document again; None when that revision is not kept.

        The current version is kept as a revision (``reason="revert"``) and the revision's
        content becomes a new revision of the current life. The counters stay the current
        ones (outcomes are records of what happened), except that reverting, in its own
        life, the version a merge replaced takes the merged document's counts off again; a
        document that no longer exists (deleted, merged away) comes back in its latest
        life, with the counters of the revision.
        """
        life = self._life(id) if life is None else life
        found = self.store.query_one(
            "SELECT markdown, reason, replaced FROM processes_revisions "
            "WHERE doc_id = ? AND life = ? AND revision = ?",
            (id, life, revision),
        )
        if found is None:
            return None
        doc = ProcessDoc.parse(str(found["markdown"]))
        merged = self._merged_counters(str(found["reason"]), str(found["replaced"]))
        terms = self.terms(doc.title, doc.task_pattern, tags_json(doc.tags), doc.body)
        vectors = self._vectors.embed(
            [document_texts(doc.title, doc.task_pattern, doc.tags, doc.body)]
        )
        now = format_ts(self._clock())
        with self.store.transaction() as conn:
            row = conn.execute(
                f"SELECT rowid, {_ROW} FROM processes WHERE id = ?",  # noqa: S608
                (id,),
            ).fetchone()
            if row is None:
                rowid = self._insert(conn, doc, id, doc.robot, now, resume_life=True)
                created = True
            else:
                rowid = self._update(conn, doc, id, row, doc.robot, now, "revert")
                if doc.source_mission_id is None:  # COALESCE keeps the stored one
                    conn.execute(
                        "UPDATE processes SET source_mission_id = NULL WHERE id = ?", (id,)
                    )
                if merged is not None and int(row["life"]) == life:
                    # undoing a merge: its counts go with it
                    conn.execute(
                        "UPDATE processes SET success_count = max(success_count - ?, 0), "
                        "failure_count = max(failure_count - ?, 0) WHERE id = ?",
                        (*merged, id),
                    )
                created = False
            stored = self._reindexed(conn, id, rowid, terms, vectors)
        self._written(rowid, vectors, str(stored["robot"]), bool(stored["shared"]))
        return Saved(
            doc=row_to_doc(stored),
            created=created,
            renamed_from=None,
            revision=int(stored["revision"]),
        )

    def _life(self, id: str) -> int:
        """The latest life of ``id``: its row's, else the highest kept (0: none)."""
        row = self.store.query_one(LATEST_LIFE_SQL, (id, id))
        return int(row[0]) if row is not None and row[0] is not None else 0

    def _merged_counters(self, reason: str, replaced: str) -> tuple[int, int] | None:
        """For a revision a merge replaced (``merge:<id>:<rev>``, kept at ``replaced``):
        the merged-away document's (successes, failures) as the merge added them; else
        None. The merged-away version is the one the same merge kept (``merged``, the same
        ``replaced``), whichever life of that id it was."""
        if not reason.startswith("merge:"):
            return None
        merged_id, _, rev = reason[len("merge:") :].rpartition(":")
        row = self.store.query_one(
            "SELECT markdown FROM processes_revisions WHERE doc_id = ? AND revision = ? "
            "AND reason = 'merged' AND replaced = ?",
            (merged_id, int(rev) if rev.isdigit() else -1, replaced),
        )
        if row is None:  # pruned since: the counts stay
            return None
        gone = ProcessDoc.parse(str(row["markdown"]))
        return gone.success_count, gone.failure_count

    def merge(self, keep_id: str, merge_id: str) -> Merged | None:
        """Merge document ``merge_id`` into ``keep_id``; None if either is unknown.

        In one transaction: ``keep_id`` gets the sum of both documents' counters (saturating
        at ``MAX_COUNT``), the later ``last_used``, and the outcome-log lines of
        ``merge_id`` appended under its ``## Outcome log`` (its other text is kept; the
        version before the merge is kept as a revision, ``reason="merge:<merge_id>:<rev>"``);
        ``merge_id`` is kept as revision ``rev`` of its life (``reason="merged"``) and
        deleted, which ends that life. Undo: revert ``keep_id`` to its previous revision
        (which takes the merged document's counters off again) and ``merge_id`` to
        :attr:`Merged.merged_revision` of :attr:`Merged.merged_life`.
        Queued outcome counts are written first, so none is lost.
        """
        if keep_id == merge_id:
            raise DocError("merge_id", "invalid", "a document cannot be merged into itself")
        self.store.flush()
        now = format_ts(self._clock())
        with self.store.transaction() as conn:
            keep, gone = (
                conn.execute(
                    f"SELECT rowid, {_ROW}, last_success FROM processes "  # noqa: S608
                    "WHERE id = ?",
                    (id,),
                ).fetchone()
                for id in (keep_id, merge_id)
            )
            if keep is None or gone is None:
                return None
            kept_doc = row_to_doc(keep)
            gone_doc = row_to_doc(gone)
            body = kept_doc.body
            for line in outcome_lines(gone_doc.body):
                body = append_outcome(body, line)
            kept_doc.body = body
            if len(kept_doc.render().encode("utf-8", "surrogatepass")) > MAX_DOC_BYTES:
                raise DocTooLarge(
                    len(kept_doc.render().encode("utf-8", "surrogatepass")),
                    detail=f"merging the outcome log of {merge_id!r} would take {keep_id!r} "
                    f"past {MAX_DOC_BYTES // 1024} KiB; shorten one of them first",
                )
            terms = self.terms(
                kept_doc.title, kept_doc.task_pattern, tags_json(kept_doc.tags), body
            )
            vectors = self._vectors.embed(
                [document_texts(kept_doc.title, kept_doc.task_pattern, kept_doc.tags, body)]
            )
            merged_revision = int(gone["revision"])
            self._keep_revision(conn, gone, "merged", now)
            conn.execute("DELETE FROM processes WHERE id = ?", (merge_id,))
            _unindex(conn, gone["rowid"])
            unindex_document(conn, gone["rowid"])
            self._vectors.write(conn, gone["rowid"], None)
            self._keep_revision(conn, keep, f"merge:{merge_id}:{merged_revision}", now)
            last_used = max((v for v in (keep["last_used"], gone["last_used"]) if v), default=None)
            last_success = max(
                (v for v in (keep["last_success"], gone["last_success"]) if v), default=None
            )
            conn.execute(
                "UPDATE processes SET body = ?, updated = ?, revision = revision + 1, "  # noqa: S608
                f"success_count = min(success_count + ?, {MAX_COUNT}), "
                f"failure_count = min(failure_count + ?, {MAX_COUNT}), "
                "last_used = ?, last_success = ? WHERE id = ?",
                (
                    body,
                    now,
                    gone_doc.success_count,
                    gone_doc.failure_count,
                    last_used,
                    last_success,
                    keep_id,
                ),
            )
            _index(
                conn,
                keep["rowid"],
                keep_id,
                kept_doc.title,
                kept_doc.task_pattern,
                keep["tags"],
                body,
            )
            stored = self._reindexed(conn, keep_id, int(keep["rowid"]), terms, vectors)
        self._written(int(gone["rowid"]), None, "", False)
        self._written(int(keep["rowid"]), vectors, str(stored["robot"]), bool(stored["shared"]))
        return Merged(
            kept=Saved(
                doc=row_to_doc(stored),
                created=False,
                renamed_from=None,
                revision=int(stored["revision"]),
            ),
            merged_id=merge_id,
            merged_revision=merged_revision,
            merged_life=int(gone["life"]),
        )

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


_OUTCOME_LINE = re.compile(r"^- \S+ (?:success|failure): .*$", re.MULTILINE)


def outcome_lines(body: str) -> list[str]:
    """Pure: the ``- <ts> success|failure: <note>`` lines under a body's ``## Outcome log``."""
    heading = _OUTCOME_HEADING.search(body)
    if heading is None:
        return []
    following = _SECTION_END.search(body, heading.end())
    section = body[heading.end() : following.start() if following else len(body)]
    return _OUTCOME_LINE.findall(section)


def import_verdict(row: Row, id: str, markdown: str, *, suffix: bool) -> Imported | None:
    """What ``import_document`` answers when ``id`` is already taken by ``row``: ``skipped``
    for the same document (its rendering equals ``markdown``), ``conflict`` for another one
    unless ``suffix`` (None: go on to the next free id). Pure; every backend's."""
    try:
        same = row_to_doc(row).render() == markdown
    except DamagedRow:
        same = False
    if same:
        return Imported("skipped", id)
    return None if suffix else Imported("conflict", id)


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
