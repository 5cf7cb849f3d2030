"""The lexical index of the process documents on PostgreSQL: writes and bm25 reads.

Each write (inside the caller's transaction, after the ``processes`` row is written)
recomputes the document's weighted ``tsvector`` from its row in the server
(:data:`~._tables.TSVECTOR_SQL`), replaces its postings
(each lexeme with its column-weighted frequency, read from the ``tsvector``'s positions
and weight labels) and moves the per-owner document frequencies by the difference: one
upsert whose rows are sorted by ``(term, owner)``, so two replicas saving documents that
share words lock the shared counters in the same order and never deadlock.

:class:`PgTerms` reads, on one connection, what ranking and typo repair need: the index's
stems of query words (:meth:`~PgTerms.stems`), document frequencies and sizes counted
over the owners a call may read, and :meth:`~PgTerms.matches_sql`, bm25 by
:mod:`robot_mcp_memory.processes._ranking`'s rules over those statistics. Unscoped (``owners``
None) it counts every document, as FTS5 does on SQLite.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import psycopg

from robot_mcp_memory.backends.postgres._tables import (
    OWNER_SQL,
    TS_CONFIG,
    TSVECTOR_SQL,
    WEIGHT_SQL,
)
from robot_mcp_memory.processes import BM25_B, BM25_K1, Phrase, idf

__all__ = ["PgTerms", "index_document", "rebuild_index", "unindex_document"]

Conn = psycopg.Connection[Any]

_SEP = "\x1f"
"""Joins many terms into one text parameter (a text array of thousands of typo-repair
candidates costs more to send than the lookup); no word or lexeme holds it."""


def _move(conn: Conn, before: set[tuple[str, str]], after: set[tuple[str, str]]) -> None:
    """Move the per-owner document frequencies from ``before`` to ``after`` (sets of
    ``(term, owner)``), locking the counters in sorted order."""
    delta = sorted([(t, o, 1) for t, o in after - before] + [(t, o, -1) for t, o in before - after])
    if not delta:
        return
    terms, owners, steps = (list(x) for x in zip(*delta, strict=True))
    conn.execute(
        "INSERT INTO processes_owner_terms (term, owner, docs) "
        "SELECT * FROM unnest(%s::text[], %s::text[], %s::int[]) "
        "ON CONFLICT (term, owner) DO UPDATE SET docs = processes_owner_terms.docs + EXCLUDED.docs",
        (terms, owners, steps),
    )
    gone = [(t, o) for t, o, s in delta if s < 0]
    if gone:
        conn.execute(
            "DELETE FROM processes_owner_terms WHERE docs <= 0 AND (term, owner) IN "
            "(SELECT * FROM unnest(%s::text[], %s::text[]))",
            ([t for t, _ in gone], [o for _, o in gone]),
        )


def index_document(conn: Conn, rid: int) -> None:
    """(Re)index document ``rid`` from its row: search entry, postings, frequencies."""
    before = {
        (str(t), str(o))
        for t, o in conn.execute(
            "DELETE FROM processes_postings WHERE rid = %s RETURNING term, owner", (rid,)
        ).fetchall()
    }
    conn.execute(
        "INSERT INTO processes_search (rid, owner, tokens, tsv) "  # noqa: S608 - constants
        "SELECT t.rid, t.owner, coalesce((SELECT sum(cardinality(x.positions)) "
        "FROM unnest(t.tsv) AS x), 0), t.tsv "
        f"FROM (SELECT p.rid, {OWNER_SQL} AS owner, {TSVECTOR_SQL} AS tsv "
        "FROM processes AS p WHERE p.rid = %s) AS t "
        "ON CONFLICT (rid) DO UPDATE SET owner = EXCLUDED.owner, tokens = EXCLUDED.tokens, "
        "tsv = EXCLUDED.tsv",
        (rid,),
    )
    after = {
        (str(t), str(o))
        for t, o in conn.execute(
            "INSERT INTO processes_postings (term, owner, rid, freq, tokens) "  # noqa: S608
            f"SELECT x.lexeme, s.owner, s.rid, (SELECT sum({WEIGHT_SQL}) "
            "FROM unnest(x.weights) AS w), s.tokens "
            "FROM processes_search AS s, unnest(s.tsv) AS x WHERE s.rid = %s "
            "RETURNING term, owner",
            (rid,),
        ).fetchall()
    }
    _move(conn, before, after)


def unindex_document(conn: Conn, rid: int) -> None:
    """Take document ``rid`` out of the index (before its row is deleted)."""
    before = {
        (str(t), str(o))
        for t, o in conn.execute(
            "DELETE FROM processes_postings WHERE rid = %s RETURNING term, owner", (rid,)
        ).fetchall()
    }
    conn.execute("DELETE FROM processes_search WHERE rid = %s", (rid,))
    _move(conn, before, set())


def rebuild_index(conn: Conn) -> int:
    """Recount every document from the rows (``reindex``); how many were indexed. The
    caller holds a lock that keeps writers out."""
    conn.execute("DELETE FROM processes_owner_terms")
    conn.execute("DELETE FROM processes_postings")
    conn.execute("DELETE FROM processes_search")
    n = conn.execute(
        "INSERT INTO processes_search (rid, owner, tokens, tsv) "  # noqa: S608 - constants
        "SELECT t.rid, t.owner, coalesce((SELECT sum(cardinality(x.positions)) "
        "FROM unnest(t.tsv) AS x), 0), t.tsv "
        f"FROM (SELECT p.rid, {OWNER_SQL} AS owner, {TSVECTOR_SQL} AS tsv "
        "FROM processes AS p) AS t"
    ).rowcount
    conn.execute(
        "INSERT INTO processes_postings (term, owner, rid, freq, tokens) "  # noqa: S608
        f"SELECT x.lexeme, s.owner, s.rid, (SELECT sum({WEIGHT_SQL}) FROM unnest(x.weights) AS w), "
        "s.tokens FROM processes_search AS s, unnest(s.tsv) AS x"
    )
    conn.execute(
        "INSERT INTO processes_owner_terms (term, owner, docs) "
        "SELECT term, owner, count(*) FROM processes_postings GROUP BY term, owner"
    )
    return max(0, n)


class PgTerms:
    """The index's reads on one connection (what :class:`~robot_mcp_memory.processes.TypoRepair`
    and ranking need).

    Args:
        conn: the connection of the search (one transaction, one snapshot).
    """

    def __init__(self, conn: Conn) -> None:
        self.conn = conn

    def stems(self, words: Sequence[str]) -> list[tuple[str, ...]]:
        """Each word's lexemes in :data:`TS_CONFIG`, in order (none for a word with no
        letters or digits)."""
        if not words:
            return []
        found: dict[int, list[tuple[int, str]]] = {}
        for i, lexeme, first in self.conn.execute(
            "SELECT w.i, x.lexeme, x.positions[1] "  # noqa: S608 - a constant
            "FROM unnest(%s::text[]) WITH ORDINALITY AS w(word, i) "
            f"CROSS JOIN LATERAL unnest(to_tsvector('{TS_CONFIG}', w.word)) AS x",
            (list(words),),
        ):
            found.setdefault(int(i), []).append((int(first or 0), str(lexeme)))
        return [tuple(t for _, t in sorted(found.get(i, []))) for i in range(1, len(words) + 1)]

    def document_frequency(
        self, terms: Collection[str], owners: Sequence[str] | None
    ) -> dict[str, int]:
        """How many documents of ``owners`` (None: every owner) hold each of ``terms``."""
        if not terms:
            return {}
        scope = "" if owners is None else "AND owner = ANY(%s)"
        params: list[Any] = [_SEP.join(sorted(set(terms))), _SEP]
        if owners is not None:
            params.append(list(owners))
        rows = self.conn.execute(
            "SELECT term, sum(docs) FROM processes_owner_terms "  # noqa: S608 - constant
            f"WHERE term = ANY(string_to_array(%s, %s)) {scope} GROUP BY term",
            params,
        )
        return {str(t): int(n) for t, n in rows if int(n) > 0}

    def size(self, owners: Sequence[str] | None) -> tuple[int, float]:
        """``(documents, average length in tokens)`` of ``owners``' documents."""
        if owners is None:
            row = self.conn.execute(
                "SELECT count(*), coalesce(sum(tokens), 0) FROM processes_search"
            ).fetchone()
        else:
            row = self.conn.execute(
                "SELECT count(*), coalesce(sum(tokens), 0) FROM processes_search "
                "WHERE owner = ANY(%s)",
                (list(owners),),
            ).fetchone()
        n = int(row[0]) if row is not None else 0
        return n, (float(row[1]) / n if row is not None and n else 0.0)

    def matches_sql(
        self, phrases: Sequence[Phrase], owners: Sequence[str] | None
    ) -> tuple[str, list[Any]] | None:
        """A subquery ``(rid, relevance)`` of every document of ``owners`` holding a phrase,
        by bm25 over their statistics, in the shared SQL's spelling (``?``); None when none
        does.

        Each document's contributions are summed in the order of the phrases (``ORDER BY``
        inside the aggregate): a plan that reads the postings in another order — which
        other owners' rows can cause — would otherwise change a score's last bits.
        """
        n, avgdl = self.size(owners)
        df = self.document_frequency({p.term for p in phrases}, owners)
        used = [p for p in phrases if p.term in df]
        if n == 0 or not used:
            return None
        idfs = [p.weight * idf(n, df[p.term]) for p in used]
        scope = "" if owners is None else "AND po.owner = ANY(?)"
        # The terms filter the postings by their index (term = ANY); the phrases join
        # back for their idf, one contribution each. Written with ``?``: it is a subquery
        # of the shared ranking SQL (:mod:`robot_mcp_memory.backends._processes`).
        sql = (
            f"SELECT po.rid, sum(q.idf * po.freq * {BM25_K1 + 1!r} / "  # noqa: S608
            f"(po.freq + {BM25_K1!r} * ({1 - BM25_B!r} + {BM25_B!r} * po.tokens / ?)) "
            "ORDER BY q.n) AS relevance "
            "FROM unnest(?::text[], ?::float8[]) WITH ORDINALITY AS q(term, idf, n) "
            "JOIN processes_postings AS po ON po.term = q.term "
            f"WHERE po.term = ANY(?) {scope} GROUP BY po.rid"
        )
        terms = [p.term for p in used]
        params: list[Any] = [float(avgdl or 1.0), terms, idfs, sorted(set(terms))]
        if owners is not None:
            params.append(list(owners))
        return sql, params
