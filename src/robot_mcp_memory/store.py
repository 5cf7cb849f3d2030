"""ProcessStore: process documents as rows of ``index.db`` (memory spec §4, decision 0002).

The row is the source of truth: a document's markdown is rendered from its row on the way
out and nothing is ever written to a markdown file. Each document's row and its search
index entry are written in ONE cold transaction (:meth:`SqliteStore.transaction`), so they
cannot disagree and a kill -9 leaves either the old or the new document.

Which path a write takes follows its kind (DESIGN §4):

- cold, on the caller's thread, never dropped: :meth:`ProcessStore.save`,
  :meth:`~ProcessStore.delete`, :meth:`~ProcessStore.reindex`, and the note that
  :meth:`~ProcessStore.record_outcome` appends to the body;
- hot, on the kit's writer thread (``SqliteStore.enqueue``): the outcome counters and
  ``last_used``, as *relative* updates (``n = n + 1``). A save never writes the counters of
  an existing row, so the two paths never overwrite each other.

With an embedder (decision 0011), each write also stores the document's two vectors in
``processes_vectors`` in the same transaction, and keeps the in-memory
:class:`~robot_mcp_memory.vectors.VectorIndex` in step after it commits; without one, a
write drops the document's vectors, so they are recomputed when an embedder next opens
the file (:meth:`ProcessStore.sync_vectors`).

Search (:meth:`ProcessStore.find`) is :mod:`robot_mcp_memory.search`'s: robot-aware words,
typo repair, bm25 ranked in SQL (lexical) or fused with the cosine (hybrid), x
reliability. A query is never refused for its length: past 2 KiB it is searched by its
first 2 KiB (:func:`truncate_query` says whether it was cut, DESIGN §5).

Reads are tolerant of a damaged row (issue 9): a counter or timestamp the document model
would refuse (a REAL counter left by an overflow, a hand-edited date) is repaired on the
way out and logged as ``process_row_repaired``; a row that cannot be read at all is left
out of searches and lists (logged as ``process_row_damaged``) and raises
:class:`DamagedRow` from :meth:`ProcessStore.get`. Nothing here ever fails a whole search
because of one row, and :meth:`ProcessStore.delete` never reads the document, so any row
can be deleted.

All methods are thread-safe (the kit store is). Added in 0.1 (issue 6).
"""

from __future__ import annotations

import logging
import re
import sqlite3
import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from robot_mcp_kit.models import format_ts, utc_now
from robot_mcp_kit.store import SqliteStore
from robot_mcp_memory.docmodel import DocError, ProcessDoc
from robot_mcp_memory.limits import MAX_COUNT, MAX_DOC_BYTES, MAX_ID_LENGTH, MAX_K, MAX_LIMIT, clamp
from robot_mcp_memory.rows import COLUMNS as _COLUMNS
from robot_mcp_memory.rows import DamagedRow, readable, row_to_doc, scope_sql, tags_json
from robot_mcp_memory.search import (
    BM25_WEIGHTS,
    MAX_TERMS,
    STOPWORDS,
    Found,
    ProcessSearch,
    match_expression,
    search_terms,
    truncate_query,
)
from robot_mcp_memory.vectors import VectorIndex, Vectors, from_blob, to_blob

if TYPE_CHECKING:
    from robot_mcp_memory.embedding import Embedder

_Pairs = list[tuple[Vectors, Vectors]]  # each document's (head, whole-document) vectors

__all__ = [
    "BM25_WEIGHTS",
    "MAX_K",
    "MAX_NOTE_CHARS",
    "MAX_TERMS",
    "STOPWORDS",
    "DamagedRow",
    "Found",
    "Owner",
    "ProcessStore",
    "Saved",
    "append_outcome",
    "search_terms",
    "truncate_query",
]

logger = logging.getLogger("robot_mcp_memory.store")

MAX_NOTE_CHARS = 500
"""An outcome note is cut to this many characters (one line in the Outcome log)."""

_MAX_SUFFIX = 1000  # id-2 … id-1000: beyond that, something is generating ids in a loop
_EMBED_BATCH = 256  # documents embedded per transaction by sync_vectors / reindex

_match_expression = match_expression  # benchmarks/bench_memory.py reads it from here

