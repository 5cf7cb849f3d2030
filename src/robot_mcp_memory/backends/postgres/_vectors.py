"""The documents' vectors on PostgreSQL: pgvector columns written with the row, scored in
the server.

With a model and the ``vector`` extension, each write stores the document's two vectors
(head and whole document, computed in the memory server) in ``processes_vectors`` in the
write's own transaction; :meth:`PgVectors.score` computes every visible document's better
cosine in one exact scan (the vectors are unit length, so the cosine is the negated
``<#>`` inner product) and returns the best ones with the least and greatest cosine over
all of them, what the fusion's min-max normalisation needs — an approximate (HNSW) index
gives neither the least cosine nor an exact pool. Nothing is held in memory, so every
replica reads what any replica wrote.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg

from robot_mcp_memory.backends._processes import stored_vectors, visible
from robot_mcp_memory.backends._sql import POSTGRES, Row, Session
from robot_mcp_memory.backends.postgres._database import PgDatabase
from robot_mcp_memory.backends.postgres._sessions import PgSessions
from robot_mcp_memory.processes import COLUMNS, Embedder, Pairs, Semantic

__all__ = ["EMBED_BATCH", "PgVectors", "vector_text"]

EMBED_BATCH = 256
"""Documents embedded per transaction by :meth:`PgVectors.sync`."""

Vectors = npt.NDArray[np.float32]


def vector_text(vector: Vectors) -> str:
    """A vector in pgvector's text form."""
    return "[" + ",".join(f"{x:.9g}" for x in vector.tolist()) + "]"


class PgVectors:
    """The vectors of one database (nothing without a model or without pgvector).

    Args:
        db: the database; ``model`` is set by the repository once a model is in use.
    """

    def __init__(self, db: PgDatabase) -> None:
        self.has_table = "vector" in db.extensions
        self.model: Embedder | None = None

    def write(self, conn: psycopg.Connection[Any], rid: int, vectors: Pairs | None) -> None:
        """Inside the write's transaction: the document's vectors, or none (a stale pair
        is dropped, and recomputed when a model is next used)."""
        if not self.has_table:
            return
        stored = stored_vectors(vectors, self.model)
        if stored is None:
            conn.execute("DELETE FROM processes_vectors WHERE rid = %s", (rid,))
            return
        model, head, whole = stored
        conn.execute(
            "INSERT INTO processes_vectors (rid, model, dim, head, doc) "
            "VALUES (%s, %s, %s, %s::halfvec, %s::halfvec) ON CONFLICT (rid) DO UPDATE SET "
            "model = EXCLUDED.model, dim = EXCLUDED.dim, head = EXCLUDED.head, doc = EXCLUDED.doc",
            (rid, model.name, model.dim, vector_text(head), vector_text(whole)),
        )

    def score(self, s: Session, query: Semantic) -> tuple[dict[int, float], float, float]:
        """The query's ``top`` best visible documents by cosine, and each of its ``also``
        (the lexical pool), with the least and greatest cosine over every visible
        document."""
        where, params = visible(POSTGRES, query.robots)
        # The query vector is parsed once (an InitPlan), not once per row; the rows are
        # joined only when a filter needs them.
        join = "JOIN processes AS p ON p.rid = v.rid" if where else ""
        rows = s.all(
            "WITH c AS MATERIALIZED (SELECT v.rid, "  # noqa: S608
            "greatest(-(v.head <#> q.v), -(v.doc <#> q.v)) AS cos "
            f"FROM (SELECT ?::halfvec AS v OFFSET 0) AS q, processes_vectors AS v {join} "
            f"WHERE v.model = ? AND v.dim = ? {'AND ' + where if where else ''}) "
            "SELECT rid, cos, (SELECT min(cos) FROM c) AS low, (SELECT max(cos) FROM c) AS high "
            "FROM c WHERE rid = ANY(?) OR rid IN "
            "(SELECT rid FROM c ORDER BY cos DESC, rid LIMIT ?)",
            [
                vector_text(query.vector),
                query.model.name,
                query.model.dim,
                *params,
                list(query.also),
                query.top,
            ],
        )
        if not rows:
            return {}, 0.0, 0.0
        cosine = {int(r["rid"]): float(r["cos"]) for r in rows}
        return cosine, float(rows[0]["low"]), float(rows[0]["high"])

    def sync(
        self, sessions: PgSessions, model: Embedder, embed: Callable[[list[Row]], Pairs]
    ) -> int:
        """Drop vectors of another model or dimension and store ``embed(rows)`` for every
        row without one, :data:`EMBED_BATCH` rows per transaction; how many were embedded.
        Several replicas may run it at once (a row another one embeds first is left
        alone)."""
        if not self.has_table:
            return 0
        with sessions.write() as s:
            s.run(
                "DELETE FROM processes_vectors WHERE model <> ? OR dim <> ?",
                [model.name, model.dim],
            )
        embedded = 0
        while True:
            with sessions.write() as s:
                rows = s.all(
                    f"SELECT p.rid AS key, {COLUMNS} FROM processes AS p "  # noqa: S608
                    "WHERE NOT EXISTS (SELECT 1 FROM processes_vectors AS v "
                    "WHERE v.rid = p.rid) ORDER BY p.rid LIMIT ? FOR UPDATE OF p SKIP LOCKED",
                    [EMBED_BATCH],
                )
                if not rows:
                    break
                for row, pair in zip(rows, embed(rows), strict=True):
                    self.write(s.conn, int(row["key"]), [pair])
                embedded += len(rows)
        return embedded
