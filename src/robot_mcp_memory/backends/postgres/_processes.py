"""The process documents in PostgreSQL: :class:`PgProcessRepo`, storage only.

What is PostgreSQL's own here, every rule being the service's — several replicas share
the database, so what SQLite's one writer made true is the database's:

- **row locks**: a write script reads the rows it writes ``FOR UPDATE`` (two rows in id
  order, so two merges of one pair never deadlock); an id is taken by the unique key
  (``INSERT ... ON CONFLICT (id) DO NOTHING``): an insert that loses the race answers
  None and the script reads the winner's row; a robot's documents are counted under a
  transaction-level advisory lock on the robot;
- **retries**: a script that meets a deadlock or a serialization failure is run again,
  whole (:data:`WRITE_RETRIES`);
- **the count of an outcome** is one ``UPDATE ... RETURNING`` (exact under any
  concurrency), and its note is written in the same transaction;
- **the lexical index** is PostgreSQL full text (:mod:`._index`: a weighted ``tsvector``,
  postings and per-owner frequencies recomputed from the row in the server) and the
  **vectors** are pgvector columns scored in the server (:mod:`._vectors`); nothing is held
  in memory, so a replica reads at once what any other wrote;
- **text cannot hold NUL**: a document with one is refused, an id with one is not found.

Connection loss, pool exhaustion and statement timeouts are
:class:`~robot_mcp_kit.store.StoreUnavailable` (:class:`PgDatabase`), nothing written.
Blocking and thread-safe (the pool is).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg

from robot_mcp_kit.log import get_logger
from robot_mcp_memory.backends import _processes as sql
from robot_mcp_memory.backends._sql import POSTGRES, Row, Session
from robot_mcp_memory.backends._tokens import Tokenizer
from robot_mcp_memory.backends.postgres._database import PgDatabase
from robot_mcp_memory.backends.postgres._index import (
    PgTerms,
    index_document,
    rebuild_index,
    unindex_document,
)
from robot_mcp_memory.backends.postgres._sessions import PgSession, PgSessions
from robot_mcp_memory.backends.postgres._vectors import PgVectors
from robot_mcp_memory.processes import COLUMNS, Counted

if TYPE_CHECKING:
    from robot_mcp_memory.processes import (
        DocTerms,
        Embedder,
        Lexical,
        Pairs,
        ProcessDoc,
        ProcessTx,
        Semantic,
    )

__all__ = ["WRITE_RETRIES", "PgProcessRepo"]

_log = get_logger("robot_mcp_memory.postgres")

T = TypeVar("T")

WRITE_RETRIES = 5
"""How often a write that met a deadlock or a serialization failure is run again."""

_RETRIED = (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure)


class _Retry(Exception):
    """A write's transaction met a deadlock or serialization failure (rolled back)."""


class _Writes:
    """What PostgreSQL's index, vectors, robot count and revision bound do inside one
    write transaction (a :class:`~.._processes.IndexWrites`)."""

    def __init__(self, repo: PgProcessRepo) -> None:
        self._repo = repo

    def delete(self, s: Session, key: int) -> None:
        unindex_document(_conn(s), key)
        sql.delete_row(s, key)  # its search entry and vectors go with it (cascade)

    def index(self, s: Session, key: int, terms: DocTerms, vectors: Pairs | None) -> Row:
        conn = _conn(s)
        index_document(conn, key)  # computed from the row in the server
        self._repo.vectors.write(conn, key, vectors)
        stored = s.one(
            f"SELECT {sql.row_columns(POSTGRES)} FROM processes AS p WHERE p.rid = ?",  # noqa: S608
            [key],
        )
        assert stored is not None
        return stored

    def owned(self, s: Session, robot: str) -> int:
        # Counted under an advisory lock on the robot held to the end of the transaction:
        # concurrent saves on any replica cannot both pass the last free place.
        s.one(
            "SELECT pg_advisory_xact_lock(hashtextextended('robot-documents:' || ?, 0)) AS l",
            [robot],
        )
        row = s.one("SELECT count(*) AS n FROM processes WHERE robot = ?", [robot])
        return 0 if row is None else int(row["n"])

    def prune_revisions(self, s: Session, id: str, keep: int) -> None:
        s.run(
            "DELETE FROM processes_revisions WHERE doc_id = ? AND (life, revision) NOT IN "
            "(SELECT life, revision FROM processes_revisions WHERE doc_id = ? "
            "ORDER BY replaced DESC, life DESC, revision DESC LIMIT ?)",
            [id, id, max(0, keep)],
        )


def _conn(s: Session) -> psycopg.Connection[Any]:
    """The connection under a transaction's session."""
    assert isinstance(s, PgSession)
    return s.conn


