"""``processes_vectors`` kept in step with the rows, and its in-memory copy (decision 0011).

With an embedder, each write stores the document's two vectors (its head — title, task
pattern, tags — and the whole document) in ``processes_vectors`` in the write's own
transaction, and keeps the in-memory :class:`~robot_mcp_memory.search.VectorIndex` in
step after it commits; without one, a write drops the document's vectors, so they are
recomputed when an embedder next opens the file (:meth:`VectorTable.sync`).

Used by :class:`~robot_mcp_memory.store.ProcessStore` and its writer; thread-safe.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from robot_mcp_kit.log import get_logger
from robot_mcp_kit.store import SqliteStore
from robot_mcp_memory.documents.rows import (
    COLUMNS,
    readable,
)
from robot_mcp_memory.processes import Pairs, document_texts
from robot_mcp_memory.search._vectors import (
    VectorIndex,
    from_blob,
    to_blob,
)

if TYPE_CHECKING:
    from robot_mcp_memory.processes import Embedder

__all__ = ["EMBED_BATCH", "VectorTable"]

_log = get_logger("robot_mcp_memory.store")

EMBED_BATCH = 256
"""Documents embedded per transaction by :meth:`VectorTable.sync`."""


class VectorTable:
    """The vectors of one ``index.db``: the table and the in-memory index.

    Args:
        store: the kit store of ``index.db``.
        embedder: None for lexical search; a schema without ``processes_vectors`` (an older
            version under test) also means None.
    """

    def __init__(self, store: SqliteStore, embedder: Embedder | None) -> None:
        self.store = store
        self.has_table = any(t.name == "processes_vectors" for t in store.schema.tables)
        self.embedder = embedder if self.has_table else None
        self.index = VectorIndex(self.embedder.dim) if self.embedder is not None else None
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[Sequence[str]]) -> Pairs | None:
        """Each document's (head, whole) vectors, or None without an embedder."""
        if self.embedder is None:
            return None
        flat = self.embedder.embed([text for pair in texts for text in pair])
        return [(flat[2 * i], flat[2 * i + 1]) for i in range(len(texts))]

    def write(self, conn: sqlite3.Connection, rowid: int, vectors: Pairs | None) -> None:
        """Inside the write's transaction: the document's vectors, or none (dropped)."""
        if not self.has_table:
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

    def committed(self, rowid: int, vectors: Pairs | None, robot: str, shared: bool) -> None:
        """After a committed write: the in-memory index follows the table."""
        if self.index is None:
            return
        if vectors is None:
            self.index.remove(rowid)
        else:
            self.index.put(rowid, vectors[0][0], vectors[0][1], robot, shared)

    def clear_table(self, conn: sqlite3.Connection) -> None:
        """Inside a reindex's transaction: drop every vector (``sync`` recomputes them)."""
        if self.embedder is not None:
            conn.execute("DELETE FROM processes_vectors")

    def sync(self) -> int:
        """Bring ``processes_vectors`` up to date with the rows and load it; return how many
        documents were embedded.

        Vectors of another model or dimension, and of deleted rows, are dropped; a row with
        no vector of this embedder is embedded, :data:`EMBED_BATCH` rows per transaction
        (each batch read and written inside its transaction, so a concurrent save is never
        overwritten with a stale vector). A no-op without an embedder.
        """
        embedder, index = self.embedder, self.index
        if embedder is None or index is None:
            return 0
        model = (embedder.name, embedder.dim)
        embedded = 0
        with self._lock:
            with self.store.transaction() as conn:
                conn.execute(
                    "DELETE FROM processes_vectors WHERE model != ? OR dim != ? "
                    "OR doc_rowid NOT IN (SELECT rowid FROM processes)",
                    model,
                )
            while True:
                with self.store.transaction() as conn:
                    rows = conn.execute(
                        f"SELECT p.rowid AS rid, {COLUMNS} FROM processes AS p "  # noqa: S608
                        "WHERE p.rowid NOT IN (SELECT doc_rowid FROM processes_vectors) "
                        "ORDER BY p.rowid LIMIT ?",
                        (EMBED_BATCH,),
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
                    vectors: Pairs = self.embed(texts) or []
                    for (row, _), pair in zip(docs, vectors, strict=True):
                        self.write(conn, row["rid"], [pair])
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
            _log.info("process_vectors_synced", embedded=embedded, model=embedder.name)
        return embedded
