"""Finding the right process: robot-aware words, typo repair, bm25 fused with cosine.

Issue 11, decision 0011. :class:`ProcessSearch` answers :meth:`ProcessStore.find
<robot_mcp_memory.store.ProcessStore.find>`.

**Words.** The query (its first :data:`~robot_mcp_memory.limits.MAX_QUERY_BYTES`, DESIGN §5)
is NFKC-normalised and reduced to words (runs of Unicode letters and digits), lowercased;
English function words and polite filler (:data:`STOPWORDS`) are dropped — but never the
small words a robot's action turns on (:data:`ACTION_WORDS`: on/off, up/down, in/out,
into/onto, over/under, above/below, left/right, open/close, before/after, not/no): "turn
on the light" and "turn off the light" must not rank alike. Adjacent words are also tried
joined ("mail room" → "mailroom"); each term is double-quoted (FTS5 operators are inert)
and the terms are OR-ed, at most :data:`MAX_TERMS`. A query with no words left finds
nothing.

**Typo repair** (:class:`TypoRepair`). A query word of 4 to 24 ASCII letters that the index
does not hold (neither as written nor as its porter stem) is matched to the index's
vocabulary (``processes_vocab``, an ``fts5vocab`` view): vocabulary terms one edit (a
deletion, insertion, substitution or transposition) away from the word, or from the word
less up to three final letters (the vocabulary holds stems: "pakage" → "packag"), each
searched by a spelling that stems back into the index ("coffe" as "coffee"). At most
:data:`MAX_REPAIRS_PER_WORD` terms per word, the most frequent first, for at most
:data:`MAX_REPAIRED_WORDS` words per query; repaired terms count :data:`REPAIR_WEIGHT` of
an exact term's bm25. Cost: a set lookup per candidate string (about 60 x word length of
them) and a few one-row index probes per repaired word, plus one scan of the vocabulary
after each write that changed it.

**Lexical ranking** (no embedder, or ``MEMORY_SEARCH=lexical``): in SQL over every match::

    score = relevance * (s + 1) / (s + f + 2)      relevance = -bm25(processes_fts, weights)
    ORDER BY score DESC LIMIT k

with column weights :data:`BM25_WEIGHTS` (title, task pattern, tags, body).

**Hybrid ranking** (an embedder): the :data:`LEXICAL_POOL` best visible matches by bm25 and
the :data:`SEMANTIC_POOL` best visible documents by cosine (the better of a document's
title+task_pattern+tags vector and its whole-document vector) are fused, per query::

    fused = SEMANTIC_WEIGHT * (cos - cos_min) / (cos_max - cos_min)
            + (1 - SEMANTIC_WEIGHT) * relevance / relevance_max
    score = fused * reliability

(``cos_min``/``cos_max`` over every visible document; a document outside the lexical pool
counts relevance 0). A document with no lexical match takes part only with a cosine of at
least :data:`SEMANTIC_FLOOR`, so a query about nothing stored still finds nothing.
Visibility: the vector index only preselects; the rows are read through the same SQL
filter as the lexical path (:func:`robot_mcp_memory.rows.scope_sql`).
"""

from __future__ import annotations

import itertools
import re
import string
import threading
import unicodedata
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from robot_mcp_kit.store import SqliteStore
from robot_mcp_memory.docmodel import ProcessDoc
from robot_mcp_memory.limits import MAX_K, MAX_QUERY_BYTES, clamp
from robot_mcp_memory.rows import COLUMNS, readable, scope_sql

if TYPE_CHECKING:
    from robot_mcp_memory.embedding import Embedder
    from robot_mcp_memory.vectors import VectorIndex

__all__ = [
    "ACTION_WORDS",
    "BM25_WEIGHTS",
    "LEXICAL_POOL",
    "MAX_REPAIRED_WORDS",
    "MAX_REPAIRS_PER_WORD",
    "MAX_TERMS",
    "REPAIR_WEIGHT",
    "SEMANTIC_FLOOR",
    "SEMANTIC_POOL",
    "SEMANTIC_WEIGHT",
    "STOPWORDS",
    "Found",
    "ProcessSearch",
    "TypoRepair",
    "match_expression",
    "search_terms",
    "truncate_query",
]

MAX_TERMS = 32
"""Most terms one search ORs together (single words first, then joined pairs)."""