_OUTCOME_HEADING = re.compile(r"^##[ \t]+outcome log[ \t]*$", re.MULTILINE | re.IGNORECASE)
_SECTION_END = re.compile(r"^#{1,2}[ \t]", re.MULTILINE)


@dataclass(frozen=True)
class Owner:
    """Who a stored document belongs to: what visibility checks need, without the body."""

    id: str
    robot: str
    shared: bool


@dataclass(frozen=True)
class Saved:
    """The outcome of :meth:`ProcessStore.save`.

    ``doc`` is the document as stored (its final id, counters, timestamps); ``created`` is
    False when an existing document was updated; ``renamed_from`` is the id the caller
    asked for when the document was stored under a suffixed one (``-2``, ``-3``…).
    """

    doc: ProcessDoc
    created: bool
    renamed_from: str | None


def document_texts(title: str, task_pattern: str, tags: Sequence[str], body: str) -> list[str]:
    """The two texts a document is embedded by: its head (title, task pattern, tags) and
    the whole document. Pure."""
    head = "\n".join(part for part in (title, task_pattern, " ".join(tags)) if part)
    return [head, head + "\n" + body]


def _suffixed(base: str, n: int) -> str:
    suffix = f"-{n}"
    return base[: MAX_ID_LENGTH - len(suffix)].rstrip("-") + suffix


def _same_mission(stored: str | None, incoming: str | None) -> bool:
    return stored is None or incoming is None or stored == incoming


