"""PgProcessStore: the process documents on PostgreSQL, the second adapter of the processes
port (:class:`robot_mcp_memory.ports.ProcessesPort`).

Same answers and errors as :class:`robot_mcp_memory.store.ProcessStore`; what differs is
that several replicas share the database, so every rule that SQLite's one writer made
true is the database's here:

- a save's row, search entry, postings, frequencies and vectors are one transaction;
- id collisions are settled by the unique ``id``: the candidate row is locked
  (``SELECT … FOR UPDATE``) or inserted with ``ON CONFLICT DO NOTHING`` — a save that
  loses a race re-reads the candidate the winner committed and goes on by the same rule;
- ``max_robot_documents`` is counted under a transaction-level advisory lock on the
  robot, so two replicas cannot both pass the last free place;
- :meth:`PgProcessStore.record_outcome` is one ``UPDATE … SET n = LEAST(n + 1, MAX)
  … RETURNING`` (exact under any concurrency; it answers the counters as they are), and
  its note is appended to the body the UPDATE just locked, in the same transaction.

- revisions (:mod:`._process_revisions`): a write that replaces a version keeps it in
  ``processes_revisions`` and bumps ``revision`` in its own transaction, on the row it
  locked; ``save(expected_revision=n)`` compares ``n`` with the locked row, so of two
  replicas saving with the same ``n`` exactly one updates and the other raises
  :class:`~robot_mcp_memory.store.RevisionConflict`; ``merge`` locks both rows in id
  order;
- the recent outcomes behind the stale mark are updated by ``record_outcome``'s one
  ``UPDATE`` with the counters.

Writes that meet a deadlock or a serialization failure are retried
(:data:`WRITE_RETRIES`); the per-owner frequencies are locked in sorted order, so
deadlocks are not expected. Connection loss, pool exhaustion and statement timeouts are
:class:`~robot_mcp_kit.store.StoreUnavailable` (:class:`PgDatabase`), nothing written.

Without pgvector an embedder cannot be used: the store logs one WARNING
(``pgvector_missing``) at construction and searches lexically.

Blocking and thread-safe (the pool is); the tool runner calls it in worker threads.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.rows import dict_row

from robot_mcp_kit.log import get_logger
from robot_mcp_kit.models import format_ts, utc_now
from robot_mcp_memory._exceptions import DocError, DocTooLarge, RevisionConflict
from robot_mcp_memory.documents import Owner, ProcessDoc
from robot_mcp_memory.documents.rows import COLUMNS, readable, row_to_doc, tags_json
from robot_mcp_memory.limits import (
    MAX_COUNT,
    MAX_DOC_BYTES,
    MAX_LIMIT,
    NEAR_DUPLICATE_CANDIDATES,
    REVISIONS_KEEP,
    STALE_WINDOW,
    clamp,
)
from robot_mcp_memory.postgres._process_index import (
    index_document,
    rebuild_index,
    unindex_document,
)
from robot_mcp_memory.postgres._process_revisions import (
    LATEST_LIFE_SQL,
    ROW,
    insert_row,
    keep_revision,
    merged_counters,
    update_row,
)
from robot_mcp_memory.postgres._process_search import PgProcessSearch, scope_sql
from robot_mcp_memory.postgres._process_vectors import PgVectors
from robot_mcp_memory.search import Found, Tokenizer, document_texts, visible_owners
from robot_mcp_memory.store import (
    DocState,
    Imported,
    Merged,
    NearDuplicate,
    Revision,
    Saved,
    append_outcome,
    document_terms,
    import_verdict,
    near_copies,
    next_candidate,
    outcome_line,
    outcome_lines,
    probe_terms,
    robot_documents_refusal,
    same_mission,
    stale_sql,
)

if TYPE_CHECKING:
    from robot_mcp_memory.postgres._database import PgDatabase
    from robot_mcp_memory.search import Embedder

__all__ = ["WRITE_RETRIES", "PgProcessStore"]

_log = get_logger("robot_mcp_memory.postgres")

WRITE_RETRIES = 5
"""How often a write that met a deadlock or a serialization failure is run again."""

_P_COLUMNS = ", ".join("p." + c for c in COLUMNS.split(", "))


class _Retry(Exception):
    """A write's transaction met a deadlock or serialization failure (rolled back)."""


