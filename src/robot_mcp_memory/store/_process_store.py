"""ProcessStore: process documents as rows of ``index.db`` (memory spec §4, decision 0002).

The row is the source of truth: a document's markdown is rendered from its row on the way
out and nothing is ever written to a markdown file. Each document's row, its search
index entry and its vectors are written in ONE cold transaction
(:meth:`SqliteStore.transaction`), so they cannot disagree and a kill -9 leaves either the
old or the new document. The cold writes are :mod:`._writes`'; the vectors
:class:`~robot_mcp_memory.search.VectorTable`'s; this module holds the reads, the
outcomes and the lifecycle.

Which path a write takes follows its kind (DESIGN §4):

- cold, on the caller's thread, never dropped: :meth:`ProcessStore.save`,
  :meth:`~ProcessStore.delete`, :meth:`~ProcessStore.reindex`, and the note that
  :meth:`~ProcessStore.record_outcome` appends to the body;
- hot, on the kit's writer thread (``SqliteStore.enqueue``): the outcome counters and
  ``last_used``, as *relative* updates (``n = n + 1``). A save never writes the counters of
  an existing row, so the two paths never overwrite each other.

With an embedder (decision 0011), each write also stores the document's two vectors in
``processes_vectors`` in the same transaction, and keeps the in-memory
:class:`~robot_mcp_memory.search.VectorIndex` in step after it commits; without one, a
write drops the document's vectors, so they are recomputed when an embedder next opens
the file (:meth:`ProcessStore.sync_vectors`).

Search (:meth:`ProcessStore.find`) is :mod:`robot_mcp_memory.search`'s: robot-aware words,
typo repair, bm25 ranked in SQL (lexical) or fused with the cosine (hybrid), x
reliability. A query is never refused for its length: past 2 KiB it is searched by its
first 2 KiB (:func:`truncate_query` says whether it was cut, DESIGN §5).

Reads are tolerant of a damaged row: a counter or timestamp the document model
would refuse (a REAL counter left by an overflow, a hand-edited date) is repaired on the
way out and logged as ``process_row_repaired``; a row that cannot be read at all is left
out of searches and lists (logged as ``process_row_damaged``) and raises
:class:`DamagedRow` from :meth:`ProcessStore.get`. Nothing here ever fails a whole search
because of one row, and :meth:`ProcessStore.delete` never reads the document, so any row
can be deleted.

All methods are thread-safe (the kit store is).
"""

from __future__ import annotations

import builtins
import json
import math
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from robot_mcp_kit.log import get_logger
from robot_mcp_kit.models import format_ts, utc_now
from robot_mcp_kit.store import SqliteStore
from robot_mcp_memory._exceptions import DocError
from robot_mcp_memory.documents import Owner, ProcessDoc
from robot_mcp_memory.documents.rows import (
    COLUMNS,
    readable,
    row_to_doc,
    scope_sql,
)
from robot_mcp_memory.limits import (
    MAX_COUNT,
    MAX_LIMIT,
    NEAR_DUPLICATE_CANDIDATES,
    NEAR_DUPLICATE_PROBE_TERMS,
    NEAR_DUPLICATE_SIMILARITY,
    REVISIONS_KEEP,
    STALE_FAILURE_SHARE,
    STALE_MIN_OUTCOMES,
    STALE_WINDOW,
    clamp,
)
from robot_mcp_memory.search import (
    Found,
    ProcessSearch,
    VectorTable,
    index_document,
    owner_key,
    unindex_document,
    visible_owners,
)
from robot_mcp_memory.store._writes import (
    LATEST_LIFE_SQL,
    Imported,
    Merged,
    ProcessWriter,
    Saved,
    outcome_line,
)

if TYPE_CHECKING:
    from robot_mcp_memory.search import Embedder

__all__ = [
    "DocState",
    "NearDuplicate",
    "ProcessStore",
    "Revision",
    "near_copies",
    "probe_terms",
    "revision_owner",
    "stale_sql",
]

_log = get_logger("robot_mcp_memory.store")

_TERMS_BATCH = 500
"""Documents counted into the term statistics per transaction by :meth:`ProcessStore.sync_terms`."""


