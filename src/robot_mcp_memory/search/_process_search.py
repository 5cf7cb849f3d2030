"""Finding the right process on SQLite: the ranking of :mod:`robot_mcp_memory.processes.ranking`
over ``index.db`` (decisions 0011, 0022).

:class:`ProcessSearch` answers :meth:`ProcessStore.find
<robot_mcp_memory.store.ProcessStore.find>`. An unscoped call (``robots`` None) may read
everything, so FTS5 computes the relevance (``-bm25(processes_fts, weights)``); a narrowed
call gets the same formula over the per-owner statistics of :mod:`._term_index`. Lexical
ranking and the hybrid's lexical pool are one SQL statement each; the hybrid's semantic
pool is the in-memory :class:`~robot_mcp_memory.search.VectorIndex`, whose candidates are
read again through the same visibility filter as every read
(:func:`robot_mcp_memory.documents.rows.scope_sql`).

The time a search takes still grows with how often its words occur in the whole index
(FTS5 and the postings are read per term); decision 0022 weighs it.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from robot_mcp_kit import telemetry
from robot_mcp_kit.store import SqliteStore
from robot_mcp_memory.documents.rows import (
    COLUMNS,
    readable,
    scope_sql,
)
from robot_mcp_memory.limits import (
    MAX_K,
    clamp,
)
from robot_mcp_memory.processes import (
    BM25_WEIGHTS,
    LEXICAL_POOL,
    RELIABILITY_SQL,
    REPAIR_WEIGHT,
    SEMANTIC_POOL,
    Found,
    Phrase,
    Repair,
    Tokenizer,
    TypoRepair,
    content_words,
    fuse,
    match_expression,
    rank,
    search_terms,
    truncate_query,
    visible_owners,
)
from robot_mcp_memory.search._term_index import TermIndex

if TYPE_CHECKING:
    from robot_mcp_memory.processes import Embedder
    from robot_mcp_memory.search._vectors import VectorIndex

__all__ = ["ProcessSearch"]


def _fts_matches_sql(repaired: bool) -> str:
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


class ProcessSearch:
    """The search side of a :class:`~robot_mcp_memory.store.ProcessStore`.

    Args:
        store: the kit store of ``index.db``.
        embedder, vectors: both or neither; with them, :meth:`find` is hybrid.
        tokenizer: the index's tokenizer (a new one by default).
    """

    def __init__(
        self,
        store: SqliteStore,
        *,
        embedder: Embedder | None = None,
        vectors: VectorIndex | None = None,
        tokenizer: Tokenizer | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.vectors = vectors
        self.tokenizer = tokenizer if tokenizer is not None else Tokenizer()
        self.terms = TermIndex(store)
        self.typos = TypoRepair(self.terms, self.tokenizer)

    @property
    def mode(self) -> str:
        """``"hybrid"`` with an embedder, else ``"lexical"``."""
        return "lexical" if self.embedder is None or self.vectors is None else "hybrid"

    def find(self, query: str, k: int = 3, *, robots: Collection[str] | None = None) -> list[Found]:
        """See :meth:`robot_mcp_memory.store.ProcessStore.find`.

        While telemetry is on, one span ``memory.find`` (mode, k, counts; never the query)
        and ``robot_mcp.memory.find.duration`` by mode; a hybrid search's span has the
        children ``memory.search.lexical``, ``memory.search.vector`` and
        ``memory.search.fusion`` (a lexical search is the ``memory.find`` span alone).
        """
        if not telemetry.active():
            return self._find(query, k, robots)
        mode = self.mode
        started = time.perf_counter()
        with telemetry.span(
            "memory.find",
            {"robot_mcp.memory.search_mode": mode, "robot_mcp.memory.k": k},
        ) as current:
            found = self._find(query, k, robots)
            telemetry.set_attributes(current, **{"robot_mcp.memory.results": len(found)})
        telemetry.record(
            "robot_mcp.memory.find.duration",
            time.perf_counter() - started,
            {"robot_mcp.memory.search_mode": mode},
        )
        return found

    def _find(self, query: str, k: int, robots: Collection[str] | None) -> list[Found]:
        text = truncate_query(query)[0]
        terms = search_terms(text)
        if not terms:
            return []
        owners = None if robots is None else visible_owners(robots)
        repaired = self.typos.repair(list(dict.fromkeys(content_words(text))), owners)
        matches = self._matches(terms, repaired, owners)
        if matches is None:
            return []
        k = clamp(k, 1, MAX_K)
        if self.embedder is None or self.vectors is None:
            return self._lexical(matches, k, robots)
        return self._hybrid(text, matches, k, robots)

    def _matches(
        self, terms: list[str], repaired: list[Repair], owners: list[str] | None
    ) -> tuple[str, list[Any]] | None:
        """The subquery ``(rid, relevance)`` of every document matching a term, with its
        parameters: FTS5's bm25 for an unscoped call, the owners' bm25 for a narrowed one;
        None when nothing can match."""
        if owners is None:
            params: list[Any] = [match_expression(terms)]
            if repaired:
                params.append(match_expression([r.spelling for r in repaired]))
            return _fts_matches_sql(bool(repaired)), params
        phrases = [Phrase(t) for stems in self.tokenizer.stems(terms) for t in stems]
        phrases += [Phrase(r.term, REPAIR_WEIGHT) for r in repaired]
        if not phrases:
            return None
        sql_params = self.terms.matches_sql(phrases, owners)
        return None if sql_params is None else (sql_params[0], list(sql_params[1]))

    def _lexical(
        self, matches: tuple[str, list[Any]], k: int, robots: Collection[str] | None
    ) -> list[Found]:
        where, scope_params = scope_sql(robots, "p.")
        matches_sql, match_params = matches
        # Two steps: score every match joining the index to the rows by rowid (the index
        # row shares its document row's rowid), keep the top k by score, and only then
        # read those k rows in full. Reading the fts `id` column, or carrying bodies
        # through the sort, for every match would cost more than the search itself.
        sql = (
            f"SELECT {', '.join('p.' + c for c in COLUMNS.split(', '))}, "  # noqa: S608
            "  top.relevance, top.reliability, top.score "
            "FROM ("
            "  SELECT m.rid, m.relevance, "
            f"   {RELIABILITY_SQL} AS reliability, m.relevance * {RELIABILITY_SQL} AS score "
            f"  FROM ({matches_sql}) AS m JOIN processes AS p ON p.rowid = m.rid "
            f"  {'WHERE ' + where if where else ''} "
            "  ORDER BY score DESC, m.rid LIMIT ?"
            ") AS top JOIN processes AS p ON p.rowid = top.rid "
            "ORDER BY top.score DESC, top.rid"
        )
        rows = self.store.query(sql, (*match_params, *scope_params, k))
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
        text: str,
        matches: tuple[str, list[Any]],
        k: int,
        robots: Collection[str] | None,
    ) -> list[Found]:
        assert self.embedder is not None
        assert self.vectors is not None
        where, scope_params = scope_sql(robots, "p.")
        matches_sql, match_params = matches
        with telemetry.span("memory.search.lexical") as lexical_span:
            lexical = self.store.query(
                f"SELECT m.rid, m.relevance, {RELIABILITY_SQL} AS reliability "  # noqa: S608
                f"FROM ({matches_sql}) AS m "
                f"JOIN processes AS p ON p.rowid = m.rid {'WHERE ' + where if where else ''} "
                "ORDER BY m.relevance DESC, m.rid LIMIT ?",
                (*match_params, *scope_params, LEXICAL_POOL),
            )
            telemetry.set_attributes(lexical_span, **{"robot_mcp.memory.matches": len(lexical)})
        relevance = {int(r["rid"]): float(r["relevance"]) for r in lexical}
        reliability = {int(r["rid"]): float(r["reliability"]) for r in lexical}
        with telemetry.span("memory.search.vector") as vector_span:
            query_vector = self.embedder.embed([text])[0]
            rowids, cosines, low, high = self.vectors.score(query_vector, robots, SEMANTIC_POOL)
            cosine = dict(zip(rowids.tolist(), cosines.tolist(), strict=True))
            for rowid, value in self.vectors.cosines(
                [r for r in relevance if r not in cosine], query_vector
            ).items():
                cosine[rowid] = value
            telemetry.set_attributes(vector_span, **{"robot_mcp.memory.candidates": len(cosine)})
        with telemetry.span("memory.search.fusion") as fusion_span:
            found = self._fuse(relevance, reliability, cosine, low, high, k, where, scope_params)
            telemetry.set_attributes(fusion_span, **{"robot_mcp.memory.results": len(found)})
        return found

    def _fuse(
        self,
        relevance: dict[int, float],
        reliability: dict[int, float],
        cosine: dict[int, float],
        low: float,
        high: float,
        k: int,
        where: str,
        scope_params: Any,
    ) -> list[Found]:
        """Rank the lexical and semantic candidates by their fused score, read the top k."""
        fused = fuse(relevance, cosine, low, high)
        if not fused:
            return []
        pool = set(fused)
        # The semantic candidates' reliability is read from the rows through the same
        # visibility filter as every read (the vector index only preselected them).
        unread = sorted(pool - reliability.keys())
        if unread:
            marks = ", ".join("?" for _ in unread)
            for r in self.store.query(
                f"SELECT p.rowid AS rid, {RELIABILITY_SQL} AS reliability "  # noqa: S608
                f"FROM processes AS p WHERE p.rowid IN ({marks}) "
                f"{'AND ' + where if where else ''}",
                (*unread, *scope_params),
            ):
                reliability[int(r["rid"])] = float(r["reliability"])
        ranked = rank(fused, reliability, k)
        if not ranked:
            return []
        marks = ", ".join("?" for _ in ranked)
        rows = self.store.query(
            f"SELECT p.rowid AS rid, {', '.join('p.' + c for c in COLUMNS.split(', '))} "  # noqa: S608
            f"FROM processes AS p WHERE p.rowid IN ({marks}) {'AND ' + where if where else ''}",
            (*ranked, *scope_params),
        )
        by_rowid = {int(r["rid"]): r for r in rows}
        found = []
        for rowid in ranked:
            row = by_rowid.get(rowid)
            doc = None if row is None else readable(row)
            if doc is None:
                continue
            found.append(
                Found(
                    doc=doc,
                    score=fused[rowid] * reliability[rowid],
                    bm25=relevance.get(rowid, 0.0),
                    reliability=reliability[rowid],
                    semantic=cosine.get(rowid),
                )
            )
        return found