def _outcome_line(when: str, success: bool, note: str) -> str:
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
            (Added in issue 11.)
    """

    def __init__(
        self,
        store: SqliteStore,
        *,
        robot_id: str = "unknown",
        clock: Callable[[], datetime] = utc_now,
        embedder: Embedder | None = None,
    ) -> None:
        self.store = store
        self.robot_id = robot_id
        self._clock = clock
        self._has_vectors = any(t.name == "processes_vectors" for t in store.schema.tables)
        self.embedder = embedder if self._has_vectors else None
        self._vectors = VectorIndex(self.embedder.dim) if self.embedder is not None else None
        self._vectors_lock = threading.Lock()
        self._search = ProcessSearch(store, embedder=self.embedder, vectors=self._vectors)
        if self.embedder is not None:
            self.sync_vectors()

    @property
    def search_mode(self) -> str:
        """``"hybrid"`` (bm25 fused with cosine) or ``"lexical"`` (bm25 alone)."""
        return self._search.mode

    # --- reads ---------------------------------------------------------------------

    def get(self, id: str) -> ProcessDoc | None:
        """The document with this id, or None. Sees committed rows (hot counter updates
        still in the queue are not yet visible; ``store.flush()`` first if that matters)."""
        row = self.store.query_one(
            f"SELECT {_COLUMNS} FROM processes WHERE id = ?",  # noqa: S608 - constant columns
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

    def get_markdown(self, id: str) -> str | None:
        """The document rendered as markdown, or None."""
        doc = self.get(id)
        return None if doc is None else doc.render()

    def find(self, query: str, k: int = 3, *, robots: Collection[str] | None = None) -> list[Found]:
        """The ``k`` best documents for a natural-language ``query``, best first.

        Words, typo repair and the lexical or hybrid ranking are :mod:`.search`'s. Never
        raises for the text of a query (operators, quotes, emoji, control characters are
        all inert, any length is searched by its first 2 KiB), and a damaged row is left
        out rather than failing the search.

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
        self, limit: int = 50, offset: int = 0, *, robots: Collection[str] | None = None
    ) -> list[ProcessDoc]:
        """Documents ordered by id; ``limit`` clamped to ``1..MAX_LIMIT``.

        ``robots`` filters as in :meth:`find`. A damaged row is left out (logged).
        """
        where, scope_params = scope_sql(robots, "")
        rows = self.store.query(
            f"SELECT {_COLUMNS} FROM processes "  # noqa: S608 - constant columns
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

    # --- cold writes ---------------------------------------------------------------

    def save(self, doc: ProcessDoc, *, guard: Callable[[sqlite3.Row], None] | None = None) -> Saved:
        """Insert or update a document; row and index in one transaction (cold).

        Collision rules (memory spec §5): if a document with this id exists and comes from
        the same teaching mission — equal ``source_mission_id``, or either one missing — it
        is updated in place: content replaced, ``updated`` bumped, ``created``, the
        counters and ``last_used`` kept. If it comes from a different mission, the document
        goes to ``id-2``, then ``id-3``… (updating the first of those that is from its
        mission). A new document keeps the counters and timestamps it carries (a copy
        between deployments stays a copy); ``created`` defaults to now.

        ``robot: unknown`` becomes this store's ``robot_id`` (on an update: the stored
        robot, unless this store has a robot id).

        ``guard``, when given, is called inside the save's transaction with the row it is
        about to update (columns ``id``, ``robot``, ``shared``, ``source_mission_id``) — the
        row the collision rule finally chose, not the id that was asked for — and may raise
        to refuse the save; nothing is written then.

        The size limit is the document model's (on the markdown the client sent, and on
        the body), never on a re-rendered form the client did not write.

        Raises:
            DocError: ``reason="conflict"`` when ``id-2`` … ``id-1000`` are all taken.
        """
        now = format_ts(self._clock())
        robot = doc.robot if doc.robot != "unknown" else self.robot_id
        base = doc.id
        # Embedded before the transaction (the text does not depend on the final id), so
        # the write lock is not held while the model runs.
        vectors = self._embed([document_texts(doc.title, doc.task_pattern, doc.tags, doc.body)])
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
                        guard(row)
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
            self._write_vectors(conn, rowid, vectors)
            stored = conn.execute(
                f"SELECT {_COLUMNS} FROM processes WHERE id = ?",  # noqa: S608
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
            f"INSERT INTO processes ({_COLUMNS}) "  # noqa: S608 - constant columns
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
            self._write_vectors(conn, row["rowid"], None)
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
            if self.embedder is not None:
                conn.execute("DELETE FROM processes_vectors")
        self._search.typos.invalidate()
        if self.embedder is not None:
            self.sync_vectors()
        logger.info("processes_reindexed indexed=%d", n, extra={"indexed": n})
        return n

    # --- vectors (issue 11) ----------------------------------------------------------

    def _embed(self, texts: Sequence[Sequence[str]]) -> _Pairs | None:
        """Each document's (head, whole) vectors, or None without an embedder."""
        if self.embedder is None:
            return None
        flat = self.embedder.embed([text for pair in texts for text in pair])
        return [(flat[2 * i], flat[2 * i + 1]) for i in range(len(texts))]

    def _write_vectors(
        self,
        conn: sqlite3.Connection,
        rowid: int,
        vectors: _Pairs | None,
    ) -> None:
        """Inside the write's transaction: the document's vectors, or none (dropped)."""
        if not self._has_vectors:
            return
        if vectors is None or self.embedder is None:
            conn.execute("DELETE FROM processes_vectors WHERE doc_rowid = ?", (rowid,))
            return
        head, whole = vectors[0]
        conn.execute(
            "INSERT OR REPLACE INTO processes_vectors (doc_rowid, model, dim, head, doc) "
            "VALUES (?, ?, ?, ?, ?)",
            (rowid, self.embedder.name, self.embedder.dim, to_blob(head), to_blob(whole)),
        )

    def _written(
        self,
        rowid: int,
        vectors: _Pairs | None,
        robot: str,
        shared: bool,
    ) -> None:
        """After a committed write: the in-memory copies follow the table."""
        self._search.typos.invalidate()
        if self._vectors is None:
            return
        if vectors is None:
            self._vectors.remove(rowid)
        else:
            self._vectors.put(rowid, vectors[0][0], vectors[0][1], robot, shared)

    def sync_vectors(self) -> int:
        """Bring ``processes_vectors`` up to date with the rows and load it; return how many
        documents were embedded.

        Vectors of another model or dimension, and of deleted rows, are dropped; a row with
        no vector of this embedder is embedded, :data:`_EMBED_BATCH` rows per transaction
        (each batch read and written inside its transaction, so a concurrent save is never
        overwritten with a stale vector). Run at construction with an embedder and by
        :meth:`reindex`; a no-op without an embedder.
        """
        embedder, index = self.embedder, self._vectors
        if embedder is None or index is None:
            return 0
        model = (embedder.name, embedder.dim)
        embedded = 0
        with self._vectors_lock:
            with self.store.transaction() as conn:
                conn.execute(
                    "DELETE FROM processes_vectors WHERE model != ? OR dim != ? "
                    "OR doc_rowid NOT IN (SELECT rowid FROM processes)",
                    model,
                )
            while True:
                with self.store.transaction() as conn:
                    rows = conn.execute(
                        f"SELECT p.rowid AS rid, {_COLUMNS} FROM processes AS p "  # noqa: S608
                        "WHERE p.rowid NOT IN (SELECT doc_rowid FROM processes_vectors) "
                        "ORDER BY p.rowid LIMIT ?",
                        (_EMBED_BATCH,),
                    ).fetchall()
                    if not rows:
                        break
                    docs = [(r, readable(r)) for r in rows]
                    texts = [
                        document_texts(d.title, d.task_pattern, d.tags, d.body)
                        if d is not None
                        else [str(r["title"] or ""), str(r["body"] or "")]
                        for r, d in docs
                    ]
                    vectors: _Pairs = self._embed(texts) or []
                    for (row, _), pair in zip(docs, vectors, strict=True):
                        self._write_vectors(conn, row["rid"], [pair])
                    embedded += len(rows)
            index.clear()
            for row in self.store.query(
                "SELECT v.doc_rowid, v.head, v.doc, p.robot, p.shared FROM processes_vectors "
                "AS v JOIN processes AS p ON p.rowid = v.doc_rowid"
            ):
                head, whole = from_blob(row[1], embedder.dim), from_blob(row[2], embedder.dim)
                if head is not None and whole is not None:
                    index.put(int(row[0]), head, whole, str(row[3]), bool(row[4]))
        if embedded:
            logger.info(
                "process_vectors_synced embedded=%d model=%s",
                embedded,
                embedder.name,
                extra={"embedded": embedded, "model": embedder.name},
            )
        return embedded

    # --- outcomes ------------------------------------------------------------------

    def record_outcome(self, id: str, success: bool, note: str = "") -> ProcessDoc | None:
        """Count one use of a process; None if the id is unknown.

        The counter and ``last_used`` go through the hot path (``store.enqueue``: the
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
            f"SELECT {_COLUMNS} FROM processes WHERE id = ?",  # noqa: S608
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
            "last_used = ? WHERE id = ?",
            (stamp, id),
        )
        if not queued:
            logger.warning(
                "process_outcome_dropped id=%s success=%s", id, success, extra={"id": id}
            )
        doc = row_to_doc(row)
        if note.strip():
            body = self._append_note(id, _outcome_line(stamp, success, note))
            if body is not None:
                doc.body = body
        if queued:
            doc.last_used = when
            if success:
                doc.success_count = min(doc.success_count + 1, MAX_COUNT)
            else:
                doc.failure_count = min(doc.failure_count + 1, MAX_COUNT)
        return doc

    def _append_note(self, id: str, line: str) -> str | None:
        with self.store.transaction() as conn:
            row = conn.execute(
                f"SELECT rowid, {_COLUMNS} FROM processes WHERE id = ?",  # noqa: S608
                (id,),
            ).fetchone()
            if row is None:
                return None
            body = append_outcome(row["body"], line)
            doc = row_to_doc(row)
            doc.body = body
            if len(doc.render().encode("utf-8", "surrogatepass")) > MAX_DOC_BYTES:
                logger.warning(
                    "process_outcome_note_skipped id=%s reason=too_large", id, extra={"id": id}
                )
                return None
            conn.execute("UPDATE processes SET body = ? WHERE id = ?", (body, id))
            _index(conn, row["rowid"], id, row["title"], row["task_pattern"], row["tags"], body)
            # The whole-document vector follows the body (embedded under the write lock:
            # the body is only known here; one document is well under a millisecond).
            vectors = self._embed([document_texts(doc.title, doc.task_pattern, doc.tags, body)])
            self._write_vectors(conn, row["rowid"], vectors)
        self._written(int(row["rowid"]), vectors, doc.robot, doc.shared)
        return body

    # --- lifecycle -----------------------------------------------------------------

    def close(self) -> None:
        """Write queued counters and close the underlying store. Idempotent."""
        self.store.close()

    def __repr__(self) -> str:
        return f"<ProcessStore {str(self.store.path)!r} robot_id={self.robot_id!r}>"


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
