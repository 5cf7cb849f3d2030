"""Finding process documents on PostgreSQL: the SQLite ranking over PostgreSQL full text.

The words a query is searched by are :mod:`robot_mcp_memory.search`'s
(:func:`~robot_mcp_memory.search.search_terms`: robot-aware stop words, joined pairs, the
first 2 KiB), stemmed by the server in the index's own configuration, and never put into
SQL or a ``tsquery`` as text: they travel as array parameters. Typo repair is
:class:`~robot_mcp_memory.search.TypoRepair` over the caller's vocabulary
(``processes_owner_terms``). Relevance is bm25 with every statistic counted over the
documents the call may read (:class:`~robot_mcp_memory.postgres._process_index.PgTerms`),
as on SQLite (decision 0022); lexical ranking is ``relevance x reliability`` in SQL, hybrid
ranking fuses it with the pgvector cosine by the same code as SQLite's
(:func:`~robot_mcp_memory.search.fuse`, :func:`~robot_mcp_memory.search.rank`). One
search reads on one connection, in one snapshot.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.rows import dict_row

from robot_mcp_memory.documents.rows import COLUMNS, readable
from robot_mcp_memory.limits import MAX_K, clamp
from robot_mcp_memory.postgres._process_index import PgTerms
from robot_mcp_memory.processes import (
    LEXICAL_POOL,
    RELIABILITY_SQL,
    REPAIR_WEIGHT,
    SEMANTIC_POOL,
    Found,
    Phrase,
    TypoRepair,
    content_words,
    fuse,
    rank,
    search_terms,
    truncate_query,
    visible_owners,
)

if TYPE_CHECKING:
    from robot_mcp_memory.postgres._database import PgDatabase
    from robot_mcp_memory.postgres._process_vectors import PgVectors

__all__ = ["PgProcessSearch", "scope_sql"]

_P_COLUMNS = ", ".join("p." + c for c in COLUMNS.split(", "))


def scope_sql(robots: Collection[str] | None) -> tuple[str, list[Any]]:
    """The visibility filter over ``processes AS p`` (:func:`robot_mcp_memory.documents.rows.
    scope_sql`'s rule): "" for everything, else the robots' documents and the shared ones."""
    if robots is None:
        return "", []
    names = sorted(set(robots))
    if not names:
        return "p.shared", []
    return "(p.shared OR p.robot = ANY(%s))", [names]


class PgProcessSearch:
    """The search side of a :class:`~robot_mcp_memory.postgres.processes.PgProcessStore`.

    Args:
        db: the database.
        vectors: the vector table; with an embedder, :meth:`find` is hybrid.
    """

    def __init__(self, db: PgDatabase, vectors: PgVectors) -> None:
        self.db = db
        self.vectors = vectors

    @property
    def mode(self) -> str:
        """``"hybrid"`` with an embedder (and pgvector), else ``"lexical"``."""
        return "lexical" if self.vectors.embedder is None else "hybrid"

    def find(self, query: str, k: int = 3, *, robots: Collection[str] | None = None) -> list[Found]:
        """See :meth:`robot_mcp_memory.store.ProcessStore.find`."""
        text = truncate_query(query)[0]
        terms = search_terms(text)
        if not terms:
            return []
        k = clamp(k, 1, MAX_K)
        owners = None if robots is None else visible_owners(robots)
        query_vector = None
        if self.vectors.embedder is not None:  # before the connection is taken
            query_vector = self.vectors.embedder.embed([text])[0]
        with self.db.connection() as conn:
            index = PgTerms(conn)
            repaired = TypoRepair(index, index).repair(
                list(dict.fromkeys(content_words(text))), owners
            )
            phrases = [Phrase(t) for stems in index.stems(terms) for t in stems]
            phrases += [Phrase(r.term, REPAIR_WEIGHT) for r in repaired]
            matches = index.matches_sql(phrases, owners) if phrases else None
            if query_vector is None:
                return [] if matches is None else self._lexical(conn, matches, k, robots)
            if matches is None and owners is not None:
                return []  # as on SQLite: a narrowed call needs a lexical match
            return self._hybrid(conn, query_vector, matches, k, robots)

    def _lexical(
        self,
        conn: psycopg.Connection[Any],
        matches: tuple[str, list[Any]],
        k: int,
        robots: Collection[str] | None,
    ) -> list[Found]:
        where, scope_params = scope_sql(robots)
        matches_sql, match_params = matches
        rows = (
            conn.cursor(row_factory=dict_row)
            .execute(
                f"SELECT {_P_COLUMNS}, top.relevance, top.reliability, top.score "  # noqa: S608
                "FROM (SELECT m.rid, m.relevance, "
                f"{RELIABILITY_SQL} AS reliability, m.relevance * {RELIABILITY_SQL} AS score "
                f"FROM ({matches_sql}) AS m JOIN processes AS p ON p.rid = m.rid "
                f"{'WHERE ' + where if where else ''} "
                "ORDER BY score DESC, m.rid LIMIT %s) AS top "
                "JOIN processes AS p ON p.rid = top.rid ORDER BY top.score DESC, top.rid",
                (*match_params, *scope_params, k),
            )
            .fetchall()
        )
        found = []
        for row in rows:
            doc = readable(row)
            if doc is not None:
                found.append(
                    Found(
                        doc=doc,
                        score=float(row["score"]),
                        bm25=float(row["relevance"]),
                        reliability=float(row["reliability"]),
                    )
                )
        return found

    def _hybrid(
        self,
        conn: psycopg.Connection[Any],
        query_vector: Any,
        matches: tuple[str, list[Any]] | None,
        k: int,
        robots: Collection[str] | None,
    ) -> list[Found]:
        where, scope_params = scope_sql(robots)
        lexical: list[Any] = []
        if matches is not None:
            matches_sql, match_params = matches
            lexical = conn.execute(
                f"SELECT m.rid, m.relevance, {RELIABILITY_SQL} AS reliability "  # noqa: S608
                f"FROM ({matches_sql}) AS m JOIN processes AS p ON p.rid = m.rid "
                f"{'WHERE ' + where if where else ''} ORDER BY m.relevance DESC, m.rid LIMIT %s",
                (*match_params, *scope_params, LEXICAL_POOL),
            ).fetchall()
        relevance = {int(r[0]): float(r[1]) for r in lexical}
        reliability = {int(r[0]): float(r[2]) for r in lexical}
        cosine, low, high = self.vectors.score(
            conn, query_vector, (where, scope_params), SEMANTIC_POOL, list(relevance)
        )
        fused = fuse(relevance, cosine, low, high)
        if not fused:
            return []
        unread = sorted(fused.keys() - reliability.keys())
        if unread:
            for r in conn.execute(
                f"SELECT p.rid, {RELIABILITY_SQL} FROM processes AS p "  # noqa: S608
                f"WHERE p.rid = ANY(%s) {'AND ' + where if where else ''}",
                (unread, *scope_params),
            ):
                reliability[int(r[0])] = float(r[1])
        ranked = rank(fused, reliability, k)
        if not ranked:
            return []
        rows = (
            conn.cursor(row_factory=dict_row)
            .execute(
                f"SELECT p.rid, {_P_COLUMNS} FROM processes AS p "  # noqa: S608
                f"WHERE p.rid = ANY(%s) {'AND ' + where if where else ''}",
                (ranked, *scope_params),
            )
            .fetchall()
        )
        by_rid = {int(r["rid"]): r for r in rows}
        found = []
        for rid in ranked:
            row = by_rid.get(rid)
            doc = None if row is None else readable(row)
            if doc is None:
                continue
            found.append(
                Found(
                    doc=doc,
                    score=fused[rid] * reliability[rid],
                    bm25=relevance.get(rid, 0.0),
                    reliability=reliability[rid],
                    semantic=cosine.get(rid),
                )
            )
        return found