def _has_nul(doc: ProcessDoc) -> str | None:
    for name in ("id", "title", "task_pattern", "robot", "source_mission_id", "body"):
        value = getattr(doc, name)
        if isinstance(value, str) and "\x00" in value:
            return name
    return "tags" if any("\x00" in t for t in doc.tags) else None


def _refuse_nul(doc: ProcessDoc) -> None:
    """Refuse a document PostgreSQL text cannot hold (a NUL character)."""
    bad = _has_nul(doc)
    if bad is not None:
        raise DocError(
            bad,
            "invalid_value",
            f"{bad} contains a NUL character (U+0000), which the database cannot store; remove it",
        )


class PgProcessStore:
    """The process documents of one PostgreSQL database.

    Args:
        db: an opened :class:`PgDatabase` (its schema holds the process tables). The store
            does not own it: :meth:`close` leaves it open.
        robot_id: written as a saved document's ``robot`` when the document says
            ``unknown``.
        embedder: with one (and pgvector), :meth:`find` is hybrid and every write stores
            the document's vectors; construction embeds the rows that lack them.
        clock: the time source (injected by tests).
        revisions_keep: earlier versions kept per document (``MEMORY_REVISIONS_KEEP``).
    """

    def __init__(
        self,
        db: PgDatabase,
        *,
        robot_id: str = "unknown",
        embedder: Embedder | None = None,
        clock: Callable[[], datetime] = utc_now,
        revisions_keep: int = REVISIONS_KEEP,
    ) -> None:
        self.db = db
        self.revisions_keep = revisions_keep
        self._robot_id = robot_id
        self._clock = clock
        if embedder is not None and "vector" not in db.extensions:
            _log.warning(
                "pgvector_missing",
                where=db.where,
                detail="the database has no 'vector' extension; search is lexical "
                "(install pgvector on the server and restart to rank by meaning too)",
            )
        self._vectors = PgVectors(db, embedder)
        self.embedder = self._vectors.embedder
        self._search = PgProcessSearch(db, self._vectors)
        self._tokenizer = Tokenizer()
        if self.embedder is not None:
            self.sync_vectors()

    @property
    def robot_id(self) -> str:
        """The ``ROBOT_ID`` a saved document's ``robot: unknown`` becomes."""
        return self._robot_id

    @property
    def search_mode(self) -> str:
        """``"hybrid"`` (bm25 fused with cosine) or ``"lexical"`` (bm25 alone)."""
        return self._search.mode

    # --- reads ---------------------------------------------------------------------

    def get(self, id: str) -> ProcessDoc | None:
        """The document with this id, or None (``DamagedRow`` for an unreadable row)."""
        if "\x00" in id:
            return None
        with self.db.connection() as conn:
            row = (
                conn.cursor(row_factory=dict_row)
                .execute(
                    f"SELECT {COLUMNS} FROM processes WHERE id = %s",  # noqa: S608
                    (id,),
                )
                .fetchone()
            )
        return None if row is None else row_to_doc(row)

    def owner(self, id: str) -> Owner | None:
        """Who the document ``id`` belongs to, or None; reads two columns, never the body."""
        if "\x00" in id:
            return None
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT robot, shared FROM processes WHERE id = %s", (id,)
            ).fetchone()
        return None if row is None else Owner(id=id, robot=str(row[0]), shared=bool(row[1]))

    def find(self, query: str, k: int = 3, *, robots: Collection[str] | None = None) -> list[Found]:
        """See :meth:`robot_mcp_memory.store.ProcessStore.find`."""
        return self._search.find(query, k, robots=robots)

    def list(
        self,
        limit: int = 50,
        offset: int = 0,
        *,
        robots: Collection[str] | None = None,
        stale: bool | None = None,
    ) -> list[ProcessDoc]:
        """Documents ordered by id (bytewise, as on SQLite); ``limit`` clamped to
        ``1..MAX_LIMIT``; ``robots`` filters as in :meth:`find`; ``stale`` True or False
        keeps only the documents that are (are not) stale (:class:`DocState`'s rule)."""
        where, params = scope_sql(robots)
        if stale is not None:
            marked = stale_sql("p.") if stale else f"NOT {stale_sql('p.')}"
            where = f"{where} AND {marked}" if where else marked
        with self.db.connection() as conn:
            rows = (
                conn.cursor(row_factory=dict_row)
                .execute(
                    f"SELECT {_P_COLUMNS} FROM processes AS p "  # noqa: S608
                    f'{"WHERE " + where if where else ""} ORDER BY p.id COLLATE "C" '
                    "LIMIT %s OFFSET %s",
                    (*params, clamp(limit, 1, MAX_LIMIT), max(0, int(offset))),
                )
                .fetchall()
            )
        return [doc for doc in map(readable, rows) if doc is not None]

    def count(self, *, robots: Collection[str] | None = None) -> int:
        """How many documents there are (``robots`` filters as in :meth:`find`)."""
        where, params = scope_sql(robots)
        with self.db.connection() as conn:
            row = conn.execute(
                f"SELECT count(*) FROM processes AS p {'WHERE ' + where if where else ''}",  # noqa: S608
                params,
            ).fetchone()
        return int(row[0]) if row is not None else 0

    def states(self, ids: Collection[str]) -> dict[str, DocState]:
        """The :class:`DocState` of each of ``ids`` that exists (one read)."""
        wanted = sorted({i for i in ids if "\x00" not in i})
        if not wanted:
            return {}
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT id, revision, recent_outcomes, last_success, life FROM processes "
                "WHERE id = ANY(%s)",
                (wanted,),
            ).fetchall()
        return {
            str(r[0]): DocState(
                revision=int(r[1]), recent=str(r[2] or ""), last_success=r[3], life=int(r[4])
            )
            for r in rows
        }

    def lives(self, id: str) -> builtins.list[int]:
        """The lives of ``id`` that have a row or a kept revision, oldest first (see
        :meth:`robot_mcp_memory.store.ProcessStore.lives`)."""
        if "\x00" in id:
            return []
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT life FROM processes WHERE id = %s "
                "UNION SELECT life FROM processes_revisions WHERE doc_id = %s ORDER BY 1",
                (id, id),
            ).fetchall()
        return [int(r[0]) for r in rows]

    def revisions(self, id: str, *, life: int | None = None) -> builtins.list[Revision]:
        """The kept earlier versions of ``id`` in life ``life`` (None: its latest), newest
        first, each with its owner then."""
        if "\x00" in id:
            return []
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT revision, replaced, reason, life, robot, shared FROM processes_revisions "  # noqa: S608 - constant SQL
                f"WHERE doc_id = %s AND life = coalesce(%s, ({LATEST_LIFE_SQL})) "
                "ORDER BY revision DESC",
                (id, life, id, id),
            ).fetchall()
        return [
            Revision(
                int(r[0]),
                str(r[1]),
                str(r[2]),
                int(r[3]),
                None if r[4] is None else str(r[4]),
                bool(r[5]),
            )
            for r in rows
        ]

    def get_revision(self, id: str, revision: int, *, life: int | None = None) -> ProcessDoc | None:
        """Revision ``revision`` of ``id``'s life ``life`` (None: its latest) as it was
        (counters of then), or None if it is not kept; the current revision is
        :meth:`get`'s document. One read."""
        if "\x00" in id:
            return None
        with self.db.connection() as conn:
            kept = conn.execute(
                "SELECT markdown FROM processes_revisions WHERE doc_id = %s AND revision = %s "  # noqa: S608 - constant SQL
                f"AND life = coalesce(%s, ({LATEST_LIFE_SQL}))",
                (id, revision, life, id, id),
            ).fetchone()
            if kept is not None:
                return ProcessDoc.parse(str(kept[0]))
            row = (
                conn.cursor(row_factory=dict_row)
                .execute(
                    f"SELECT {COLUMNS} FROM processes WHERE id = %s AND revision = %s "  # noqa: S608
                    "AND life = coalesce(%s, life)",
                    (id, revision, life),
                )
                .fetchone()
            )
        return None if row is None else row_to_doc(row)

    def near_duplicates(
        self, id: str, *, robots: Collection[str] | None = None
    ) -> builtins.list[NearDuplicate]:
        """Stored documents (within ``robots``, as :meth:`find` filters) that are near-copies
        of ``id``, most similar first: SQLite's rule
        (:meth:`robot_mcp_memory.store.ProcessStore.near_duplicates`).

        Candidates are picked by the index's lexemes (the rarest of ``id``'s that another
        visible document holds, :func:`~robot_mcp_memory.store.probe_terms`); the similarity
        is the cosine of the two documents' weighted term frequencies as the shared
        tokenizer counts them (:func:`~robot_mcp_memory.store.near_copies`), so a pair
        scores the same on both backends. One transaction, a few indexed reads.
        """
        if "\x00" in id:
            return []
        owners = None if robots is None else visible_owners(robots)
        in_owners = "" if owners is None else "AND owner = ANY(%s)"
        scope: tuple[Any, ...] = () if owners is None else (owners,)
        with self.db.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            me = cur.execute(
                "SELECT rid, title, task_pattern, tags, body FROM processes WHERE id = %s",
                (id,),
            ).fetchone()
            if me is None:
                return []
            lexemes = [
                str(r[0])
                for r in conn.execute(
                    "SELECT term FROM processes_postings WHERE rid = %s", (me["rid"],)
                ).fetchall()
            ]
            df = {
                str(r[0]): int(r[1])
                for r in conn.execute(
                    "SELECT term, sum(docs) FROM processes_owner_terms "  # noqa: S608
                    f"WHERE term = ANY(%s) {in_owners} GROUP BY term",
                    (lexemes, *scope),
                ).fetchall()
            }
            probe = probe_terms(lexemes, df)
            if not probe:
                return []
            rows = cur.execute(
                "SELECT d.id, d.title, d.task_pattern, d.tags, d.body FROM "  # noqa: S608
                "(SELECT rid, count(*) AS hits FROM processes_postings "
                f"WHERE term = ANY(%s) {in_owners} GROUP BY rid) AS c "
                "JOIN processes AS d ON d.rid = c.rid WHERE d.id <> %s "
                'ORDER BY c.hits DESC, d.id COLLATE "C" LIMIT %s',
                (probe, *scope, id, NEAR_DUPLICATE_CANDIDATES),
            ).fetchall()
        mine = self._freq(me)
        return near_copies(mine, [(str(r["id"]), str(r["title"]), self._freq(r)) for r in rows])

    def _freq(self, row: dict[str, Any]) -> dict[str, float]:
        """A row's weighted term frequencies as the shared tokenizer counts them."""
        return self._tokenizer.document(
            str(row["title"]), str(row["task_pattern"] or ""), str(row["tags"]), str(row["body"])
        ).freq

    # --- writes --------------------------------------------------------------------

    @contextmanager
    def _write(self) -> Iterator[psycopg.Connection[Any]]:
        with self.db.connection() as conn:
            try:
                yield conn
            except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure):
                raise _Retry from None

    def _retrying(self, write: Callable[[psycopg.Connection[Any]], Any]) -> Any:
        for attempt in range(WRITE_RETRIES + 1):
            try:
                with self._write() as conn:
                    return write(conn)
            except _Retry:
                _log.warning("process_write_retried", attempt=attempt + 1)
        with self.db.connection() as conn:  # the last try reports what it meets
            return write(conn)

    def save(
        self,
        doc: ProcessDoc,
        *,
        may_update: Callable[[Owner], bool] | None = None,
        max_robot_documents: int | None = None,
        expected_revision: int | None = None,
    ) -> Saved:
        """See :meth:`robot_mcp_memory.store.ProcessStore.save` (same rules, same errors).

        With ``expected_revision`` the row is locked (``SELECT … FOR UPDATE``) before its
        revision is compared, and the check and the update are one transaction: of two
        replicas saving with the same expected revision, exactly one updates and the other
        (waiting on the lock, then reading the row the first committed) raises
        :class:`RevisionConflict` with the new revision.

        Raises:
            DocTooLarge: too many distinct words, or past ``max_robot_documents``.
            DocError: ``reason="conflict"`` when every id the rule tries is taken;
                ``reason="invalid_value"`` for a NUL character (PostgreSQL text cannot
                hold one).
            RevisionConflict: the document is not at ``expected_revision`` (or is gone).
        """
        _refuse_nul(doc)
        now = format_ts(self._clock())
        robot = doc.robot if doc.robot != "unknown" else self._robot_id
        tags = tags_json(doc.tags)
        document_terms(self._tokenizer, doc.title, doc.task_pattern, tags, doc.body)
        vectors = self._vectors.embed(
            [document_texts(doc.title, doc.task_pattern, doc.tags, doc.body)]
        )

        def write(conn: psycopg.Connection[Any]) -> Saved:
            cur = conn.cursor(row_factory=dict_row)
            candidate, n = doc.id, 1
            while True:
                row = cur.execute(
                    f"SELECT {ROW} FROM processes WHERE id = %s FOR UPDATE",  # noqa: S608
                    (candidate,),
                ).fetchone()
                if row is None:
                    if expected_revision and candidate == doc.id:
                        raise RevisionConflict(doc.id, expected_revision, None)
                    if max_robot_documents is not None:
                        _check_robot_documents(conn, robot, max_robot_documents)
                    inserted = insert_row(conn, doc, candidate, robot, now)
                    if inserted is None:
                        continue  # another replica took it just now: judge its row
                    rid, created = inserted, True
                    break
                owner = Owner(
                    id=str(row["id"]), robot=str(row["robot"]), shared=bool(row["shared"])
                )
                updatable = may_update is None or may_update(owner)
                if updatable and expected_revision is not None and candidate == doc.id:
                    # The caller names the revision it edited: its document whatever the
                    # mission, and only if still at that revision (issue 22).
                    if int(row["revision"]) != expected_revision:
                        raise RevisionConflict(doc.id, expected_revision, int(row["revision"]))
                    update_row(conn, doc, row, robot, now, "save", self.revisions_keep)
                    rid, created = int(row["rid"]), False
                    break
                if updatable and same_mission(row["source_mission_id"], doc.source_mission_id):
                    update_row(conn, doc, row, robot, now, "save", self.revisions_keep)
                    rid, created = int(row["rid"]), False
                    break
                n += 1
                candidate = next_candidate(doc.id, n)
            stored = self._reindexed(conn, rid, vectors)
            return Saved(
                doc=row_to_doc(stored),
                created=created,
                renamed_from=doc.id if candidate != doc.id else None,
                revision=int(stored["revision"]),
            )

        saved: Saved = self._retrying(write)
        return saved

    def _reindexed(self, conn: psycopg.Connection[Any], rid: int, vectors: Any) -> dict[str, Any]:
        """Index and embed the row ``rid`` just written; the row as stored."""
        index_document(conn, rid)
        self._vectors.write(conn, rid, vectors)
        stored = (
            conn.cursor(row_factory=dict_row)
            .execute(f"SELECT {ROW} FROM processes WHERE rid = %s", (rid,))  # noqa: S608
            .fetchone()
        )
        assert stored is not None
        return stored

    def import_document(self, doc: ProcessDoc, *, suffix: bool = False) -> Imported:
        """Store ``doc`` exactly as given (timestamps, counters, robot), for ``load``: see
        :meth:`robot_mcp_memory.store.ProcessStore.import_document` (``skipped`` when the
        same rendering is there, else ``conflict`` — nothing written — or, with
        ``suffix``, ``suffixed`` under the save rule's next free id). One transaction.

        Raises:
            DocError: ``reason="invalid_value"`` for a NUL character.
        """
        _refuse_nul(doc)
        markdown = doc.render()
        document_terms(self._tokenizer, doc.title, doc.task_pattern, tags_json(doc.tags), doc.body)
        vectors = self._vectors.embed(
            [document_texts(doc.title, doc.task_pattern, doc.tags, doc.body)]
        )
        updated = format_ts(doc.updated) if doc.updated else format_ts(self._clock())

        def write(conn: psycopg.Connection[Any]) -> Imported:
            cur = conn.cursor(row_factory=dict_row)
            candidate, n = doc.id, 1
            while True:
                row = cur.execute(
                    f"SELECT {COLUMNS} FROM processes WHERE id = %s FOR UPDATE",  # noqa: S608
                    (candidate,),
                ).fetchone()
                if row is None:
                    stored = (
                        doc if candidate == doc.id else doc.model_copy(update={"id": candidate})
                    )
                    rid = insert_row(conn, stored, candidate, doc.robot, updated)
                    if rid is None:
                        continue  # another replica took it just now: judge its row
                    break
                if candidate == doc.id:
                    verdict = import_verdict(row, doc.id, markdown, suffix=suffix)
                    if verdict is not None:
                        return verdict
                n += 1
                candidate = next_candidate(doc.id, n)
            self._reindexed(conn, rid, vectors)
            return Imported("inserted" if candidate == doc.id else "suffixed", candidate)

        imported: Imported = self._retrying(write)
        return imported

    def revert(self, id: str, revision: int, *, life: int | None = None) -> Saved | None:
        """Make kept revision ``revision`` of ``id``'s life ``life`` (None: its latest)
        current again as a new revision; None when it is not kept. SQLite's rule
        (:meth:`robot_mcp_memory.store.ProcessStore.revert`): the current version is kept
        (``reason="revert"``), the counters stay the current ones except that reverting,
        in its own life, the version a merge replaced takes the merged document's counts
        off again, and a deleted id comes back in its latest life with the revision's
        counters. One transaction, the row locked."""
        if "\x00" in id:
            return None
        with self.db.connection() as conn:
            found = conn.execute(
                "SELECT markdown, life FROM processes_revisions WHERE doc_id = %s "  # noqa: S608 - constant SQL
                f"AND revision = %s AND life = coalesce(%s, ({LATEST_LIFE_SQL}))",
                (id, revision, life, id, id),
            ).fetchone()
        if found is None:
            return None
        doc = ProcessDoc.parse(str(found[0]))
        life = int(found[1])
        document_terms(self._tokenizer, doc.title, doc.task_pattern, tags_json(doc.tags), doc.body)
        vectors = self._vectors.embed(
            [document_texts(doc.title, doc.task_pattern, doc.tags, doc.body)]
        )
        now = format_ts(self._clock())

        def write(conn: psycopg.Connection[Any]) -> Saved | None:
            kept = conn.execute(
                "SELECT reason, replaced FROM processes_revisions WHERE doc_id = %s "
                "AND life = %s AND revision = %s",
                (id, life, revision),
            ).fetchone()
            if kept is None:
                return None  # pruned by another replica's write just now
            merged = merged_counters(conn, str(kept[0]), str(kept[1]))
            cur = conn.cursor(row_factory=dict_row)
            while True:
                row = cur.execute(
                    f"SELECT {ROW} FROM processes WHERE id = %s FOR UPDATE",  # noqa: S608
                    (id,),
                ).fetchone()
                if row is None:
                    inserted = insert_row(conn, doc, id, doc.robot, now, resume_life=True)
                    if inserted is None:
                        continue
                    rid, created = inserted, True
                    break
                update_row(conn, doc, row, doc.robot, now, "revert", self.revisions_keep)
                rid, created = int(row["rid"]), False
                if doc.source_mission_id is None:  # COALESCE kept the stored one
                    conn.execute(
                        "UPDATE processes SET source_mission_id = NULL WHERE rid = %s", (rid,)
                    )
                if merged is not None and int(row["life"]) == life:
                    # undoing a merge: its counts go with it
                    conn.execute(
                        "UPDATE processes SET success_count = GREATEST(success_count - %s, 0), "
                        "failure_count = GREATEST(failure_count - %s, 0) WHERE rid = %s",
                        (*merged, rid),
                    )
                break
            stored = self._reindexed(conn, rid, vectors)
            return Saved(
                doc=row_to_doc(stored),
                created=created,
                renamed_from=None,
                revision=int(stored["revision"]),
            )

        saved: Saved | None = self._retrying(write)
        return saved

    def merge(self, keep_id: str, merge_id: str) -> Merged | None:
        """Merge ``merge_id`` into ``keep_id``; None if either is unknown. SQLite's rule
        (:meth:`robot_mcp_memory.store.ProcessStore.merge`): counters added (saturating),
        the later ``last_used``/``last_success``, ``merge_id``'s outcome-log lines appended,
        both prior versions kept as revisions, ``merge_id`` deleted. One transaction; both
        rows locked in id order, so two merges of the same pair cannot deadlock.

        Raises:
            DocError: ``keep_id`` equals ``merge_id``.
            DocTooLarge: the merged document would pass the size limit (nothing written).
        """
        if keep_id == merge_id:
            raise DocError("merge_id", "invalid", "a document cannot be merged into itself")
        if "\x00" in keep_id or "\x00" in merge_id:
            return None
        now = format_ts(self._clock())

        def write(conn: psycopg.Connection[Any]) -> Merged | None:
            rows = {
                str(r["id"]): r
                for r in conn.cursor(row_factory=dict_row)
                .execute(
                    f"SELECT {ROW} FROM processes WHERE id = ANY(%s) "  # noqa: S608
                    'ORDER BY id COLLATE "C" FOR UPDATE',
                    ([keep_id, merge_id],),
                )
                .fetchall()
            }
            keep, gone = rows.get(keep_id), rows.get(merge_id)
            if keep is None or gone is None:
                return None
            kept_doc = row_to_doc(keep)
            gone_doc = row_to_doc(gone)
            body = kept_doc.body
            for line in outcome_lines(gone_doc.body):
                body = append_outcome(body, line)
            kept_doc.body = body
            size = len(kept_doc.render().encode("utf-8", "surrogatepass"))
            if size > MAX_DOC_BYTES:
                raise DocTooLarge(
                    size,
                    detail=f"merging the outcome log of {merge_id!r} would take {keep_id!r} "
                    f"past {MAX_DOC_BYTES // 1024} KiB; shorten one of them first",
                )
            document_terms(
                self._tokenizer, kept_doc.title, kept_doc.task_pattern, keep["tags"], body
            )
            vectors = self._vectors.embed(
                [document_texts(kept_doc.title, kept_doc.task_pattern, kept_doc.tags, body)]
            )
            merged_revision = int(gone["revision"])
            keep_revision(conn, gone, "merged", now, self.revisions_keep)
            unindex_document(conn, int(gone["rid"]))
            conn.execute("DELETE FROM processes WHERE rid = %s", (gone["rid"],))
            keep_revision(
                conn, keep, f"merge:{merge_id}:{merged_revision}", now, self.revisions_keep
            )
            last_used = max((v for v in (keep["last_used"], gone["last_used"]) if v), default=None)
            last_success = max(
                (v for v in (keep["last_success"], gone["last_success"]) if v), default=None
            )
            conn.execute(
                "UPDATE processes SET body = %s, updated = %s, revision = revision + 1, "  # noqa: S608
                f"success_count = LEAST(success_count + %s, {MAX_COUNT}), "
                f"failure_count = LEAST(failure_count + %s, {MAX_COUNT}), "
                "last_used = %s, last_success = %s WHERE rid = %s",
                (
                    body,
                    now,
                    gone_doc.success_count,
                    gone_doc.failure_count,
                    last_used,
                    last_success,
                    keep["rid"],
                ),
            )
            stored = self._reindexed(conn, int(keep["rid"]), vectors)
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

        merged: Merged | None = self._retrying(write)
        return merged

    def delete(self, id: str) -> bool:
        """Remove the document with its index entry and vectors in one transaction, keeping
        its last version as a revision (``reason="delete"``); False if unknown. A row too
        damaged to render is deleted without a revision (logged)."""
        if "\x00" in id:
            return False
        now = format_ts(self._clock())

        def write(conn: psycopg.Connection[Any]) -> bool:
            row = (
                conn.cursor(row_factory=dict_row)
                .execute(f"SELECT {ROW} FROM processes WHERE id = %s FOR UPDATE", (id,))  # noqa: S608
                .fetchone()
            )
            if row is None:
                return False
            keep_revision(conn, row, "delete", now, self.revisions_keep)
            unindex_document(conn, int(row["rid"]))
            conn.execute("DELETE FROM processes WHERE rid = %s", (row["rid"],))
            return True

        deleted: bool = self._retrying(write)
        return deleted

    def reindex(self) -> int:
        """Rebuild the search entries, postings and frequencies from the rows in one
        transaction (writers wait), then recompute every vector; how many documents."""
        with self.db.connection() as conn:
            conn.execute("LOCK TABLE processes IN SHARE ROW EXCLUSIVE MODE")
            n = rebuild_index(conn)
            if self._vectors.has_table and self.embedder is not None:
                conn.execute("DELETE FROM processes_vectors")
        self.sync_vectors()
        _log.info("processes_reindexed", indexed=n)
        return n

    def sync_vectors(self) -> int:
        """Embed the rows that have no vector of this embedder; how many (0 without one)."""
        return self._vectors.sync()

    def record_outcome(self, id: str, success: bool, note: str = "") -> ProcessDoc | None:
        """Count one success or failure of the document (one atomic, saturating UPDATE),
        set ``last_used``, and append ``note`` (if any) under the body's ``## Outcome log``
        in the same transaction; the document as stored, or None for an unknown id.

        A note that would take the document past its size limit is left out (logged
        ``process_outcome_note_skipped``); the counters still move.
        """
        if "\x00" in id:
            return None
        when = self._clock()
        stamp = format_ts(when)
        column = "success_count" if success else "failure_count"
        line = outcome_line(stamp, success, note.replace("\x00", " ")) if note.strip() else None

        def write(conn: psycopg.Connection[Any]) -> ProcessDoc | None:
            cur = conn.cursor(row_factory=dict_row)
            row = cur.execute(
                f"UPDATE processes SET {column} = LEAST({column} + 1, {MAX_COUNT}), "  # noqa: S608
                f"last_used = %s, recent_outcomes = right(recent_outcomes || %s, {STALE_WINDOW}), "
                "last_success = CASE WHEN %s THEN %s ELSE last_success END "
                f"WHERE id = %s RETURNING rid, {COLUMNS}",
                (stamp, "s" if success else "f", success, stamp, id),
            ).fetchone()
            if row is None:
                return None
            doc = row_to_doc(row)
            doc.last_used = when
            if line is None:
                return doc
            body = append_outcome(str(row["body"]), line)
            doc.body = body
            if len(doc.render().encode("utf-8", "surrogatepass")) > MAX_DOC_BYTES:
                _log.warning("process_outcome_note_skipped", id=id, reason="too_large")
                doc.body = str(row["body"])
                return doc
            conn.execute("UPDATE processes SET body = %s WHERE rid = %s", (body, row["rid"]))
            index_document(conn, int(row["rid"]))
            self._vectors.write(
                conn,
                int(row["rid"]),
                self._vectors.embed([document_texts(doc.title, doc.task_pattern, doc.tags, body)]),
            )
            return doc

        result: ProcessDoc | None = self._retrying(write)
        return result

    # --- lifecycle -----------------------------------------------------------------

    def close(self) -> None:
        """Nothing to flush (every write is committed when it returns); the database is
        its owner's to close. Idempotent."""

    def __repr__(self) -> str:
        return f"<PgProcessStore {self.db.where!r} robot_id={self._robot_id!r}>"


def _check_robot_documents(conn: psycopg.Connection[Any], robot: str, limit: int) -> None:
    """Refuse a new document of ``robot`` when it already owns ``limit``; counted under an
    advisory lock on the robot held to the end of the save's transaction, so concurrent
    saves on any replica cannot both pass."""
    conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended('robot-documents:' || %s, 0))", (robot,)
    )
    row = conn.execute("SELECT count(*) FROM processes WHERE robot = %s", (robot,)).fetchone()
    owned = int(row[0]) if row is not None else 0
    if owned >= limit:
        raise robot_documents_refusal(robot, owned, limit)
