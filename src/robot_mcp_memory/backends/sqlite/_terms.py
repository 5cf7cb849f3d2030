"""Term statistics per owner: what scoped ranking and typo repair may count.

FTS5's ``bm25()`` computes a term's rarity (idf) and the average document length over the
whole table, and its vocabulary (``fts5vocab``) spans the whole table too. On a server that
many groups share, that lets a robot read other groups' documents from its own scores and
from which of its misspellings are repaired. Everything a scoped call observes must depend
only on documents it may read, so the index also keeps, per *owner*, the statistics bm25
needs — three DERIVED tables written in the same transaction as the document row
(:mod:`._schema`):

=========================  ===============================================================
``processes_postings``     (owner, term, doc) -> the term's column-weighted frequency in
                           the document
``processes_owner_terms``  (term, owner) -> how many of the owner's documents hold the term
                           (the vocabulary typo repair reads, and each term's df)
``processes_lengths``      doc -> its owner, its length in tokens and its terms with their
                           frequencies (what a rewrite or delete takes out again)
=========================  ===============================================================

An owner is :func:`~robot_mcp_memory.processes.owner_key`; groups are resolved at read
time, so a regroup changes nothing here.

:meth:`TermIndex.matches_sql` is bm25 by :mod:`robot_mcp_memory.processes._ranking`'s rules
with ``N``, the average length and each ``n`` counted over the visible owners only: over
every owner it equals ``-bm25(processes_fts, ...)`` to the last bits, which a test holds it
to.

Writes take the caller's transaction connection; reads go through the kit store's readers.
Thread-safe (the kit store and the tokenizer are).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Sequence

from robot_mcp_kit.store import SqliteStore
from robot_mcp_memory.backends._tokens import Tokenizer
from robot_mcp_memory.processes import (
    BM25_B,
    BM25_K1,
    DocTerms,
    Phrase,
    idf,
    owner_key,
)

__all__ = [
    "TermIndex",
    "index_document",
    "rebuild_term_index",
    "unindex_document",
]

# --- writes: inside the caller's transaction ----------------------------------------


def index_document(conn: sqlite3.Connection, rowid: int, owner: str, terms: DocTerms) -> None:
    """Count document ``rowid`` (under ``owner``) in the statistics, replacing what was
    counted for it before.

    A rewrite under the same owner writes only the difference (an outcome note, a
    corrected step): each changed word costs a row, not the whole document.
    """
    row = conn.execute(
        "SELECT owner, terms FROM processes_lengths WHERE doc_rowid = ?", (rowid,)
    ).fetchone()
    before: dict[str, float] = {}
    if row is not None and str(row[0]) == owner:
        before = {str(t): float(f) for t, f in json.loads(row[1]).items()}
    elif row is not None:
        unindex_document(conn, rowid)
        row = None
    after = terms.freq
    removed = [t for t in before if t not in after]
    added = [t for t in after if t not in before]
    changed = [t for t in after if t in before and before[t] != after[t]]
    text = json.dumps(after, ensure_ascii=False, sort_keys=True)
    if row is None:
        conn.execute(
            "INSERT INTO processes_lengths (doc_rowid, owner, tokens, terms) VALUES (?, ?, ?, ?)",
            (rowid, owner, terms.tokens, text),
        )
    else:
        conn.execute(
            "UPDATE processes_lengths SET tokens = ?, terms = ? WHERE doc_rowid = ?",
            (terms.tokens, text, rowid),
        )
    _uncount(conn, rowid, owner, removed)
    conn.executemany(
        "INSERT INTO processes_postings (owner, term, doc_rowid, freq) VALUES (?, ?, ?, ?)",
        [(owner, term, rowid, after[term]) for term in added],
    )
    conn.executemany(
        "UPDATE processes_postings SET freq = ? WHERE owner = ? AND term = ? AND doc_rowid = ?",
        [(after[term], owner, term, rowid) for term in changed],
    )
    conn.executemany(
        "INSERT INTO processes_owner_terms (term, owner, docs) VALUES (?, ?, 1) "
        "ON CONFLICT (term, owner) DO UPDATE SET docs = docs + 1",
        [(term, owner) for term in added],
    )


def unindex_document(conn: sqlite3.Connection, rowid: int) -> None:
    """Take document ``rowid`` out of the statistics (nothing if it was never counted)."""
    row = conn.execute(
        "SELECT owner, terms FROM processes_lengths WHERE doc_rowid = ?", (rowid,)
    ).fetchone()
    if row is None:
        return
    conn.execute("DELETE FROM processes_lengths WHERE doc_rowid = ?", (rowid,))
    _uncount(conn, rowid, str(row[0]), [str(t) for t in json.loads(row[1])])


def _uncount(conn: sqlite3.Connection, rowid: int, owner: str, terms: Sequence[str]) -> None:
    conn.executemany(
        "DELETE FROM processes_postings WHERE owner = ? AND term = ? AND doc_rowid = ?",
        [(owner, term, rowid) for term in terms],
    )
    conn.executemany(
        "UPDATE processes_owner_terms SET docs = docs - 1 WHERE term = ? AND owner = ?",
        [(term, owner) for term in terms],
    )
    conn.executemany(
        "DELETE FROM processes_owner_terms WHERE term = ? AND owner = ? AND docs <= 0",
        [(term, owner) for term in terms],
    )


def rebuild_term_index(conn: sqlite3.Connection, tokenizer: Tokenizer) -> int:
    """Recount every document of ``processes`` from scratch; how many were counted.

    For ``reindex()`` and the schema migration that creates the tables.
    """
    for table in ("processes_postings", "processes_owner_terms", "processes_lengths"):
        conn.execute(f"DELETE FROM {table}")  # noqa: S608 - constant names
    rows = conn.execute(
        "SELECT rowid, robot, shared, title, task_pattern, tags, body FROM processes"
    ).fetchall()
    for rowid, robot, shared, title, task_pattern, tags, body in rows:
        terms = tokenizer.document(str(title), str(task_pattern or ""), str(tags), str(body))
        index_document(conn, int(rowid), owner_key(str(robot), bool(shared)), terms)
    return len(rows)


# --- reads ---------------------------------------------------------------------------


def _in(values: Sequence[str]) -> str:
    return ", ".join("?" for _ in values)


class TermIndex:
    """The read side of the per-owner statistics of one ``index.db``.

    Args:
        store: the kit store (its schema declares the three tables).
    """

    def __init__(self, store: SqliteStore) -> None:
        self._store = store

    def document_frequency(
        self, terms: Collection[str], owners: Sequence[str] | None
    ) -> dict[str, int]:
        """How many documents of ``owners`` (None: every owner) hold each of ``terms``;
        terms no such document holds are absent."""
        if not terms:
            return {}
        where = "" if owners is None else f"AND owner IN ({_in(owners)})"
        rows = self._store.query(
            "SELECT term, sum(docs) FROM processes_owner_terms "  # noqa: S608 - marks only
            f"WHERE term IN (SELECT value FROM json_each(?)) {where} GROUP BY term",
            (json.dumps(sorted(set(terms)), ensure_ascii=False), *(owners or ())),
        )
        return {str(r[0]): int(r[1]) for r in rows if int(r[1]) > 0}

    def size(self, owners: Sequence[str]) -> tuple[int, float]:
        """``(documents, average length in tokens)`` of ``owners``' documents."""
        row = self._store.query_one(
            "SELECT count(*), total(tokens) FROM processes_lengths "  # noqa: S608 - marks only
            f"WHERE owner IN ({_in(owners)})",
            owners,
        )
        n = int(row[0]) if row is not None else 0
        return n, (float(row[1]) / n if row is not None and n else 0.0)

    def matches_sql(
        self, phrases: Sequence[Phrase], owners: Sequence[str]
    ) -> tuple[str, list[object]] | None:
        """A subquery ``(rid, relevance)`` over the documents of ``owners`` that hold a
        phrase, relevance being bm25 with every statistic counted over ``owners`` (see the
        module docstring); None when no such document holds any phrase."""
        n, avgdl = self.size(owners)
        df = self.document_frequency({p.term for p in phrases}, owners)
        used = [p for p in phrases if p.term in df]
        if n == 0 or not used:
            return None
        # One contribution per phrase, as FTS5 counts a query's phrases (two query words
        # with one stem count twice); the phrase's weight scales its idf.
        values = ", ".join("(?, ?)" for _ in used)
        params: list[object] = []
        for phrase in used:
            params += [phrase.term, phrase.weight * idf(n, df[phrase.term])]
        sql = (
            f"SELECT po.doc_rowid AS rid, sum(q.column2 * po.freq * {BM25_K1 + 1!r} / "  # noqa: S608
            f"(po.freq + {BM25_K1!r} * ({1 - BM25_B!r} + {BM25_B!r} * l.tokens / ?))) "
            f"AS relevance FROM (VALUES {values}) AS q "  # column1: term, column2: idf
            "JOIN processes_postings AS po "
            f"ON po.term = q.column1 AND po.owner IN ({_in(owners)}) "
            "JOIN processes_lengths AS l ON l.doc_rowid = po.doc_rowid "
            "GROUP BY po.doc_rowid"
        )
        return sql, [avgdl, *params, *owners]
