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

Writes that meet a deadlock or a serialization failure are retried
(:data:`WRITE_RETRIES`); the per-owner frequencies are locked in sorted order, so
deadlocks are not expected. Connection loss, pool exhaustion and statement timeouts are
:class:`~robot_mcp_kit.store.StoreUnavailable` (:class:`PgDatabase`), nothing written.

Without pgvector an embedder cannot be used: the store logs one WARNING
(``pgvector_missing``) at construction and searches lexically.

Blocking and thread-safe (the pool is); the tool runner calls it in worker threads.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.rows import dict_row

from robot_mcp_kit.log import get_logger
from robot_mcp_kit.models import format_ts, utc_now
from robot_mcp_memory._exceptions import DocError
from robot_mcp_memory.documents import Owner, ProcessDoc
from robot_mcp_memory.documents.rows import COLUMNS, readable, row_to_doc, tags_json
from robot_mcp_memory.limits import MAX_COUNT, MAX_DOC_BYTES, MAX_LIMIT, clamp
from robot_mcp_memory.postgres._process_index import (
    index_document,
    rebuild_index,
    unindex_document,
)
from robot_mcp_memory.postgres._process_search import PgProcessSearch, scope_sql
from robot_mcp_memory.postgres._process_vectors import PgVectors
from robot_mcp_memory.search import Found, Tokenizer, document_texts
from robot_mcp_memory.store import (
    Saved,
    append_outcome,
    document_terms,
    next_candidate,
    outcome_line,
    robot_documents_refusal,
    same_mission,
)

if TYPE_CHECKING:
    from robot_mcp_memory.postgres._database import PgDatabase
    from robot_mcp_memory.search import Embedder

__all__ = ["WRITE_RETRIES", "PgProcessStore"]

_log = get_logger("robot_mcp_memory.postgres")

WRITE_RETRIES = 5
"""How often a write that met a deadlock or a serialization failure is run again."""

_P_COLUMNS = ", ".join("p." + c for c in COLUMNS.split(", "))
_INSERT = (
    f"INSERT INTO processes ({COLUMNS}) "  # noqa: S608 - constant columns
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (id) DO NOTHING RETURNING rid"
)


class _Retry(Exception):
    """A write's transaction met a deadlock or serialization failure (rolled back)."""


def _has_nul(doc: ProcessDoc) -> str | None:
    for name in ("id", "title", "task_pattern", "robot", "source_mission_id", "body"):
        value = getattr(doc, name)
        if isinstance(value, str) and "\x00" in value:
            return name
    return "tags" if any("\x00" in t for t in doc.tags) else None


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
    """

    def __init__(
        self,
        db: PgDatabase,
        *,
        robot_id: str = "unknown",
        embedder: Embedder | None = None,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.db = db
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
        self, limit: int = 50, offset: int = 0, *, robots: Collection[str] | None = None
    ) -> list[ProcessDoc]:
        """Documents ordered by id (bytewise, as on SQLite); ``limit`` clamped to
        ``1..MAX_LIMIT``; ``robots`` filters as in :meth:`find`."""
        where, params = scope_sql(robots)
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
    ) -> Saved:
        """See :meth:`robot_mcp_memory.store.ProcessStore.save` (same rules, same errors).

        Raises:
            DocTooLarge: too many distinct words, or past ``max_robot_documents``.
            DocError: ``reason="conflict"`` when every id the rule tries is taken;
                ``reason="invalid_value"`` for a NUL character (PostgreSQL text cannot
                hold one).
        """
        bad = _has_nul(doc)
        if bad is not None:
            raise DocError(
                bad,
                "invalid_value",
                f"{bad} contains a NUL character (U+0000), which the database cannot store; "
                "remove it",
            )
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
                    "SELECT rid, id, robot, shared, source_mission_id FROM processes "
                    "WHERE id = %s FOR UPDATE",
                    (candidate,),
                ).fetchone()
                if row is None:
                    if max_robot_documents is not None:
                        _check_robot_documents(conn, robot, max_robot_documents)
                    inserted = conn.execute(
                        _INSERT,
                        (
                            candidate,
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
                            doc.shared,
                        ),
                    ).fetchone()
                    if inserted is None:
                        continue  # another replica took it just now: judge its row
                    rid, created = int(inserted[0]), True
                    break
                owner = Owner(
                    id=str(row["id"]), robot=str(row["robot"]), shared=bool(row["shared"])
                )
                if (may_update is None or may_update(owner)) and same_mission(
                    row["source_mission_id"], doc.source_mission_id
                ):
                    # Content columns only: the counters are record_outcome's (n = n + 1).
                    conn.execute(
                        "UPDATE processes SET title = %s, task_pattern = %s, tags = %s, "
                        "robot = %s, updated = %s, "
                        "source_mission_id = COALESCE(%s, source_mission_id), body = %s, "
                        "shared = %s WHERE rid = %s",
                        (
                            doc.title,
                            doc.task_pattern,
                            tags,
                            row["robot"] if robot == "unknown" else robot,
                            now,
                            doc.source_mission_id,
                            doc.body,
                            doc.shared,
                            row["rid"],
                        ),
                    )
                    rid, created = int(row["rid"]), False
                    break
                n += 1
                candidate = next_candidate(doc.id, n)
            index_document(conn, rid)
            self._vectors.write(conn, rid, vectors)
            stored = cur.execute(
                f"SELECT {COLUMNS} FROM processes WHERE rid = %s",  # noqa: S608
                (rid,),
            ).fetchone()
            assert stored is not None
            return Saved(
                doc=row_to_doc(stored),
                created=created,
                renamed_from=doc.id if candidate != doc.id else None,
            )

        saved: Saved = self._retrying(write)
        return saved

    def delete(self, id: str) -> bool:
        """Remove the document with its index entry and vectors in one transaction; False if
        unknown. Never reads the document, so any row can be deleted."""
        if "\x00" in id:
            return False

        def write(conn: psycopg.Connection[Any]) -> bool:
            row = conn.execute(
                "SELECT rid FROM processes WHERE id = %s FOR UPDATE", (id,)
            ).fetchone()
            if row is None:
                return False
            unindex_document(conn, int(row[0]))
            conn.execute("DELETE FROM processes WHERE rid = %s", (row[0],))
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
                f"last_used = %s WHERE id = %s RETURNING rid, {COLUMNS}",
                (stamp, id),
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