def stale_sql(prefix: str = "") -> str:
    """The SQL condition "this row is stale" (see :class:`DocState`), on ``prefix``'s
    columns; constants only."""
    outcomes = f"length({prefix}recent_outcomes)"
    failures = f"({outcomes} - length(replace({prefix}recent_outcomes, 'f', '')))"
    return (
        f"({outcomes} >= {int(STALE_MIN_OUTCOMES)} AND "
        f"{failures} > {float(STALE_FAILURE_SHARE)} * {outcomes})"
    )


@dataclass(frozen=True)
class DocState:
    """What the store knows about a document beyond its markdown.

    ``revision`` is its current revision, ``life`` the life of its id it is in (1 for an
    id's first, decision 0029); ``recent`` its last
    :data:`~robot_mcp_memory.limits.STALE_WINDOW` outcomes, oldest first (``s``/``f``);
    ``last_success`` when it last succeeded (None: never, or before schema version 5).
    ``stale`` is True when at least ``STALE_MIN_OUTCOMES`` recent outcomes are recorded
    and more than ``STALE_FAILURE_SHARE`` of them failed: a mark, never a deletion.
    """

    revision: int
    recent: str
    last_success: str | None
    life: int = 1

    @property
    def stale(self) -> bool:
        """See the class docstring (the same rule as :func:`stale_sql`)."""
        failures = self.recent.count("f")
        return len(self.recent) >= STALE_MIN_OUTCOMES and failures > STALE_FAILURE_SHARE * len(
            self.recent
        )


@dataclass(frozen=True)
class Revision:
    """One kept earlier version of a document: its number, when it was replaced (or
    deleted) and by what (``save``, ``revert``, ``merge:<id>:<rev>``, ``merged``,
    ``delete``); the life of its id it belongs to; and who owned it then (``robot`` and
    ``shared`` of the version itself, which decide who may read it; ``robot`` None: not
    known, the admin's only)."""

    revision: int
    replaced: str
    reason: str
    life: int = 1
    robot: str | None = None
    shared: bool = False


@dataclass(frozen=True)
class NearDuplicate:
    """A stored document that is a near-copy of another: its id, title and similarity
    (cosine of the two documents' weighted term frequencies, 0..1)."""

    id: str
    title: str
    similarity: float