class _Index:
    """What PostgreSQL's full text and pgvector answer a find on one connection (a
    :class:`~.._processes.IndexReads`)."""

    postings = ("processes_postings AS o", "o.rid")

    def __init__(self, repo: PgProcessRepo, conn: psycopg.Connection[Any]) -> None:
        self._repo = repo
        self._terms = PgTerms(conn)

    def stems(self, words: Sequence[str]) -> list[tuple[str, ...]]:
        return self._terms.stems(words)

    def document_frequency(
        self, terms: Collection[str], owners: Sequence[str] | None
    ) -> dict[str, int]:
        return self._terms.document_frequency(terms, owners)

    def matches(self, query: Lexical) -> tuple[str, list[Any]] | None:
        """bm25 over the statistics of the query's owners (every owner when unscoped)."""
        phrases = query.phrases(self.stems(query.terms))
        return self._terms.matches_sql(phrases, query.owners) if phrases else None

    def semantic_pool(self, s: Session, query: Semantic) -> tuple[dict[int, float], float, float]:
        """One exact scan in the server, behind the visibility filter."""
        return self._repo.vectors.score(s, query)

    def index_terms(self, s: Session, id: str) -> list[str]:
        rows = s.all(
            "SELECT o.term FROM processes_postings AS o JOIN processes AS p ON p.rid = o.rid "
            "WHERE p.id = ?",
            [id],
        )
        return [str(r["term"]) for r in rows]

    def term_frequencies(self, s: Session, ids: Collection[str]) -> dict[str, dict[str, float]]:
        """The shared tokenizer's count of each row (the index holds lexemes of its own)."""
        among, param = POSTGRES.one_of("id", sorted(set(ids)))
        rows = s.all(
            f"SELECT id, title, task_pattern, tags, body FROM processes WHERE {among}",  # noqa: S608
            [param],
        )
        count = self._repo.count_terms
        return {
            str(r["id"]): count(
                str(r["title"]), str(r["task_pattern"] or ""), str(r["tags"]), str(r["body"])
            ).freq
            for r in rows
        }


class PgProcessRepo:
    """The process documents of one PostgreSQL database (a
    :class:`~robot_mcp_memory.processes.ProcessRepo`).

    Args:
        db: the opened database (not owned: closing the repository leaves it open).
        tokenizer: the shared tokenizer (the documents' term counts, the same as SQLite's).
    """

    def __init__(self, db: PgDatabase, tokenizer: Tokenizer) -> None:
        self.db = db
        self.tokenizer = tokenizer
        self.vectors = PgVectors(db)
        self._sessions = PgSessions(db)

    @property
    def where(self) -> str:
        """``user@host:port/db``."""
        return self.db.where

    def use_vectors(self, model: Embedder) -> bool:
        """Store ``model``'s vectors from now on; False (with one WARNING
        ``pgvector_missing``) where the database has no ``vector`` extension."""
        if not self.vectors.has_table:
            _log.warning(
                "pgvector_missing",
                where=self.db.where,
                detail="the database has no 'vector' extension; search is lexical "
                "(install pgvector on the server and restart to rank by meaning too)",
            )
            return False
        self.vectors.model = model
        return True

    def count_terms(self, title: str, task_pattern: str, tags: str, body: str) -> DocTerms:
        """The shared tokenizer's count (the same as SQLite's)."""
        return self.tokenizer.document(title, task_pattern, tags, body)

    def unstorable(self, doc: ProcessDoc) -> str | None:
        """The first field holding a NUL character, which PostgreSQL text cannot hold."""
        for name in ("id", "title", "task_pattern", "robot", "source_mission_id", "body"):
            value = getattr(doc, name)
            if isinstance(value, str) and "\x00" in value:
                return name
        return "tags" if any("\x00" in t for t in doc.tags) else None

    @contextmanager
    def reading(self) -> Iterator[sql.Reads]:
        """Reads on one connection, in one snapshot."""
        with self._sessions.read() as s:
            yield sql.Reads(s, _Index(self, s.conn))

    def write(self, script: Callable[[ProcessTx], T]) -> T:
        """Run ``script`` in one transaction, again (whole) after a deadlock or a
        serialization failure, at most :data:`WRITE_RETRIES` times."""
        for attempt in range(WRITE_RETRIES):
            try:
                with self._sessions.write() as s:
                    try:
                        return script(sql.Tx(s, _Writes(self)))
                    except _RETRIED:
                        # Rolled back: say so before the database takes it for a lost
                        # connection.
                        raise _Retry from None
            except _Retry:
                _log.warning("process_write_retried", attempt=attempt + 1)
        with self._sessions.write() as s:  # the last try reports what it meets
            return script(sql.Tx(s, _Writes(self)))

    def count_outcome(
        self,
        id: str,
        success: bool,
        stamp: str,
        note: Callable[[ProcessTx, Row], Any] | None = None,
    ) -> Counted | None:
        """One ``UPDATE ... RETURNING`` (the row as counted), and ``note`` on that locked
        row in the same transaction."""
        if "\x00" in id:
            return None

        def count(tx: ProcessTx) -> Counted | None:
            assert isinstance(tx, sql.Tx)
            row = tx.session.one(
                f"{sql.outcome_sql(POSTGRES, success)} "
                f"RETURNING rid AS key, {COLUMNS}, revision, life, last_success",
                [stamp, "s" if success else "f", success, stamp, id],
            )
            if row is None:
                return None
            if note is not None:
                note(tx, row)
            return Counted(row, pending=False)

        return self.write(count)

    def flush(self) -> None:
        """Nothing is queued: every write is committed when it returns."""

    def sync_vectors(self, model: Embedder, embed: Callable[[list[Row]], Pairs]) -> int:
        """See :meth:`PgVectors.sync`."""
        return self.vectors.sync(self._sessions, model, embed)

    def rebuild_index(self) -> int:
        """Rebuild the search entries, postings and frequencies from the rows in one
        transaction (writers wait) and drop every vector; how many documents."""
        with self.db.connection() as conn:
            conn.execute("LOCK TABLE processes IN SHARE ROW EXCLUSIVE MODE")
            n = rebuild_index(conn)
            if self.vectors.has_table:
                conn.execute("DELETE FROM processes_vectors")
        return n

    def close(self) -> None:
        """Nothing to close: the database is its owner's. Idempotent."""

    def __repr__(self) -> str:
        return f"<PgProcessRepo {self.where!r}>"