BM25_WEIGHTS = (0.0, 4.0, 3.0, 2.0, 1.0)
"""bm25 weights of ``processes_fts``'s columns: id (unindexed), title, task_pattern, tags, body."""

SEMANTIC_WEIGHT = 0.7
"""The cosine's share of the fused score; bm25 has the rest (chosen in decision 0011)."""

SEMANTIC_FLOOR = 0.25
"""Least cosine for a document with no lexical match to be returned at all."""

LEXICAL_POOL = 100
"""How many bm25 matches the hybrid fuses (the best, by relevance)."""

SEMANTIC_POOL = 100
"""How many documents by cosine the hybrid fuses (the best, visible ones)."""

REPAIR_WEIGHT = 0.5
"""A repaired term's bm25 counts this much of an exact term's."""

MAX_REPAIRED_WORDS = 6
"""Most absent words of one query that typo repair looks at."""

MAX_REPAIRS_PER_WORD = 2
"""Most vocabulary terms one absent word is repaired to."""

_ACTION_WORD_TEXT = """
    on off up down in out into onto over under above below left right open close
    before after not no
"""
ACTION_WORDS: frozenset[str] = frozenset(_ACTION_WORD_TEXT.split())
"""Small words a robot's action turns on: content, never stopwords (DESIGN §5)."""

_STOPWORD_TEXT = """
    a about again against all am an and any are as at be been being between both but by
    can could did do does doing during each either few for from further had has have
    having he her here hers herself him himself his how i if is it its itself just let
    lets me might more most must my myself near neither nor now of once only or other
    ought our ours ourselves own same shall she should so some such than that the their
    theirs them themselves then there these they this those through thus to too until
    upon us very was we were what when where whether which while who whom whose why will
    with within without would yet you your yours yourself yourselves
    please pls kindly thanks thank thx hey hi hello ok okay sure maybe also really
    s t ll re ve don doesn didn isn aren wasn weren wouldn shouldn couldn
"""
STOPWORDS: frozenset[str] = frozenset(_STOPWORD_TEXT.split())
"""Words a query is not searched by: English function words and polite filler.

Content verbs (get, bring, fetch, take, go, put, open) and :data:`ACTION_WORDS` are
deliberately *not* here.
"""

_WORD = re.compile(r"[^\W_]+")
_REPAIRABLE_WORD = re.compile(r"[a-z]{4,24}")
_LETTERS = string.ascii_lowercase
_RELIABILITY = "(p.success_count + 1.0) / (p.success_count + p.failure_count + 2.0)"


@dataclass(frozen=True)
class Found:
    """One search result.

    ``bm25`` is the positive lexical relevance (``-bm25()``, higher is better; 0 when the
    document matched no word), ``semantic`` the cosine of the query with the document (the
    better of its two vectors; None when search is lexical), ``reliability`` the
    Laplace-smoothed success rate and ``score`` what results are ranked by:
    ``bm25 * reliability`` (lexical) or the fused relevance ``* reliability`` (hybrid).
    """

    doc: ProcessDoc
    score: float
    bm25: float
    reliability: float
    semantic: float | None = None


def search_terms(query: str) -> list[str]:
    """The words :meth:`ProcessSearch.find` searches for, in order, deduplicated.

    Single words first (lowercased, stopwords dropped), then each pair of adjacent words
    joined into one, at most :data:`MAX_TERMS` in all. Pure.
    """
    kept = _content_words(query)
    terms: dict[str, None] = dict.fromkeys(kept)
    for first, second in itertools.pairwise(kept):
        terms.setdefault(first + second)
    return list(terms)[:MAX_TERMS]


def _content_words(query: str) -> list[str]:
    words: list[str] = _WORD.findall(unicodedata.normalize("NFKC", query).lower())
    return [w for w in words if w not in STOPWORDS]


def match_expression(terms: Sequence[str]) -> str:
    """The FTS5 MATCH text OR-ing ``terms``, each quoted (operators inert). Pure."""
    # Terms are letters and digits only; doubling quotes is belt and braces.
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def truncate_query(query: str) -> tuple[str, bool]:
    """``query`` cut to its first :data:`MAX_QUERY_BYTES` UTF-8 bytes, and whether it was cut.

    Never splits a character; lone surrogates (valid in JSON, not in UTF-8) are dropped.
    Pure.
    """
    data = query.encode("utf-8", "ignore")
    truncated = len(data) > MAX_QUERY_BYTES
    if truncated:
        data = data[:MAX_QUERY_BYTES]
    return data.decode("utf-8", "ignore"), truncated


