"""The documents' vectors on PostgreSQL: pgvector columns written with the row, scored in
the server.

With an embedder and the ``vector`` extension, each write stores the document's two
vectors (head and whole document, :func:`~robot_mcp_memory.search.document_texts`,
computed in the memory server) in ``processes_vectors`` in the write's own transaction;
:meth:`PgVectors.score` computes every visible document's better cosine in one exact scan
(the vectors are unit length, so the cosine is the negated ``<#>`` inner product) and
returns the best ones with the least and greatest cosine over all of them, what the
fusion's min-max normalisation needs — an approximate (HNSW) index gives neither the
least cosine nor an exact pool. Nothing is held in memory, so every replica reads what
any replica wrote.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import psycopg

from robot_mcp_kit.log import get_logger
from robot_mcp_memory.documents.rows import COLUMNS, readable
from robot_mcp_memory.processes import Pairs, document_texts

if TYPE_CHECKING:
    from robot_mcp_memory.postgres._database import PgDatabase
    from robot_mcp_memory.processes import Embedder

__all__ = ["EMBED_BATCH", "PgVectors", "vector_text"]

_log = get_logger("robot_mcp_memory.postgres")

EMBED_BATCH = 256
"""Documents embedded per transaction by :meth:`PgVectors.sync`."""

Conn = psycopg.Connection[Any]
Vectors = npt.NDArray[np.float32]


def vector_text(vector: Vectors) -> str:
    """A vector in pgvector's text form. Pure."""
    return "[" + ",".join(f"{x:.9g}" for x in vector.tolist()) + "]"


class PgVectors:
    """The vectors of one database (a no-op without an embedder).

    Args:
        db: the database.
        embedder: None for lexical search; also None where the database has no
            ``vector`` extension (the caller warns).
    """

    def __init__(self, db: PgDatabase, embedder: Embedder | None) -> None:
        self.db = db
        self.has_table = "vector" in db.extensions
        self.embedder = embedder if self.has_table else None

    def embed(self, texts: Sequence[Sequence[str]]) -> Pairs | None:
        """Each document's (head, whole) vectors, or None without an embedder."""
        if self.embedder is None:
            return None
        flat = self.embedder.embed([text for pair in texts for text in pair])
        return [(flat[2 * i], flat[2 * i + 1]) for i in range(len(texts))]

    def write(self, conn: Conn, rid: int, vectors: Pairs | None) -> None:
        """Inside the write's transaction: the document's vectors, or none (a stale pair
        is dropped, and recomputed when an embedder next opens the database)."""
        if not self.has_table:
            return
        if vectors is None or self.embedder is None:
            conn.execute("DELETE FROM processes_vectors WHERE rid = %s", (rid,))
            return
        head, whole = vectors[0]
        conn.execute(
            "INSERT INTO processes_vectors (rid, model, dim, head, doc) "
            "VALUES (%s, %s, %s, %s::halfvec, %s::halfvec) ON CONFLICT (rid) DO UPDATE SET "
            "model = EXCLUDED.model, dim = EXCLUDED.dim, head = EXCLUDED.head, doc = EXCLUDED.doc",
            (rid, self.embedder.name, self.embedder.dim, vector_text(head), vector_text(whole)),
        )

    def score(
        self,
        conn: Conn,
        query: Vectors,
        scope: tuple[str, list[Any]],
        top: int,
        also: Sequence[int],
    ) -> tuple[dict[int, float], float, float]:
        """The ``top`` best visible documents by cosine, and each of ``also`` (the lexical
        pool), with the least and greatest cosine over every visible document."""
        assert self.embedder is not None
        where, params = scope
        # The query vector is parsed once (an InitPlan), not once per row; the rows are
        # joined only when a filter needs them.
        join = "JOIN processes AS p ON p.rid = v.rid" if where else ""
        rows = conn.execute(
            "WITH c AS MATERIALIZED (SELECT v.rid, "  # noqa: S608
            "greatest(-(v.head <#> q.v), -(v.doc <#> q.v)) AS cos "
            f"FROM (SELECT %s::halfvec AS v OFFSET 0) AS q, processes_vectors AS v {join} "
            f"WHERE v.model = %s AND v.dim = %s {'AND ' + where if where else ''}) "
            "SELECT rid, cos, (SELECT min(cos) FROM c), (SELECT max(cos) FROM c) FROM c "
            "WHERE rid = ANY(%s) OR rid IN (SELECT rid FROM c ORDER BY cos DESC, rid LIMIT %s)",
            (
                vector_text(query),
                self.embedder.name,
                self.embedder.dim,
                *params,
                list(also),
                top,
            ),
        ).fetchall()
        if not rows:
            return {}, 0.0, 0.0
        cosine = {int(r[0]): float(r[1]) for r in rows}
        return cosine, float(rows[0][2]), float(rows[0][3])

    def sync(self) -> int:
        """Drop vectors of another model or dimension and embed every row without one,
        :data:`EMBED_BATCH` rows per transaction; how many were embedded. Several
        replicas may run it at once (a row another one embedded first is left alone)."""
        embedder = self.embedder
        if embedder is None:
            return 0
        with self.db.connection() as conn:
            conn.execute(
                "DELETE FROM processes_vectors WHERE model <> %s OR dim <> %s",
                (embedder.name, embedder.dim),
            )
        embedded = 0
        while True:
            with self.db.connection() as conn:
                rows = (
                    conn.cursor(row_factory=psycopg.rows.dict_row)
                    .execute(
                        f"SELECT p.rid, {COLUMNS} FROM processes AS p "  # noqa: S608
                        "WHERE NOT EXISTS (SELECT 1 FROM processes_vectors AS v "
                        "WHERE v.rid = p.rid) "
                        "ORDER BY p.rid LIMIT %s FOR UPDATE OF p SKIP LOCKED",
                        (EMBED_BATCH,),
                    )
                    .fetchall()
                )
                if not rows:
                    break
                docs = [(r, readable(r)) for r in rows]
                texts = [
                    document_texts(d.title, d.task_pattern, d.tags, d.body)
                    if d is not None
                    else [str(r["title"] or ""), str(r["body"] or "")]
                    for r, d in docs
                ]
                for (row, _), pair in zip(docs, self.embed(texts) or [], strict=True):
                    self.write(conn, int(row["rid"]), [pair])
                embedded += len(rows)
        if embedded:
            _log.info("process_vectors_synced", embedded=embedded, model=embedder.name)
        return embedded
