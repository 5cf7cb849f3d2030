"""ProcessService: the process documents and their search, every rule written once over a
:class:`~robot_mcp_memory.processes._repo.ProcessRepo` (memory spec §4 and §5, decisions
0002, 0011, 0022, 0027, 0029).

The row is the source of truth: a document's markdown is rendered from its row on the way
out. Each write is one transaction script (:meth:`ProcessRepo.write`): the document's row,
its kept revision, its index entry and its vectors change together or not at all.

- **Save** (:meth:`~ProcessService.save`): the collision rule — the id, then ``id-2`` …
  ``id-99``, then random suffixes — updates in place the first row the caller may update
  that comes from its mission (or that it names by ``expected_revision``), else inserts
  under the first free id. A save never writes the counters of an existing row.
- **Revisions and lives**: every write that changes a document's content keeps the version
  it replaces, rendered with its counters, under its life and revision with its owner; the
  newest ``revisions_keep`` of an id are kept. An id freed by a delete or a merge and
  written again starts a new life; a revert of a deleted id resumes its latest life.
- **Merge, revert, import, outcomes, near-copies, stale marks**: :mod:`.rules`.
- **Find**: :mod:`.ranking` over the repository's pools (lexical, or fused with the
  cosine of the embedder's vectors).

While telemetry is on (:mod:`robot_mcp_kit.telemetry`), a find is a span ``memory.find``
(mode, k, results; never the query) with, when hybrid, the children
``memory.search.lexical``, ``memory.search.vector`` and ``memory.search.fusion``, and its
duration is recorded in ``robot_mcp.memory.find.duration`` by mode; a save, an outcome
note and a delete are each a span ``memory.write`` (what, the id, sizes). The same on
every backend.

Thread-safe (the repository is); blocking (the tool runner calls it in worker threads).
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Collection
from datetime import datetime
from typing import Any

from robot_mcp_kit import telemetry
from robot_mcp_kit.log import get_logger
from robot_mcp_kit.models import format_ts, utc_now
from robot_mcp_memory._exceptions import DamagedRow, DocError, RevisionConflict
from robot_mcp_memory._limits import (
    MAX_COUNT,
    MAX_DOC_BYTES,
    MAX_K,
    MAX_LIMIT,
    REVISIONS_KEEP,
    clamp,
)
from robot_mcp_memory.processes._embedding import Embedder, Pairs, document_texts
from robot_mcp_memory.processes._model import Owner, ProcessDoc
from robot_mcp_memory.processes._ranking import (
    LEXICAL_POOL,
    SEMANTIC_POOL,
    DocTerms,
    Found,
    fuse,
    rank,
    visible_owners,
)
from robot_mcp_memory.processes._repo import Lexical, ProcessRepo, ProcessTx, Semantic
from robot_mcp_memory.processes._rows import Row, readable, row_to_doc, tags_json
from robot_mcp_memory.processes._rules import (
    DocState,
    Imported,
    Merged,
    NearDuplicate,
    Revision,
    Saved,
    append_outcome,
    check_size,
    check_terms,
    fits,
    import_verdict,
    merge_reason,
    merged_from,
    near_copies,
    next_candidate,
    outcome_line,
    outcome_lines,
    probe_quorum,
    probe_terms,
    revision_owner,
    robot_documents_refusal,
    same_mission,
)
from robot_mcp_memory.processes._typos import TypoRepair
from robot_mcp_memory.processes._words import content_words, search_terms, truncate_query

__all__ = ["ProcessService"]

_log = get_logger("robot_mcp_memory.store")

_CONTENT = ("title", "task_pattern", "tags", "robot", "source_mission_id", "body", "shared")
"""The columns whose change makes a new revision."""


def _values(doc: ProcessDoc, id: str, robot: str, created: str, updated: str) -> dict[str, Any]:
    """A new document's row: ``doc`` as ``id`` (its counters and ``last_used`` as it
    carries them; ``created`` unless it carries one)."""
    return {
        "id": id,
        "title": doc.title,
        "task_pattern": doc.task_pattern,
        "tags": tags_json(doc.tags),
        "robot": robot,
        "created": format_ts(doc.created) if doc.created else created,
        "updated": updated,
        "success_count": doc.success_count,
        "failure_count": doc.failure_count,
        "last_used": format_ts(doc.last_used) if doc.last_used else None,
        "source_mission_id": doc.source_mission_id,
        "body": doc.body,
        "shared": doc.shared,
    }


def _latest(a: Any, b: Any) -> Any:
    """The later of two stored timestamps (None when neither is set)."""
    return max((v for v in (a, b) if v), default=None)


class ProcessService:
    """The process documents of one store (see the module docstring).

    Args:
        repo: the storage (the service does not own it: :meth:`close` closes it).
        robot_id: written as a saved document's ``robot`` when the document says
            ``unknown`` (the ``ROBOT_ID`` of the server).
        embedder: with one (that the store can hold vectors of), :meth:`find` is hybrid
            and every write stores the document's vectors; construction embeds the
            documents that lack them. Without one, search is lexical and a write drops the
            document's vectors.
        clock: the time source (injected by tests).
        revisions_keep: earlier versions kept per id (``MEMORY_REVISIONS_KEEP``).
    """

    def __init__(
        self,
        repo: ProcessRepo,
        *,
        robot_id: str = "unknown",
        embedder: Embedder | None = None,
        clock: Callable[[], datetime] = utc_now,
        revisions_keep: int = REVISIONS_KEEP,
    ) -> None:
        self.repo = repo
        self.robot_id = robot_id
        self.revisions_keep = revisions_keep
        self._clock = clock
        self.embedder = embedder if embedder and repo.use_vectors(embedder) else None
        if self.embedder is not None:
            self.sync_vectors()

    @property
    def search_mode(self) -> str:
        """``"hybrid"`` (bm25 fused with cosine) or ``"lexical"`` (bm25 alone)."""
        return "lexical" if self.embedder is None else "hybrid"

    # --- reads ---------------------------------------------------------------------

    def get(self, id: str) -> ProcessDoc | None:
        """The document with this id, or None.

        Raises:
            DamagedRow: the row cannot be read back as a document.
        """
        with self.repo.reading() as reads:
            row = reads.row(id)
        return None if row is None else row_to_doc(row)

    def owner(self, id: str) -> Owner | None:
        """Who the document ``id`` belongs to, or None; reads two columns, never the body
        (it works on a row too damaged to read as a document)."""
        with self.repo.reading() as reads:
            found = reads.owner(id)
        return None if found is None else Owner(id=id, robot=found[0], shared=found[1])

    def list(
        self,
        limit: int = 50,
        offset: int = 0,
        *,
        robots: Collection[str] | None = None,
        stale: bool | None = None,
    ) -> list[ProcessDoc]:
        """Documents ordered by id; ``limit`` clamped to ``1..MAX_LIMIT``.

        ``robots``: None for every document; otherwise only documents whose ``robot`` is
        one of these, plus the ``shared`` ones (an empty collection: shared only).
        ``stale`` True or False keeps only the documents that are (are not) stale
        (:class:`DocState`). A damaged row is left out (logged).
        """
        with self.repo.reading() as reads:
            rows = reads.rows(
                robots=robots,
                stale=stale,
                limit=clamp(limit, 1, MAX_LIMIT),
                offset=max(0, int(offset)),
            )
        return [doc for doc in map(readable, rows) if doc is not None]

    def count(self, *, robots: Collection[str] | None = None) -> int:
        """How many documents there are (``robots`` filters as in :meth:`list`)."""
        with self.repo.reading() as reads:
            return reads.count(robots=robots)

    def states(self, ids: Collection[str]) -> dict[str, DocState]:
        """The :class:`DocState` of each of ``ids`` that exists (one read)."""
        if not ids:
            return {}
        with self.repo.reading() as reads:
            rows = reads.states(ids)
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
        with self.repo.reading() as reads:
            return reads.lives(id)

    def revisions(self, id: str, *, life: int | None = None) -> builtins.list[Revision]:
        """The kept earlier versions of ``id`` in life ``life`` (None: its latest life, the
        current document's or, after a delete, the deleted one's), newest first, each with
        its owner then (read from its own frontmatter where none was stored with it)."""
        with self.repo.reading() as reads:
            rows = reads.revisions(id, life)
        kept = []
        for r in rows:
            markdown = r["markdown"]
            robot, shared = (
                (None if r["robot"] is None else str(r["robot"]), bool(r["shared"]))
                if markdown is None
                else revision_owner(str(markdown))
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
        with self.repo.reading() as reads:
            markdown = reads.revision_markdown(id, revision, life)
            current = None if markdown is not None else reads.current_at(id, revision, life)
        if markdown is not None:
            return ProcessDoc.parse(markdown)
        return None if current is None else row_to_doc(current)

    def near_duplicates(
        self, id: str, *, robots: Collection[str] | None = None
    ) -> builtins.list[NearDuplicate]:
        """Stored documents (within ``robots``, as :meth:`list` filters) that are
        near-copies of document ``id``, most similar first.

        Candidates come from the index's statistics of the owners the call may read
        (decision 0022): the documents holding at least half of ``id``'s rarest terms that
        another document holds too (:func:`.rules.probe_terms`); one is a near-copy when
        the cosine of the two documents' weighted term frequencies reaches
        :data:`~robot_mcp_memory._limits.NEAR_DUPLICATE_SIMILARITY`
        (:func:`.rules.near_copies`).
        """
        owners = None if robots is None else visible_owners(robots)
        with self.repo.reading() as reads:
            mine = reads.index_terms(id)
            if not mine:
                return []
            probe = probe_terms(mine, reads.document_frequency(mine, owners))
            if not probe:
                return []
            candidates = reads.holding(probe, owners, probe_quorum(probe), id)
            if not candidates:
                return []
            freqs = reads.term_frequencies([id, *(c for c, _ in candidates)])
        return near_copies(
            freqs.get(id, {}), [(c, title, freqs.get(c, {})) for c, title in candidates]
        )

    # --- find ----------------------------------------------------------------------

    def find(
        self, query: str, k: int = 3, *, robots: Collection[str] | None = None
    ) -> builtins.list[Found]:
        """The ``k`` best documents for a natural-language ``query``, best first.

        Never raises for the text of a query (operators, quotes, emoji, control characters
        are inert; any length is searched by its first 2 KiB), and a damaged row is left
        out rather than failing the search.

        Args:
            query: any text.
            k: clamped to ``1..MAX_K``.
            robots: as :meth:`list` filters; both signals obey it.
        """
        if not telemetry.active():
            return self._find(query, k, robots)
        mode = self.search_mode
        started = time.perf_counter()
        with telemetry.span(
            "memory.find", {"robot_mcp.memory.search_mode": mode, "robot_mcp.memory.k": k}
        ) as current:
            found = self._find(query, k, robots)
            telemetry.set_attributes(current, **{"robot_mcp.memory.results": len(found)})
        telemetry.record(
            "robot_mcp.memory.find.duration",
            time.perf_counter() - started,
            {"robot_mcp.memory.search_mode": mode},
        )
        return found

    def _find(self, query: str, k: int, robots: Collection[str] | None) -> builtins.list[Found]:
        text = truncate_query(query)[0]
        terms = search_terms(text)
        if not terms:
            return []
        k = clamp(k, 1, MAX_K)
        scope = None if robots is None else tuple(sorted(set(robots)))
        owners = None if scope is None else tuple(visible_owners(scope))
        embedder = self.embedder
        vector = None if embedder is None else embedder.embed([text])[0]
        with self.repo.reading() as reads:
            repairs = TypoRepair(reads, reads).repair(
                list(dict.fromkeys(content_words(text))), owners
            )
            lexical = Lexical(tuple(terms), tuple(repairs), owners, scope)
            if embedder is None or vector is None:
                return [
                    Found(doc=doc, score=s.score, bm25=s.relevance, reliability=s.reliability)
                    for s in reads.lexical_top(lexical, k)
                    if (doc := readable(s.row)) is not None
                ]
            with telemetry.span("memory.search.lexical") as lexical_span:
                pool = reads.lexical_pool(lexical, LEXICAL_POOL)
                telemetry.set_attributes(lexical_span, **{"robot_mcp.memory.matches": len(pool)})
            if not pool and owners is not None:
                return []  # a narrowed call needs a lexical match
            relevance = {key: r for key, (r, _) in pool.items()}
            reliability = {key: rel for key, (_, rel) in pool.items()}
            with telemetry.span("memory.search.vector") as vector_span:
                cosine, low, high = reads.semantic_pool(
                    Semantic(embedder, vector, scope, SEMANTIC_POOL, tuple(relevance))
                )
                telemetry.set_attributes(
                    vector_span, **{"robot_mcp.memory.candidates": len(cosine)}
                )
            with telemetry.span("memory.search.fusion") as fusion_span:
                fused = fuse(relevance, cosine, low, high)
                # The semantic candidates' reliability is read through the visibility
                # filter like every read: the vector pool only preselected them.
                unread = fused.keys() - reliability.keys()
                if unread:
                    reliability.update(reads.reliabilities(unread, scope))
                ranked = rank(fused, reliability, k)
                rows = reads.rows_of(ranked, scope) if ranked else {}
                found = []
                for key in ranked:
                    row = rows.get(key)
                    doc = None if row is None else readable(row)
                    if doc is not None:
                        found.append(
                            Found(
                                doc=doc,
                                score=fused[key] * reliability[key],
                                bm25=relevance.get(key, 0.0),
                                reliability=reliability[key],
                                semantic=cosine.get(key),
                            )
                        )
                telemetry.set_attributes(fusion_span, **{"robot_mcp.memory.results": len(found)})
            return found

    # --- writes --------------------------------------------------------------------

    def _terms(self, title: str, task_pattern: str, tags: str, body: str) -> DocTerms:
        return self.repo.count_terms(title, task_pattern, tags, body)

    def _embed(
        self, title: str, task_pattern: str, tags: Collection[str], body: str
    ) -> Pairs | None:
        """The document's (head, whole) vectors, or None without an embedder."""
        if self.embedder is None:
            return None
        head, whole = self.embedder.embed(document_texts(title, task_pattern, list(tags), body))
        return [(head, whole)]

    def _embed_rows(self, rows: builtins.list[Row]) -> Pairs:
        """Vectors for stored rows (a row too damaged to read as a document is embedded by
        its title and body)."""
        assert self.embedder is not None
        texts = []
        for row in rows:
            doc = readable(row)
            texts += (
                document_texts(doc.title, doc.task_pattern, doc.tags, doc.body)
                if doc is not None
                else [str(row["title"] or ""), str(row["body"] or "")]
            )
        flat = self.embedder.embed(texts)
        return [(flat[2 * i], flat[2 * i + 1]) for i in range(len(rows))]

    def _refuse_unstorable(self, doc: ProcessDoc) -> None:
        field = self.repo.unstorable(doc)
        if field is not None:
            raise DocError(
                field,
                "invalid_value",
                f"{field} contains a NUL character (U+0000), which the database cannot "
                "store; remove it",
            )

    def _keep(self, tx: ProcessTx, row: Row, reason: str, now: str) -> None:
        """Keep the version ``row`` holds as a revision; prune the id's past the bound. A
        row too damaged to render is not kept (logged): the write it precedes goes on."""
        id = str(row["id"])
        try:
            markdown = row_to_doc(row).render()
        except DamagedRow:
            _log.warning("process_revision_skipped", id=id, reason="damaged_row")
            return
        tx.keep_revision(row, markdown, reason, now)
        tx.prune_revisions(id, self.revisions_keep)

    def _update(
        self,
        tx: ProcessTx,
        row: Row,
        doc: ProcessDoc,
        robot: str,
        now: str,
        reason: str,
        *,
        mission: str | None = None,
        keep_mission: bool = True,
    ) -> None:
        """Replace the content of the locked ``row`` by ``doc``'s (``robot: unknown`` keeps
        the stored robot; a missing ``source_mission_id`` the stored one, unless
        ``keep_mission`` is False); a change keeps the replaced version and bumps the
        revision. The counters are the outcomes' and stay."""
        values = {
            "title": doc.title,
            "task_pattern": doc.task_pattern,
            "tags": tags_json(doc.tags),
            "robot": row["robot"] if robot == "unknown" else robot,
            "source_mission_id": (doc.source_mission_id or row["source_mission_id"])
            if keep_mission
            else mission,
            "body": doc.body,
            "shared": doc.shared,
        }
        stored = {c: bool(row[c]) if c == "shared" else row[c] for c in _CONTENT}
        changed = {c: values[c] for c in _CONTENT} != stored
        if changed:
            self._keep(tx, row, reason, now)
        tx.update(int(row["key"]), {**values, "updated": now}, bump=changed)

    def save(
        self,
        doc: ProcessDoc,
        *,
        may_update: Callable[[Owner], bool] | None = None,
        max_robot_documents: int | None = None,
        expected_revision: int | None = None,
    ) -> Saved:
        """Insert or update a document; row, revision, index and vectors in one transaction.

        Collision rules (memory spec §5): if a document with this id exists, may be updated
        by the caller and comes from the same teaching mission — equal
        ``source_mission_id``, or either one missing — it is updated in place: content
        replaced, ``updated`` bumped, ``created``, the counters and ``last_used`` kept.
        Otherwise the document goes to ``id-2``, then ``id-3``… ``id-99``, then an id with
        a random suffix (updating the first of those it may update and that is from its
        mission). A new document keeps the counters and timestamps it carries; ``created``
        defaults to now.

        ``may_update``, when given, is asked inside the save's transaction about each
        existing row the rule meets; a row it refuses is passed over like another
        mission's, without looking at its ``source_mission_id`` (decision 0022).
        ``max_robot_documents`` bounds how many documents the saved document's robot may
        own: a new one past it is refused. ``robot: unknown`` becomes :attr:`robot_id` (on
        an update: the stored robot, unless this service has a robot id).

        ``expected_revision`` (optional) is the revision the caller edited: when the
        document with this id may be updated by the caller, it is updated in place whatever
        its ``source_mission_id``, but only if it is still at that revision; 0 means "this
        id must be new".

        Raises:
            DocTooLarge: too many distinct words, or a new document past
                ``max_robot_documents`` (``field="documents"``).
            DocError: ``reason="conflict"`` when every id the rule tries is taken;
                ``invalid_value`` for what the store cannot hold (PostgreSQL: a NUL).
            RevisionConflict: the document is not at ``expected_revision`` (or is gone).
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
        self._refuse_unstorable(doc)
        now = format_ts(self._clock())
        robot = doc.robot if doc.robot != "unknown" else self.robot_id
        base = doc.id
        # Terms and vectors before the transaction (the text does not depend on the final
        # id), so no lock is held while they are computed.
        terms = check_terms(self._terms(doc.title, doc.task_pattern, tags_json(doc.tags), doc.body))
        vectors = self._embed(doc.title, doc.task_pattern, doc.tags, doc.body)

        def script(tx: ProcessTx) -> Saved:
            candidate, n = base, 1
            while True:
                row = tx.row(candidate)
                if row is None:
                    if expected_revision and candidate == base:
                        raise RevisionConflict(base, expected_revision, None)
                    if max_robot_documents is not None:
                        owned = tx.owned(robot)
                        if owned >= max_robot_documents:
                            raise robot_documents_refusal(robot, owned, max_robot_documents)
                    key = tx.insert(_values(doc, candidate, robot, now, now), resume_life=False)
                    if key is None:
                        continue  # another writer took it just now: judge its row
                    created = True
                    break
                # A row the caller may not update is another mission's whatever its
                # source_mission_id says: the answer never depends on a document the
                # caller may not read (decision 0022).
                owner = Owner(
                    id=str(row["id"]), robot=str(row["robot"]), shared=bool(row["shared"])
                )
                updatable = may_update is None or may_update(owner)
                if updatable and expected_revision is not None and candidate == base:
                    # The caller names the revision it edited: its document whatever the
                    # mission, and only if it is still at that revision.
                    if int(row["revision"]) != expected_revision:
                        raise RevisionConflict(base, expected_revision, int(row["revision"]))
                elif not (
                    updatable and same_mission(row["source_mission_id"], doc.source_mission_id)
                ):
                    n += 1
                    candidate = next_candidate(base, n)
                    continue
                self._update(tx, row, doc, robot, now, "save")
                key, created = int(row["key"]), False
                break
            stored = tx.index(key, terms, vectors)
            return Saved(
                doc=row_to_doc(stored),
                created=created,
                renamed_from=base if candidate != base else None,
                revision=int(stored["revision"]),
            )

        return self.repo.write(script)

    def import_document(self, doc: ProcessDoc, *, suffix: bool = False) -> Imported:
        """Store ``doc`` exactly as given (timestamps, counters, robot), for ``load``.

        The same document already under its id (the same rendered markdown) is skipped;
        another one there is a conflict, which writes nothing unless ``suffix``, when the
        document goes to the first free id of the save rule's family (``-2``, ``-3``…).

        Raises:
            DocError: ``invalid_value`` for what the store cannot hold.
        """
        self._refuse_unstorable(doc)
        markdown = doc.render()
        terms = check_terms(self._terms(doc.title, doc.task_pattern, tags_json(doc.tags), doc.body))
        vectors = self._embed(doc.title, doc.task_pattern, doc.tags, doc.body)
        updated = format_ts(doc.updated) if doc.updated else format_ts(self._clock())

        def script(tx: ProcessTx) -> Imported:
            candidate, n = doc.id, 1
            while True:
                row = tx.row(candidate)
                if row is None:
                    key = tx.insert(
                        _values(doc, candidate, doc.robot, updated, updated), resume_life=False
                    )
                    if key is None:
                        continue  # another writer took it just now: judge its row
                    break
                if candidate == doc.id:
                    verdict = import_verdict(row, doc.id, markdown, suffix=suffix)
                    if verdict is not None:
                        return verdict
                n += 1
                candidate = next_candidate(doc.id, n)
            tx.index(key, terms, vectors)
            return Imported("inserted" if candidate == doc.id else "suffixed", candidate)

        return self.repo.write(script)

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
        with self.repo.reading() as reads:
            lives = reads.lives(id)
            life = (lives[-1] if lives else 0) if life is None else life
            markdown = reads.revision_markdown(id, revision, life)
        if markdown is None:
            return None
        doc = ProcessDoc.parse(markdown)
        terms = check_terms(self._terms(doc.title, doc.task_pattern, tags_json(doc.tags), doc.body))
        vectors = self._embed(doc.title, doc.task_pattern, doc.tags, doc.body)
        now = format_ts(self._clock())

        def script(tx: ProcessTx) -> Saved | None:
            kept = tx.kept(id, revision, life)
            if kept is None:
                return None  # pruned by another writer just now
            merged = self._merged_counters(tx, str(kept["reason"]), str(kept["replaced"]))
            while True:
                row = tx.row(id)
                if row is None:
                    key = tx.insert(_values(doc, id, doc.robot, now, now), resume_life=True)
                    if key is None:
                        continue
                    created = True
                    break
                self._update(
                    tx,
                    row,
                    doc,
                    doc.robot,
                    now,
                    "revert",
                    mission=doc.source_mission_id,
                    keep_mission=False,
                )
                key, created = int(row["key"]), False
                if merged is not None and int(row["life"]) == life:
                    # Undoing a merge: its counts go with it.
                    tx.set_counters(
                        key,
                        {
                            "success_count": max(int(row["success_count"]) - merged[0], 0),
                            "failure_count": max(int(row["failure_count"]) - merged[1], 0),
                        },
                    )
                break
            stored = tx.index(key, terms, vectors)
            return Saved(
                doc=row_to_doc(stored),
                created=created,
                renamed_from=None,
                revision=int(stored["revision"]),
            )

        return self.repo.write(script)

    @staticmethod
    def _merged_counters(tx: ProcessTx, reason: str, replaced: str) -> tuple[int, int] | None:
        """For a revision a merge replaced (:func:`.rules.merge_reason`, kept at
        ``replaced``): the merged-away document's (successes, failures) as the merge added
        them, from the version the same merge kept; None otherwise or once pruned."""
        source = merged_from(reason)
        if source is None:
            return None
        markdown = tx.merged_markdown(source[0], source[1], replaced)
        if markdown is None:  # pruned since: the counts stay
            return None
        gone = ProcessDoc.parse(markdown)
        return gone.success_count, gone.failure_count

    def merge(self, keep_id: str, merge_id: str) -> Merged | None:
        """Merge document ``merge_id`` into ``keep_id``; None if either is unknown.

        In one transaction: ``keep_id`` gets the sum of both documents' counters (saturating
        at ``MAX_COUNT``), the later ``last_used`` and ``last_success``, and the outcome-log
        lines of ``merge_id`` appended under its ``## Outcome log`` (its other text is kept;
        the version before the merge is kept as a revision,
        ``reason="merge:<merge_id>:<rev>"``); ``merge_id`` is kept as revision ``rev`` of
        its life (``reason="merged"``) and deleted, which ends that life. Undo: revert
        ``keep_id`` to its previous revision (which takes the merged document's counters
        off again) and ``merge_id`` to :attr:`Merged.merged_revision` of
        :attr:`Merged.merged_life`. Counted outcomes are written first, so none is lost;
        the two rows are locked in id order.

        Raises:
            DocError: ``keep_id`` equals ``merge_id``.
            DocTooLarge: the merged document would pass the size limit (nothing written).
        """
        if keep_id == merge_id:
            raise DocError("merge_id", "invalid", "a document cannot be merged into itself")
        self.repo.flush()
        now = format_ts(self._clock())

        def script(tx: ProcessTx) -> Merged | None:
            rows = tx.rows([keep_id, merge_id])
            keep, gone = rows.get(keep_id), rows.get(merge_id)
            if keep is None or gone is None:
                return None
            kept_doc = row_to_doc(keep)
            gone_doc = row_to_doc(gone)
            body = kept_doc.body
            for line in outcome_lines(gone_doc.body):
                body = append_outcome(body, line)
            kept_doc.body = body
            check_size(
                kept_doc,
                f"merging the outcome log of {merge_id!r} would take {keep_id!r} past "
                f"{MAX_DOC_BYTES // 1024} KiB; shorten one of them first",
            )
            terms = check_terms(
                self._terms(kept_doc.title, kept_doc.task_pattern, str(keep["tags"]), body)
            )
            vectors = self._embed(kept_doc.title, kept_doc.task_pattern, kept_doc.tags, body)
            merged_revision = int(gone["revision"])
            self._keep(tx, gone, "merged", now)
            tx.delete(int(gone["key"]))
            self._keep(tx, keep, merge_reason(merge_id, merged_revision), now)
            key = int(keep["key"])
            tx.update(key, {"body": body, "updated": now}, bump=True)
            tx.set_counters(
                key,
                {
                    "success_count": min(
                        int(keep["success_count"]) + gone_doc.success_count, MAX_COUNT
                    ),
                    "failure_count": min(
                        int(keep["failure_count"]) + gone_doc.failure_count, MAX_COUNT
                    ),
                    "last_used": _latest(keep["last_used"], gone["last_used"]),
                    "last_success": _latest(keep["last_success"], gone["last_success"]),
                },
            )
            stored = tx.index(key, terms, vectors)
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

        return self.repo.write(script)

    def delete(self, id: str) -> bool:
        """Remove the document, its index entry and its vectors in one transaction, keeping
        its last version as a revision (``reason="delete"``; a row too damaged to render is
        deleted without one, logged); False if unknown."""
        now = format_ts(self._clock())

        def script(tx: ProcessTx) -> bool:
            row = tx.row(id)
            if row is None:
                return False
            self._keep(tx, row, "delete", now)
            tx.delete(int(row["key"]))
            return True

        with telemetry.span(
            "memory.write", {"robot_mcp.memory.write": "delete", "robot_mcp.memory.id": id}
        ):
            return self.repo.write(script)

    # --- outcomes ------------------------------------------------------------------

    def record_outcome(self, id: str, success: bool, note: str = "") -> ProcessDoc | None:
        """Count one use of a process; None if the id is unknown.

        The counter, ``last_used``, the recent outcomes and, on a success,
        ``last_success`` are counted atomically by the store (on SQLite through its hot
        queue: never blocking the caller, dropped and logged if the queue is full). A
        non-empty ``note`` is one line ``- <ts> success|failure: <note>`` (whitespace
        collapsed, a NUL a space, cut to ``MAX_NOTE_CHARS``) appended under ``## Outcome
        log`` — created at the end of the body if missing — with the index entry and
        vectors, in one transaction; ``updated`` is not bumped (an outcome is a record
        about the document, not an edit of it), and a note that would take the document
        past 256 KiB is left out (logged). Returns the document with the counted outcome.
        """
        when = self._clock()
        stamp = format_ts(when)
        line = outcome_line(stamp, success, note.replace("\x00", " ")) if note.strip() else None
        written: builtins.list[str] = []

        def add_note(tx: ProcessTx, row: Row) -> None:
            assert line is not None
            body = append_outcome(str(row["body"]), line)
            doc = row_to_doc(row)
            doc.body = body
            if not fits(doc):
                _log.warning("process_outcome_note_skipped", id=id, reason="too_large")
                return
            key = int(row["key"])
            tx.update(key, {"body": body}, bump=False)
            # The note is searchable like the rest of the body (counted and embedded under
            # the lock: the body is only known here; a few milliseconds at most).
            terms = self._terms(doc.title, doc.task_pattern, str(row["tags"]), body)
            tx.index(key, terms, self._embed(doc.title, doc.task_pattern, doc.tags, body))
            written.append(body)

        if line is None:
            counted = self.repo.count_outcome(id, success, stamp)
        else:
            with telemetry.span(
                "memory.write", {"robot_mcp.memory.write": "note", "robot_mcp.memory.id": id}
            ):
                counted = self.repo.count_outcome(id, success, stamp, add_note)
        if counted is None:
            return None
        doc = row_to_doc(counted.row)
        if written:
            doc.body = written[-1]
        if counted.pending:
            doc.last_used = when
            if success:
                doc.success_count = min(doc.success_count + 1, MAX_COUNT)
            else:
                doc.failure_count = min(doc.failure_count + 1, MAX_COUNT)
        return doc

    # --- the index -----------------------------------------------------------------

    def reindex(self) -> int:
        """Rebuild the search index (and, with an embedder, every document's vectors) from
        the rows; how many documents it indexed. For a tokenizer, weight or model change:
        every write keeps both in step with the row in its own transaction."""
        self.repo.flush()
        n = self.repo.rebuild_index()
        self.sync_vectors()
        _log.info("processes_reindexed", indexed=n)
        return n

    def sync_vectors(self) -> int:
        """Bring the stored vectors up to date with the rows (vectors of another model are
        dropped, a document without one is embedded); how many were embedded. A no-op
        without an embedder."""
        if self.embedder is None:
            return 0
        embedded = self.repo.sync_vectors(self.embedder, self._embed_rows)
        if embedded:
            _log.info("process_vectors_synced", embedded=embedded, model=self.embedder.name)
        return embedded

    # --- lifecycle -----------------------------------------------------------------

    def close(self) -> None:
        """Write queued outcomes and close the repository. Idempotent."""
        self.repo.close()

    def __repr__(self) -> str:
        return f"<ProcessService {self.repo.where!r} robot_id={self.robot_id!r}>"