def _edits1(word: str) -> set[str]:
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    deletes = [a + b[1:] for a, b in splits if b]
    transposes = [a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1]
    replaces = [a + c + b[1:] for a, b in splits if b for c in _LETTERS]
    inserts = [a + c + b for a, b in splits for c in _LETTERS]
    return set(deletes + transposes + replaces + inserts)


class TypoRepair:
    """Repairs query words the index does not hold to nearby vocabulary terms.

    The vocabulary (term -> number of documents) is read from ``processes_vocab`` on first
    use and again after :meth:`invalidate` (every write that changes the index calls it).
    Thread-safe. A store whose schema has no ``processes_vocab`` repairs nothing.
    """

    def __init__(self, store: SqliteStore) -> None:
        self._store = store
        self._enabled = any(t.name == "processes_vocab" for t in store.schema.tables)
        self._lock = threading.Lock()
        self._vocab: dict[str, int] | None = None

    def invalidate(self) -> None:
        """The index changed: read the vocabulary again before the next repair."""
        with self._lock:
            self._vocab = None

    def _vocabulary(self) -> dict[str, int]:
        with self._lock:
            vocab = self._vocab
        if vocab is None:
            rows = self._store.query("SELECT term, doc FROM processes_vocab")
            vocab = {str(r[0]): int(r[1]) for r in rows}
            with self._lock:
                self._vocab = vocab
        return vocab

    def _indexed(self, word: str) -> bool:
        row = self._store.query_one(
            "SELECT 1 FROM processes_fts WHERE processes_fts MATCH ? LIMIT 1",
            (match_expression([word]),),
        )
        return row is not None

    def repair(self, words: Sequence[str]) -> list[str]:
        """Vocabulary terms standing in for the ``words`` the index does not hold."""
        if not self._enabled:
            return []
        candidates = [w for w in words if _REPAIRABLE_WORD.fullmatch(w)]
        if not candidates:
            return []
        vocab = self._vocabulary()
        repaired: dict[str, None] = {}
        looked_at = 0
        for word in candidates:
            if word in vocab or self._indexed(word):
                continue
            looked_at += 1
            if looked_at > MAX_REPAIRED_WORDS:
                break
            for term in self._nearest(word, vocab):
                surface = self._surface(term)
                if surface is not None:
                    repaired.setdefault(surface)
        return [t for t in repaired if t not in words]

    def _surface(self, term: str) -> str | None:
        # The vocabulary holds porter stems, and a query term is stemmed again: "coffe"
        # (from "coffee") would become "coff". Use the first spelling that stems back into
        # the index: the term itself, or with the final letters porter removed.
        spellings = [term, term + "e", term + "s"]
        if term.endswith("i"):
            spellings.insert(1, term[:-1] + "y")
        for spelling in spellings:
            if self._indexed(spelling):
                return spelling
        return None

    @staticmethod
    def _nearest(word: str, vocab: dict[str, int]) -> list[str]:
        # The word itself first, then the word less one, two, three final letters (the
        # vocabulary holds porter stems), never shorter than four letters.
        forms = [word[:n] for n in range(len(word), max(3, len(word) - 4), -1)]
        for form in forms:
            found = [t for t in _edits1(form) if t in vocab and len(t) >= 4]
            if found:
                found.sort(key=lambda t: (-vocab[t], t))
                return found[:MAX_REPAIRS_PER_WORD]
        return []