class ProcessStore:
    """The process documents of one ``index.db`` (decision 0002).

    Args:
        store: the kit store opened on :data:`robot_mcp_memory.db.SCHEMA`
            (:func:`robot_mcp_memory.db.open_index`). The ProcessStore owns it from here:
            :meth:`close` closes it.
        robot_id: written as a saved document's ``robot`` when the document says
            ``unknown`` (the ``ROBOT_ID`` of the server).
        clock: the time source (injected by tests).
        embedder: with one, :meth:`find` is hybrid (bm25 fused with cosine, decision 0011)
            and every write keeps the document's vectors beside its row; construction
            then brings the stored vectors up to date (:meth:`sync_vectors`). Without
            one, search is lexical and a write drops the document's stale vectors.
        revisions_keep: earlier versions kept per document (``MEMORY_REVISIONS_KEEP``).
    """

    def __init__(
        self,
        store: SqliteStore,
        *,
        robot_id: str = "unknown",
        clock: Callable[[], datetime] = utc_now,
        embedder: Embedder | None = None,
        revisions_keep: int = REVISIONS_KEEP,
    ) -> None:
        self.store = store
        self._clock = clock
        self._vector_table = VectorTable(store, embedder)
        self.embedder = self._vector_table.embedder
        self._vectors = self._vector_table.index
        self._search = ProcessSearch(store, embedder=self.embedder, vectors=self._vectors)
        self._writer = ProcessWriter(
            store,
            robot_id=robot_id,
            clock=clock,
            vectors=self._vector_table,
            tokenizer=self._search.tokenizer,
            revisions_keep=revisions_keep,
        )
        self.sync_terms()
        if self.embedder is not None:
            self.sync_vectors()

    @property
    def robot_id(self) -> str:
        """The ``ROBOT_ID`` a saved document's ``robot: unknown`` becomes."""
        return self._writer.robot_id

    @property
    def search_mode(self) -> str:
        """``"hybrid"`` (bm25 fused with cosine) or ``"lexical"`` (bm25 alone)."""
        return self._search.mode

    # --- reads ---------------------------------------------------------------------

    def get(self, id: str) -> ProcessDoc | None:
        """The document with this id, or None. Sees committed rows (hot counter updates
        still in the queue are not yet visible; ``store.flush()`` first if that matters)."""
        row = self.store.query_one(
            f"SELECT {COLUMNS} FROM processes WHERE id = ?",  # noqa: S608 - constant columns
            (id,),
        )
        return None if row is None else row_to_doc(row)

    def owner(self, id: str) -> Owner | None:
        """Who the document ``id`` belongs to, or None; reads two columns, never the body.

        For visibility checks: it works on a row too damaged to read as a document.
        """
        row = self.store.query_one("SELECT robot, shared FROM processes WHERE id = ?", (id,))
        if row is None:
            return None
        return Owner(id=id, robot=str(row["robot"]), shared=bool(row["shared"]))

    def find(self, query: str, k: int = 3, *, robots: Collection[str] | None = None) -> list[Found]:
        """The ``k`` best documents for a natural-language ``query``, best first.

        Words, typo repair and the lexical or hybrid ranking are
        :mod:`robot_mcp_memory.search`'s. Never raises for the text of a query (operators,
        quotes, emoji, control characters are all inert, any length is searched by its
        first 2 KiB), and a damaged row is left out rather than failing the search.

        Args:
            query: any text.
            k: clamped to ``1..MAX_K``.
            robots: None for every document; otherwise only documents whose ``robot`` is
                one of these, plus the ``shared`` ones (an empty collection: shared only).
                Both signals obey it: the semantic one reads its rows through the same SQL
                filter as the lexical one.
        """
        return self._search.find(query, k, robots=robots)

    def list(
        self,
        limit: int = 50,
        offset: int = 0,
        *,
        robots: Collection[str] | None = None,
        stale: bool | None = None,
    ) -> list[ProcessDoc]:
        """Documents ordered by id; ``limit`` clamped to ``1..MAX_LIMIT``.

        ``robots`` filters as in :meth:`find`; ``stale`` True or False keeps only the
        documents that are (are not) stale (:class:`DocState`). A damaged row is left out
        (logged).
        """
        where, scope_params = scope_sql(robots, "")
        if stale is not None:
            marked = stale_sql() if stale else f"NOT {stale_sql()}"
            where = f"{where} AND {marked}" if where else marked
        rows = self.store.query(
            f"SELECT {COLUMNS} FROM processes "  # noqa: S608 - constant columns
            f"{'WHERE ' + where if where else ''} ORDER BY id LIMIT ? OFFSET ?",
            (*scope_params, clamp(limit, 1, MAX_LIMIT), max(0, int(offset))),
        )
        return [doc for doc in map(readable, rows) if doc is not None]

    def count(self, *, robots: Collection[str] | None = None) -> int:
        """How many documents there are (``robots`` filters as in :meth:`find`)."""
        where, scope_params = scope_sql(robots, "")
        row = self.store.query_one(
            f"SELECT count(*) FROM processes {'WHERE ' + where if where else ''}",  # noqa: S608
            scope_params,
        )
        return int(row[0]) if row is not None else 0

    def states(self, ids: Collection[str]) -> dict[str, DocState]:
        """The :class:`DocState` of each of ``ids`` that exists (one read)."""
        if not ids:
            return {}
        rows = self.store.query(
            "SELECT id, revision, recent_outcomes, last_success, life FROM processes "
            "WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(sorted(set(ids))),),
        )
        return {
            str(r["id"]): DocState(
                revision=int(r["revision"]),
                recent=str(r["recent_outcomes"] or ""),
                last_success=r["last_success"],
                life=int(r["life"]),
            )
            for r in rows
        }

    def lives(self, id: str) -> builtins.list[int]:
        """The lives of ``id`` that have a row or a kept revision, oldest first (the last
        is the latest: the current document's, or the deleted one's)."""
        return [
            int(r[0])
            for r in self.store.query(
                "SELECT life FROM processes WHERE id = ? "
                "UNION SELECT life FROM processes_revisions WHERE doc_id = ? ORDER BY 1",
                (id, id),
            )
        ]

    def revisions(self, id: str, *, life: int | None = None) -> builtins.list[Revision]:
        """The kept earlier versions of ``id`` in life ``life`` (None: its latest life, the
        current document's or, after a delete, the deleted one's), newest first."""
        kept = []
        for r in self.store.query(
            # A revision kept before schema version 6 has no owner columns: its markdown is
            # read for them (only then).
            "SELECT revision, replaced, reason, life, robot, shared, CASE WHEN robot IS NULL "  # noqa: S608 - constant SQL
            "AND shared IS NULL THEN markdown END AS unowned FROM processes_revisions "
            f"WHERE doc_id = ? AND life = coalesce(?, ({LATEST_LIFE_SQL})) "
            "ORDER BY revision DESC",
            (id, life, id, id),
        ):
            robot, shared = (
                (None if r["robot"] is None else str(r["robot"]), bool(r["shared"]))
                if r["unowned"] is None
                else revision_owner(str(r["unowned"]))
            )
            kept.append(
                Revision(
                    int(r["revision"]),
                    str(r["replaced"]),
                    str(r["reason"]),
                    int(r["life"]),
                    robot,
                    shared,
                )
            )
        return kept

    def get_revision(self, id: str, revision: int, *, life: int | None = None) -> ProcessDoc | None:
        """Revision ``revision`` of ``id``'s life ``life`` (None: its latest) as it was
        (counters of then), or None if it is not kept. The current revision (of the current
        life) is :meth:`get`'s document."""
        row = self.store.query_one(
            "SELECT markdown FROM processes_revisions WHERE doc_id = ? AND revision = ? "  # noqa: S608 - constant SQL
            f"AND life = coalesce(?, ({LATEST_LIFE_SQL}))",
            (id, revision, life, id, id),
        )
        if row is not None:
            return ProcessDoc.parse(str(row["markdown"]))
        state = self.states([id]).get(id)
        if state is None or state.revision != revision or life not in (None, state.life):
            return None
        return self.get(id)

    def near_duplicates(
        self, id: str, *, robots: Collection[str] | None = None
    ) -> builtins.list[NearDuplicate]:
        """Stored documents (within ``robots``, as :meth:`find` filters) that are near-copies
        of document ``id``, most similar first.

        Candidates come from the per-owner statistics the ranking reads (decision 0022), of
        the owners the call may read only: the documents holding most of ``id``'s
        :data:`NEAR_DUPLICATE_PROBE_TERMS` rarest terms (those another document holds too;
        a near-copy shares them, an unrelated document does not), at least half of them,
        the :data:`NEAR_DUPLICATE_CANDIDATES` best. One is a near-copy when the cosine of the
        two documents' weighted term frequencies is at least
        :data:`NEAR_DUPLICATE_SIMILARITY`. A few indexed reads, no search.
        """
        mine = self._terms_of([id]).get(id)
        if not mine:
            return []
        owners = None if robots is None else visible_owners(robots)
        in_owners = "" if owners is None else "AND o.owner IN (SELECT value FROM json_each(?))"
        scope = () if owners is None else (json.dumps(owners),)
        df = {
            str(r[0]): int(r[1])
            for r in self.store.query(
                "SELECT o.term, sum(o.docs) FROM processes_owner_terms AS o "  # noqa: S608
                f"WHERE o.term IN (SELECT value FROM json_each(?)) {in_owners} GROUP BY o.term",
                (json.dumps(sorted(mine)), *scope),
            )
        }
        probe = probe_terms(mine, df)
        if not probe:
            return []
        rows = self.store.query(
            "SELECT d.id, d.title FROM (SELECT p.doc_rowid AS rid, count(*) AS hits "  # noqa: S608
            "FROM processes_owner_terms AS o JOIN processes_postings AS p "
            "ON p.owner = o.owner AND p.term = o.term "
            f"WHERE o.term IN (SELECT value FROM json_each(?)) {in_owners} "
            "GROUP BY p.doc_rowid HAVING count(*) >= ?) AS c "
            "JOIN processes AS d ON d.rowid = c.rid "
            "WHERE d.id <> ? ORDER BY c.hits DESC, d.id LIMIT ?",
            # A near-copy holds most of the probe terms: the others are not even compared.
            (json.dumps(probe), *scope, (len(probe) + 1) // 2, id, NEAR_DUPLICATE_CANDIDATES),
        )
        if not rows:
            return []
        theirs = self._terms_of([str(r[0]) for r in rows])
        return near_copies(mine, [(str(r[0]), str(r[1]), theirs.get(str(r[0]), {})) for r in rows])

    def _terms_of(self, ids: Collection[str]) -> dict[str, dict[str, float]]:
        rows = self.store.query(
            "SELECT p.id, l.terms FROM processes AS p JOIN processes_lengths AS l "
            "ON l.doc_rowid = p.rowid WHERE p.id IN (SELECT value FROM json_each(?))",
            (json.dumps(sorted(set(ids))),),
        )
        return {str(r[0]): {str(t): float(f) for t, f in json.loads(r[1]).items()} for r in rows}

    # --- cold writes (._writes) ---------------------------------------------------

    def save(
        self,
        doc: ProcessDoc,
        *,
        may_update: Callable[[Owner], bool] | None = None,
        max_robot_documents: int | None = None,
        expected_revision: int | None = None,
    ) -> Saved:
        """Insert or update a document; row, index and statistics in one transaction (cold).

        Collision rules (memory spec §5): if a document with this id exists, may be updated
        by the caller and comes from the same teaching mission — equal
        ``source_mission_id``, or either one missing — it is updated in place: content
        replaced, ``updated`` bumped, ``created``, the counters and ``last_used`` kept.
        Otherwise the document goes to ``id-2``, then ``id-3``… ``id-99``, then an id with
        a random suffix (updating the first of those it may update and that is from its
        mission). A new document keeps the counters and timestamps it carries (a copy
        between deployments stays a copy); ``created`` defaults to now.

        ``may_update``, when given, is asked inside the save's transaction about each
        existing row the rule meets; a row it refuses is passed over like another
        mission's, without looking at its ``source_mission_id`` (a robot token's save never
        updates, and never learns more than "taken" about, a document it may not read:
        decision 0022). ``max_robot_documents`` bounds how many documents the saved
        document's robot may own: a new one past it is refused.

        ``robot: unknown`` becomes this store's ``robot_id`` (on an update: the stored
        robot, unless this store has a robot id).

        ``expected_revision`` (optional) is the revision the caller edited: when the
        document with this id may be updated by the caller, it is updated in place whatever
        its ``source_mission_id``, but only if it is still at that revision; 0 means "this
        id must be new". An update that changes the content keeps the replaced version as
        a revision and bumps ``revision``.

        The size limit is the document model's (on the markdown the client sent, and on
        the body), never on a re-rendered form the client did not write.

        Raises:
            DocTooLarge: more than :data:`~robot_mcp_memory.limits.MAX_DOC_TERMS` distinct
                words (``unit="distinct words"``), or a new document past
                ``max_robot_documents`` (``field="documents"``).
            DocError: ``reason="conflict"`` when every id the rule tries is taken.
            RevisionConflict: the document is not at ``expected_revision`` (or is gone).
        """
        return self._writer.save(
            doc,
            may_update=may_update,
            max_robot_documents=max_robot_documents,
            expected_revision=expected_revision,
        )

    def import_document(self, doc: ProcessDoc, *, suffix: bool = False) -> Imported:
        """Store ``doc`` exactly as given, for ``load`` (see
        :meth:`ProcessWriter.import_document`: skipped when the same, else a conflict or,
        with ``suffix``, a suffixed id)."""
        return self._writer.import_document(doc, suffix=suffix)

    def revert(self, id: str, revision: int, *, life: int | None = None) -> Saved | None:
        """Make kept revision ``revision`` of ``id``'s life ``life`` (None: its latest)
        current again (a new revision); None when it is not kept. See
        :meth:`ProcessWriter.revert`."""
        return self._writer.revert(id, revision, life=life)

    def merge(self, keep_id: str, merge_id: str) -> Merged | None:
        """Merge ``merge_id`` into ``keep_id`` (counters added, outcome logs joined, the
        merged-away document kept as a revision); None if either is unknown. See
        :meth:`ProcessWriter.merge`."""
        return self._writer.merge(keep_id, merge_id)

    def delete(self, id: str) -> bool:
        """Remove the document, its index entry and its vectors in one transaction; False if
        unknown. Never reads the document, so any row (even a damaged one) can be deleted."""
        return self._writer.delete(id)

    def reindex(self) -> int:
        """Rebuild the search index and vectors from the rows; how many documents it
        indexed (see :meth:`ProcessWriter.reindex`, for a tokenizer, weight or model change)."""
        return self._writer.reindex()

    def sync_terms(self) -> int:
        """Bring the per-owner term statistics up to date with the rows; return how many
        documents were counted.

        Every write keeps them in step in its own transaction, so this finds work only in
        a file that has rows but not their statistics (just migrated to schema version 4):
        each missing document is counted, a batch per transaction, and statistics of rows
        that no longer exist are dropped. Run at construction.
        """
        stale = [
            int(r[0])
            for r in self.store.query(
                "SELECT l.doc_rowid FROM processes_lengths AS l "
                "LEFT JOIN processes AS p ON p.rowid = l.doc_rowid WHERE p.rowid IS NULL"
            )
        ]
        missing = [
            int(r[0])
            for r in self.store.query(
                "SELECT p.rowid FROM processes AS p "
                "LEFT JOIN processes_lengths AS l ON l.doc_rowid = p.rowid "
                "WHERE l.doc_rowid IS NULL ORDER BY p.rowid"
            )
        ]
        if not stale and not missing:
            return 0
        with self.store.transaction() as conn:
            for rowid in stale:
                unindex_document(conn, rowid)
        tokenizer = self._search.tokenizer
        for start in range(0, len(missing), _TERMS_BATCH):
            batch = missing[start : start + _TERMS_BATCH]
            marks = ", ".join("?" for _ in batch)
            with self.store.transaction() as conn:
                # Read inside the transaction, so a concurrent save is never counted twice.
                for row in conn.execute(
                    "SELECT p.rowid, p.robot, p.shared, p.title, p.task_pattern, p.tags, p.body "  # noqa: S608
                    "FROM processes AS p LEFT JOIN processes_lengths AS l "
                    f"ON l.doc_rowid = p.rowid WHERE p.rowid IN ({marks}) "
                    "AND l.doc_rowid IS NULL",
                    batch,
                ).fetchall():
                    terms = tokenizer.document(
                        str(row[3]), str(row[4] or ""), str(row[5]), str(row[6])
                    )
                    index_document(conn, int(row[0]), owner_key(str(row[1]), bool(row[2])), terms)
        _log.info("process_terms_synced", counted=len(missing), dropped=len(stale))
        return len(missing)

    def sync_vectors(self) -> int:
        """Bring ``processes_vectors`` up to date with the rows and load it; return how many
        documents were embedded.

        Vectors of another model or dimension, and of deleted rows, are dropped; a row with
        no vector of this embedder is embedded, a batch of rows per transaction (each batch
        read and written inside its transaction, so a concurrent save is never overwritten
        with a stale vector). Run at construction with an embedder and by :meth:`reindex`;
        a no-op without an embedder.
        """
        return self._vector_table.sync()

    # --- outcomes ------------------------------------------------------------------

    def record_outcome(self, id: str, success: bool, note: str = "") -> ProcessDoc | None:
        """Count one use of a process; None if the id is unknown.

        The counter, ``last_used`` and the recent outcomes (``recent_outcomes``, and
        ``last_success`` on a success) go through the hot path (``store.enqueue``: the
        writer thread, never blocking the caller; dropped and counted if the queue is
        full). A non-empty ``note`` is a cold write: one line
        ``- <ts> success|failure: <note>`` (whitespace collapsed, cut to
        :data:`MAX_NOTE_CHARS`) appended under ``## Outcome log`` — created at the end of
        the body if missing — with the index entry, in one transaction. ``updated`` is not
        bumped: an outcome is a record about the document, not an edit of it. A note that
        would push the document over 256 KiB is not appended (logged).

        Returns:
            The document as it will be once the counter write lands (counters read before
            the increment was queued, plus one).
        """
        row = self.store.query_one(
            f"SELECT {COLUMNS} FROM processes WHERE id = ?",  # noqa: S608
            (id,),
        )
        if row is None:
            return None
        when = self._clock()
        stamp = format_ts(when)
        column = "success_count" if success else "failure_count"
        # Saturating: a counter stops at MAX_COUNT instead of overflowing SQLite's INTEGER
        # into a REAL (and min() turns a REAL left by an older version back into one).
        queued = self.store.enqueue(
            f"UPDATE processes SET {column} = min({column} + 1, {MAX_COUNT}), "  # noqa: S608
            f"last_used = ?, recent_outcomes = substr(recent_outcomes || ?, -{STALE_WINDOW}), "
            "last_success = CASE WHEN ? THEN ? ELSE last_success END WHERE id = ?",
            (stamp, "s" if success else "f", int(success), stamp, id),
        )
        if not queued:
            _log.warning("process_outcome_dropped", id=id, success=success)
        doc = row_to_doc(row)
        if note.strip():
            body = self._writer.append_note(id, outcome_line(stamp, success, note))
            if body is not None:
                doc.body = body
        if queued:
            doc.last_used = when
            if success:
                doc.success_count = min(doc.success_count + 1, MAX_COUNT)
            else:
                doc.failure_count = min(doc.failure_count + 1, MAX_COUNT)
        return doc

    # --- lifecycle -----------------------------------------------------------------

    def close(self) -> None:
        """Write queued counters and close the underlying store. Idempotent."""
        self.store.close()

    def __repr__(self) -> str:
        return f"<ProcessStore {str(self.store.path)!r} robot_id={self.robot_id!r}>"


def _cosine(a: dict[str, float], b: dict[str, float], a_norm: float) -> float:
    """The cosine of two sparse vectors, ``a``'s norm given (0 when either is empty)."""
    small, large = (a, b) if len(a) <= len(b) else (b, a)
    dot = sum(w * large[t] for t, w in small.items() if t in large)
    norm = a_norm * math.sqrt(sum(w * w for w in b.values()))
    return dot / norm if norm else 0.0


def revision_owner(markdown: str) -> tuple[str | None, bool]:
    """``(robot, shared)`` of a kept revision, read from its own frontmatter; ``(None,
    False)`` (an owner not known: the admin's only) when it cannot be read. For revisions
    kept before schema version 6, which stored no owner. Pure; every backend's."""
    try:
        doc = ProcessDoc.parse(markdown)
    except DocError:
        _log.warning("process_revision_owner_unknown", reason="unreadable_markdown")
        return None, False
    return doc.robot, doc.shared


def probe_terms(terms: Collection[str], df: dict[str, int]) -> builtins.list[str]:
    """The terms of a document that pick its near-copy candidates: the
    :data:`NEAR_DUPLICATE_PROBE_TERMS` rarest by ``df`` (documents holding each) of those
    another document holds too (``df`` at least 2), ties by term. Pure; every backend's."""
    probe = sorted((t for t in terms if df.get(t, 0) >= 2), key=lambda t: (df[t], t))
    return probe[:NEAR_DUPLICATE_PROBE_TERMS]


def near_copies(
    mine: dict[str, float], candidates: Collection[tuple[str, str, dict[str, float]]]
) -> builtins.list[NearDuplicate]:
    """The ``(id, title, weighted term frequencies)`` candidates whose cosine with ``mine``
    is at least :data:`NEAR_DUPLICATE_SIMILARITY`, most similar first (ties by id).
    Pure; every backend's."""
    norm = math.sqrt(sum(w * w for w in mine.values()))
    near = []
    for id, title, theirs in candidates:
        similarity = _cosine(mine, theirs, norm)
        if similarity >= NEAR_DUPLICATE_SIMILARITY:
            near.append(NearDuplicate(id, title, round(similarity, 4)))
    return sorted(near, key=lambda n: (-n.similarity, n.id))
