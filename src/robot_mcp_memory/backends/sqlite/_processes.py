"""The process documents in ``index.db``: :class:`SqliteProcessRepo`, storage only.

What is SQLite's own here, every rule being the service's:

- **one writer**: a write script runs in one ``BEGIN IMMEDIATE`` transaction of the kit
  store (:meth:`SqliteStore.transaction`), which holds the whole file, so a row read in it
  is as good as locked; a kill -9 leaves the old document or the new one;
- **the hot path**: an outcome's counter update is queued on the kit's writer thread
  (``SqliteStore.enqueue``, relative updates, never blocking the caller; dropped and
  logged when the queue is full), and a write never writes the counters of a row it did
  not read in its transaction;
- **the lexical index**: FTS5 (``processes_fts``, the row's own rowid) and the per-owner
  statistics (:mod:`._terms`) written in the write's transaction; an unscoped find ranks
  by FTS5's own bm25, a narrowed one by the statistics of its owners;
- **the vectors**: ``processes_vectors`` in the write's transaction, and their copy in
  memory (:class:`~._vectors.VectorIndex`) brought in step after each commit;
- **revisions pruned** through the kit's chokepoint (``SqliteStore.prune``).

Thread-safe (the kit store is).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from robot_mcp_kit.log import get_logger
from robot_mcp_kit.store import SqliteStore
from robot_mcp_memory.backends import _processes as sql
from robot_mcp_memory.backends._sql import SQLITE, Row, Session
from robot_mcp_memory.backends._tokens import Tokenizer
from robot_mcp_memory.backends.sqlite._sessions import (
    SqliteSessions,
    SqliteTransaction,
    integrity_error,
)
from robot_mcp_memory.backends.sqlite._terms import (
    TermIndex,
    index_document,
    rebuild_term_index,
    unindex_document,
)
from robot_mcp_memory.backends.sqlite._vectors import VectorIndex, from_blob, to_blob
from robot_mcp_memory.processes import (
    BM25_WEIGHTS,
    COLUMNS,
    REPAIR_WEIGHT,
    Counted,
    DocTerms,
    Embedder,
    Lexical,
    Pairs,
    ProcessDoc,
    ProcessTx,
    Semantic,
    match_expression,
    owner_key,
)

__all__ = ["EMBED_BATCH", "SqliteProcessRepo"]

_log = get_logger("robot_mcp_memory.store")

T = TypeVar("T")

EMBED_BATCH = 256
"""Documents embedded per transaction by :meth:`SqliteProcessRepo.sync_vectors`."""

_TERMS_BATCH = 500
"""Documents counted into the term statistics per transaction at open."""

_P_COLUMNS = ", ".join("p." + c for c in COLUMNS.split(", "))


def _fts_matches(repaired: bool) -> str:
    """``(rid, relevance)`` of every match, by FTS5's bm25 over the whole index."""
    weights = ", ".join(repr(float(w)) for w in BM25_WEIGHTS)
    exact = (
        f"SELECT rowid AS rid, -bm25(processes_fts, {weights}) AS relevance "  # noqa: S608
        "FROM processes_fts WHERE processes_fts MATCH ?"
    )
    if not repaired:
        return exact
    return (
        f"SELECT rid, sum(relevance) AS relevance FROM ({exact} UNION ALL "  # noqa: S608
        f"SELECT rowid AS rid, {REPAIR_WEIGHT!r} * -bm25(processes_fts, {weights}) "
        "FROM processes_fts WHERE processes_fts MATCH ?) GROUP BY rid"
    )