def _matches_sql(repaired: bool) -> str:
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
    """

    def __init__(
        self,
        store: SqliteStore,
        *,
        embedder: Embedder | None = None,
        vectors: VectorIndex | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.vectors = vectors
        self.typos = TypoRepair(store)

    @property
    def mode(self) -> str:
        """``"hybrid"`` with an embedder, else ``"lexical"``."""
        return "lexical" if self.embedder is None or self.vectors is None else "hybrid"

    def find(self, query: str, k: int = 3, *, robots: Collection[str] | None = None) -> list[Found]:
        """See :meth:`robot_mcp_memory.store.ProcessStore.find`."""
        text = truncate_query(query)[0]
        terms = search_terms(text)
        if not terms:
            return []
        repaired = self.typos.repair(list(dict.fromkeys(_content_words(text))))
        params: list[Any] = [match_expression(terms)]
        if repaired:
            params.append(match_expression(repaired))
        k = clamp(k, 1, MAX_K)
        if self.embedder is None or self.vectors is None:
            return self._lexical(params, bool(repaired), k, robots)
        return self._hybrid(text, params, bool(repaired), k, robots)

    def _lexical(
        self, params: list[Any], repaired: bool, k: int, robots: Collection[str] | None
    ) -> list[Found]:
        where, scope_params = scope_sql(robots, "p.")
        # Two steps: score every match joining the index to the rows by rowid (the index
        # row shares its document row's rowid), keep the top k by score, and only then
        # read those k rows in full. Reading the fts `id` column, or carrying bodies
        # through the sort, for every match would cost more than the search itself.
        sql = (
            f"SELECT {', '.join('p.' + c for c in COLUMNS.split(', '))}, "  # noqa: S608
            "  top.relevance, top.reliability, top.score "
            "FROM ("
            "  SELECT m.rid, m.relevance, "
            f"   {_RELIABILITY} AS reliability, m.relevance * {_RELIABILITY} AS score "
            f"  FROM ({_matches_sql(repaired)}) AS m JOIN processes AS p ON p.rowid = m.rid "
            f"  {'WHERE ' + where if where else ''} "
            "  ORDER BY score DESC, m.rid LIMIT ?"
            ") AS top JOIN processes AS p ON p.rowid = top.rid "
            "ORDER BY top.score DESC, top.rid"
        )
        rows = self.store.query(sql, (*params, *scope_params, k))
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
        params: list[Any],
        repaired: bool,
        k: int,
        robots: Collection[str] | None,
    ) -> list[Found]:
        assert self.embedder is not None
        assert self.vectors is not None
        where, scope_params = scope_sql(robots, "p.")
        lexical = self.store.query(
            f"SELECT m.rid, m.relevance, {_RELIABILITY} AS reliability "  # noqa: S608
            f"FROM ({_matches_sql(repaired)}) AS m "
            f"JOIN processes AS p ON p.rowid = m.rid {'WHERE ' + where if where else ''} "
            "ORDER BY m.relevance DESC, m.rid LIMIT ?",
            (*params, *scope_params, LEXICAL_POOL),
        )
        relevance = {int(r["rid"]): float(r["relevance"]) for r in lexical}
        reliability = {int(r["rid"]): float(r["reliability"]) for r in lexical}
        top_relevance = max(relevance.values(), default=0.0)
        query_vector = self.embedder.embed([text])[0]
        rowids, cosines, low, high = self.vectors.score(query_vector, robots, SEMANTIC_POOL)
        cosine = dict(zip(rowids.tolist(), cosines.tolist(), strict=True))
        for rowid, value in self.vectors.cosines(
            [r for r in relevance if r not in cosine], query_vector
        ).items():
            cosine[rowid] = value
        pool = set(relevance) | {r for r, c in cosine.items() if c >= SEMANTIC_FLOOR}
        if not pool:
            return []
        span = high - low
        fused: dict[int, float] = {}
        for rowid in pool:
            cos_part = (cosine.get(rowid, low) - low) / span if span > 0 else 1.0
            lex_part = relevance.get(rowid, 0.0) / top_relevance if top_relevance > 0 else 0.0
            fused[rowid] = SEMANTIC_WEIGHT * cos_part + (1 - SEMANTIC_WEIGHT) * lex_part
        # The semantic candidates' reliability is read from the rows through the same
        # visibility filter as every read (the vector index only preselected them).
        unread = sorted(pool - reliability.keys())
        if unread:
            marks = ", ".join("?" for _ in unread)
            for r in self.store.query(
                f"SELECT p.rowid AS rid, {_RELIABILITY} AS reliability "  # noqa: S608
                f"FROM processes AS p WHERE p.rowid IN ({marks}) "
                f"{'AND ' + where if where else ''}",
                (*unread, *scope_params),
            ):
                reliability[int(r["rid"])] = float(r["reliability"])
        visible = pool & reliability.keys()
        ranked = sorted(visible, key=lambda r: (-fused[r] * reliability[r], r))[:k]
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