class _Writes:
    """What SQLite's index, vectors and revision bound do inside one write transaction
    (a :class:`~.._processes.IndexWrites`); what the in-memory vectors must do once it
    commits is collected in ``after``."""

    def __init__(self, repo: SqliteProcessRepo) -> None:
        self._repo = repo
        self.after: list[tuple[int, Pairs | None, str, bool]] = []

    def delete(self, s: Session, key: int) -> None:
        conn = _conn(s)
        sql.delete_row(s, key)
        conn.execute("DELETE FROM processes_fts WHERE rowid = ?", (key,))
        unindex_document(conn, key)
        self._repo.write_vectors(conn, key, None)
        self.after.append((key, None, "", False))

    def index(self, s: Session, key: int, terms: DocTerms, vectors: Pairs | None) -> Row:
        conn = _conn(s)
        stored = s.one(
            f"SELECT {sql.row_columns(SQLITE)} FROM processes AS p WHERE p.rowid = ?",  # noqa: S608
            [key],
        )
        assert stored is not None
        # The index row shares the document row's rowid: search joins the two on it, and a
        # document's entry is found without scanning the (UNINDEXED) id column.
        conn.execute("DELETE FROM processes_fts WHERE rowid = ?", (key,))
        conn.execute(
            "INSERT INTO processes_fts (rowid, id, title, task_pattern, tags, body) "
            "SELECT rowid, id, title, task_pattern, tags, body FROM processes WHERE rowid = ?",
            (key,),
        )
        robot, shared = str(stored["robot"]), bool(stored["shared"])
        index_document(conn, key, owner_key(robot, shared), terms)
        self._repo.write_vectors(conn, key, vectors)
        self.after.append((key, vectors, robot, shared))
        return stored

    def owned(self, s: Session, robot: str) -> int:
        # The write transaction holds the whole file: no other save can add one meanwhile.
        row = s.one("SELECT count(*) AS n FROM processes WHERE robot = ?", [robot])
        return 0 if row is None else int(row["n"])

    def prune_revisions(self, s: Session, id: str, keep: int) -> None:
        # The kit's chokepoint, nested in this transaction (a savepoint), confined to this
        # id's revisions (the primary key's prefix serves it: no table scan).
        self._repo.store.prune("processes_revisions", keep_last=keep, within={"doc_id": id})


def _conn(s: Session) -> sqlite3.Connection:
    """The write connection under a transaction's session."""
    assert isinstance(s, SqliteTransaction)
    return s.conn


class _Index:
    """What SQLite's lexical index and vectors answer a find (a
    :class:`~.._processes.IndexReads`)."""

    # The vocabulary's key (term, owner) leads to the postings' (owner, term, ...).
    postings = (
        "processes_owner_terms AS o JOIN processes_postings AS x "
        "ON x.owner = o.owner AND x.term = o.term",
        "x.doc_rowid",
    )

    def __init__(self, repo: SqliteProcessRepo) -> None:
        self._repo = repo

    def stems(self, words: Sequence[str]) -> list[tuple[str, ...]]:
        return self._repo.tokenizer.stems(words)

    def document_frequency(
        self, terms: Collection[str], owners: Sequence[str] | None
    ) -> dict[str, int]:
        return self._repo.term_index.document_frequency(terms, owners)

    def matches(self, query: Lexical) -> tuple[str, list[Any]] | None:
        """FTS5's bm25 for an unscoped call (it counts the whole index, which the call may
        read), the owners' bm25 for a narrowed one."""
        if query.owners is None:
            params: list[Any] = [match_expression(query.terms)]
            if query.repairs:
                params.append(match_expression([r.spelling for r in query.repairs]))
            return _fts_matches(bool(query.repairs)), params
        phrases = query.phrases(self.stems(query.terms))
        if not phrases:
            return None
        found = self._repo.term_index.matches_sql(phrases, query.owners)
        return None if found is None else (found[0], list(found[1]))

    def semantic_pool(self, s: Session, query: Semantic) -> tuple[dict[int, float], float, float]:
        """The vectors in memory preselect (the rows a find reads are filtered again)."""
        index = self._repo.vector_index
        if index is None:
            return {}, 0.0, 0.0
        keys, cosines, low, high = index.score(query.vector, query.robots, query.top)
        cosine = dict(zip(keys.tolist(), cosines.tolist(), strict=True))
        cosine.update(index.cosines([k for k in query.also if k not in cosine], query.vector))
        return cosine, low, high

    def index_terms(self, s: Session, id: str) -> list[str]:
        return list(self.term_frequencies(s, [id]).get(id, {}))

    def term_frequencies(self, s: Session, ids: Collection[str]) -> dict[str, dict[str, float]]:
        """The frequencies the statistics hold (counted at the write)."""
        among, param = SQLITE.one_of("p.id", sorted(set(ids)))
        rows = s.all(
            "SELECT p.id, l.terms FROM processes AS p JOIN processes_lengths AS l "  # noqa: S608
            f"ON l.doc_rowid = p.rowid WHERE {among}",
            [param],
        )
        return {
            str(r["id"]): {str(t): float(f) for t, f in json.loads(r["terms"]).items()}
            for r in rows
        }


class SqliteProcessRepo:
    """The process documents of one ``index.db`` (a :class:`~robot_mcp_memory.processes.
    ProcessRepo`).

    Args:
        store: the kit store of ``index.db`` (:data:`~.schema.SCHEMA`); closing the
            repository closes it.
        tokenizer: the shared tokenizer the statistics count with.

    Opening counts into the per-owner statistics the documents a migration left without
    them (:meth:`sync_terms`).
    """

    def __init__(self, store: SqliteStore, tokenizer: Tokenizer) -> None:
        self.store = store
        self.tokenizer = tokenizer
        self.term_index = TermIndex(store)
        self.has_vector_table = any(t.name == "processes_vectors" for t in store.schema.tables)
        self.vector_index: VectorIndex | None = None
        self._model: Embedder | None = None
        self._vectors_lock = threading.Lock()
        self._index = _Index(self)
        self.sync_terms()

    @property
    def where(self) -> str:
        """The file."""
        return str(self.store.path)

    def use_vectors(self, model: Embedder) -> bool:
        """Store ``model``'s vectors from now on (kept in memory too); False for a file
        whose schema has no vectors table."""
        if not self.has_vector_table:
            return False
        self._model = model
        self.vector_index = VectorIndex(model.dim)
        return True

    def count_terms(self, title: str, task_pattern: str, tags: str, body: str) -> DocTerms:
        """The shared tokenizer's count (what the statistics hold)."""
        return self.tokenizer.document(title, task_pattern, tags, body)

    def unstorable(self, doc: ProcessDoc) -> str | None:
        """Nothing: SQLite stores any text."""
        return None

    @contextmanager
    def reading(self) -> Iterator[sql.Reads]:
        """Reads; each statement sees the file as committed (WAL readers never wait)."""
        yield sql.Reads(SqliteSessions.reads(self.store), self._index)

    def write(self, script: Callable[[ProcessTx], T]) -> T:
        """Run ``script`` in one cold transaction; then bring the in-memory vectors in step."""
        writes = _Writes(self)
        try:
            with self.store.transaction() as conn:
                result = script(sql.Tx(SqliteSessions.on(conn), writes))
        except sqlite3.IntegrityError as exc:
            raise integrity_error(exc) from None
        index = self.vector_index
        if index is not None:
            for key, vectors, robot, shared in writes.after:
                if vectors is None:
                    index.remove(key)
                else:
                    index.put(key, vectors[0][0], vectors[0][1], robot, shared)
        return result

    def write_vectors(self, conn: sqlite3.Connection, key: int, vectors: Pairs | None) -> None:
        """Inside a write's transaction: the document's vectors, or none (dropped, to be
        recomputed when a model is next used)."""
        stored = sql.stored_vectors(vectors, self._model) if self.has_vector_table else None
        if stored is not None:
            model, head, whole = stored
            conn.execute(
                "INSERT OR REPLACE INTO processes_vectors (doc_rowid, model, dim, head, doc) "
                "VALUES (?, ?, ?, ?, ?)",
                (key, model.name, model.dim, to_blob(head), to_blob(whole)),
            )
        elif self.has_vector_table:
            conn.execute("DELETE FROM processes_vectors WHERE doc_rowid = ?", (key,))

    def count_outcome(
        self,
        id: str,
        success: bool,
        stamp: str,
        note: Callable[[ProcessTx, Row], Any] | None = None,
    ) -> Counted | None:
        """Queue the counter update on the hot path (the row as read before it, the count
        pending); a note is a cold transaction of its own."""
        row = self.store.query_one(f"SELECT {COLUMNS} FROM processes WHERE id = ?", (id,))  # noqa: S608
        if row is None:
            return None
        queued = self.store.enqueue(
            sql.outcome_sql(SQLITE, success), (stamp, "s" if success else "f", success, stamp, id)
        )
        if not queued:
            _log.warning("process_outcome_dropped", id=id, success=success)
        if note is not None:

            def add(tx: ProcessTx) -> None:
                current = tx.row(id)
                if current is not None:
                    note(tx, current)

            self.write(add)
        return Counted(row, pending=queued)

    def flush(self) -> None:
        """Wait until the queued counter updates are written."""
        self.store.flush()

    def sync_vectors(self, model: Embedder, embed: Callable[[list[Row]], Pairs]) -> int:
        """Drop vectors of another model or of deleted rows, embed every row without one
        (:data:`EMBED_BATCH` per transaction, each batch read and written inside its
        transaction, so a concurrent save is never overwritten with a stale vector), and
        load the table into memory."""
        index = self.vector_index
        if index is None or self._model is None:
            return 0
        embedded = 0
        with self._vectors_lock:
            with self.store.transaction() as conn:
                conn.execute(
                    "DELETE FROM processes_vectors WHERE model != ? OR dim != ? "
                    "OR doc_rowid NOT IN (SELECT rowid FROM processes)",
                    (model.name, model.dim),
                )
            while True:
                with self.store.transaction() as conn:
                    rows = conn.execute(
                        f"SELECT p.rowid AS key, {_P_COLUMNS} FROM processes AS p "  # noqa: S608
                        "WHERE p.rowid NOT IN (SELECT doc_rowid FROM processes_vectors) "
                        "ORDER BY p.rowid LIMIT ?",
                        (EMBED_BATCH,),
                    ).fetchall()
                    if not rows:
                        break
                    for row, pair in zip(rows, embed(rows), strict=True):
                        self.write_vectors(conn, int(row["key"]), [pair])
                    embedded += len(rows)
            index.clear()
            for row in self.store.query(
                "SELECT v.doc_rowid, v.head, v.doc, p.robot, p.shared FROM processes_vectors "
                "AS v JOIN processes AS p ON p.rowid = v.doc_rowid"
            ):
                head = from_blob(row[1], model.dim)
                whole = from_blob(row[2], model.dim)
                if head is not None and whole is not None:
                    index.put(int(row[0]), head, whole, str(row[3]), bool(row[4]))
        return embedded

    def rebuild_index(self) -> int:
        """Refill ``processes_fts`` and the statistics from the rows in one transaction and
        drop every vector; how many documents were indexed."""
        with self.store.transaction() as conn:
            conn.execute("DELETE FROM processes_fts")
            conn.execute(
                "INSERT INTO processes_fts (rowid, id, title, task_pattern, tags, body) "
                "SELECT rowid, id, title, task_pattern, tags, body FROM processes"
            )
            conn.execute("INSERT INTO processes_fts (processes_fts) VALUES ('optimize')")
            n = rebuild_term_index(conn, self.tokenizer)
            if self.has_vector_table:
                conn.execute("DELETE FROM processes_vectors")
        if self.vector_index is not None:
            self.vector_index.clear()
        return n

    def sync_terms(self) -> int:
        """Bring the per-owner term statistics up to date with the rows; how many documents
        were counted.

        Every write keeps them in step in its own transaction, so this finds work only in
        a file that has rows but not their statistics (just migrated to them): each missing
        document is counted, a batch per transaction, and statistics of rows that no
        longer exist are dropped.
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
                    terms = self.tokenizer.document(
                        str(row[3]), str(row[4] or ""), str(row[5]), str(row[6])
                    )
                    index_document(conn, int(row[0]), owner_key(str(row[1]), bool(row[2])), terms)
        _log.info("process_terms_synced", counted=len(missing), dropped=len(stale))
        return len(missing)

    def close(self) -> None:
        """Write queued counters and close the file. Idempotent."""
        self.store.close()

    def __repr__(self) -> str:
        return f"<SqliteProcessRepo {self.where!r}>"
