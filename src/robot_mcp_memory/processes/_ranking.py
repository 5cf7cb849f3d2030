"""How process documents are ranked: bm25 over the statistics a call may read, fused with
the cosine of their vectors, times their reliability (decisions 0011, 0022).

Every backend ranks by these rules; only how it reads the statistics and the vectors is
its own.

**Owners.** A document's statistics are counted under its owner (:func:`owner_key`):
``"shared"`` for a fleet-wide document, ``"robot:<id>"`` for any other, the two halves of
the visibility rule; the owners a call may count are :func:`visible_owners` of the robots
it may read. Everything a narrowed call observes (scores, order, which documents match,
which words are repaired) therefore depends only on documents it may read.

**Relevance** is bm25 as FTS5 computes it: ``k1`` :data:`BM25_K1`, ``b`` :data:`BM25_B`,
:func:`idf` floored at :data:`IDF_FLOOR`, one contribution per query :class:`Phrase`,
columns weighted by :data:`BM25_WEIGHTS` — with the document count, the average length
and each term's document frequency counted over the visible owners only.

**Lexical ranking** (no embedder): ``score = relevance * reliability``, best first, ties
by the smaller key.

**Hybrid ranking** (an embedder): the :data:`LEXICAL_POOL` best visible matches by
relevance and the :data:`SEMANTIC_POOL` best visible documents by cosine (the better of
a document's head and whole-document vectors) are fused (:func:`fuse`)::

    fused = SEMANTIC_WEIGHT * (cos - cos_min) / (cos_max - cos_min)
            + (1 - SEMANTIC_WEIGHT) * relevance / relevance_max
    score = fused * reliability

(``cos_min``/``cos_max`` over every visible document; a document outside the lexical pool
counts relevance 0). A document with no lexical match takes part only with a cosine of at
least :data:`SEMANTIC_FLOOR`, so a query about nothing stored still finds nothing.

Pure; thread-safe.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass

from robot_mcp_memory.processes._model import ProcessDoc

__all__ = [
    "BM25_B",
    "BM25_K1",
    "BM25_WEIGHTS",
    "COLUMN_WEIGHTS",
    "IDF_FLOOR",
    "LEXICAL_POOL",
    "SEMANTIC_FLOOR",
    "SEMANTIC_POOL",
    "SEMANTIC_WEIGHT",
    "SHARED_OWNER",
    "DocTerms",
    "Found",
    "Phrase",
    "fuse",
    "idf",
    "owner_key",
    "rank",
    "visible_owners",
]

BM25_K1 = 1.2
"""FTS5's bm25 ``k1`` (term-frequency saturation)."""

BM25_B = 0.75
"""FTS5's bm25 ``b`` (length normalisation)."""

IDF_FLOOR = 1e-6
"""FTS5 floors a term's idf here (a term in more than half the documents)."""

BM25_WEIGHTS = (0.0, 4.0, 3.0, 2.0, 1.0)
"""bm25 weights of a document's columns: id (not searched), title, task_pattern, tags, body."""

COLUMN_WEIGHTS: dict[str, float] = dict(
    zip(("title", "task_pattern", "tags", "body"), BM25_WEIGHTS[1:], strict=True)
)
"""The same weights by column name: a term's frequency in a document is the sum of its
occurrences, each counting its column's weight (as FTS5's bm25 counts them)."""

SEMANTIC_WEIGHT = 0.7
"""The cosine's share of the fused score; bm25 has the rest (chosen in decision 0011)."""

SEMANTIC_FLOOR = 0.25
"""Least cosine for a document with no lexical match to be returned at all."""

LEXICAL_POOL = 100
"""How many bm25 matches the hybrid fuses (the best, by relevance)."""

SEMANTIC_POOL = 100
"""How many documents by cosine the hybrid fuses (the best, visible ones)."""

SHARED_OWNER = "shared"
"""The owner of every fleet-wide (``shared: true``) document."""


def owner_key(robot: str, shared: bool) -> str:
    """The owner a document's statistics are counted under."""
    return SHARED_OWNER if shared else f"robot:{robot}"


def visible_owners(robots: Collection[str]) -> list[str]:
    """The owners a call that may read ``robots``' documents (plus shared ones) may count,
    sorted: the same rule as the visibility filter of every read."""
    return [SHARED_OWNER, *(owner_key(r, False) for r in sorted(set(robots)))]


def idf(documents: int, holding: int) -> float:
    """bm25's rarity of a term ``holding`` of ``documents`` documents hold, as FTS5
    computes it: ``ln((N - n + 0.5) / (n + 0.5))`` floored at :data:`IDF_FLOOR`."""
    return max(IDF_FLOOR, math.log((documents - holding + 0.5) / (holding + 0.5)))


@dataclass(frozen=True)
class Phrase:
    """One query phrase: an index term and the share of its bm25 it counts (1, or less for
    a term typo repair stood in)."""

    term: str
    weight: float = 1.0


@dataclass(frozen=True)
class DocTerms:
    """A document's terms as the index counts them.

    ``freq`` maps each distinct term (a stem) to its column-weighted frequency, ``tokens``
    is the document's length in tokens (every column).
    """

    freq: dict[str, float]
    tokens: int

    @property
    def distinct(self) -> int:
        """How many distinct terms the document has."""
        return len(self.freq)


@dataclass(frozen=True)
class Found:
    """One search result.

    ``bm25`` is the positive lexical relevance (higher is better; 0 when the document
    matched no word), ``semantic`` the cosine of the query with the document (the better of
    its two vectors; None when search is lexical), ``reliability`` the Laplace-smoothed
    success rate and ``score`` what results are ranked by: ``bm25 * reliability``
    (lexical) or the fused relevance ``* reliability`` (hybrid).
    """

    doc: ProcessDoc
    score: float
    bm25: float
    reliability: float
    semantic: float | None = None


def fuse(
    relevance: dict[int, float], cosine: dict[int, float], low: float, high: float
) -> dict[int, float]:
    """The fused relevance of each candidate (see the module docstring).

    ``relevance`` holds the lexical pool (document -> relevance), ``cosine`` each known
    document's better cosine, ``low``/``high`` the least and greatest cosine over every
    visible document. The candidates are the lexical pool and every document whose cosine
    reaches :data:`SEMANTIC_FLOOR`; empty when there are none.
    """
    pool = set(relevance) | {r for r, c in cosine.items() if c >= SEMANTIC_FLOOR}
    top_relevance = max(relevance.values(), default=0.0)
    span = high - low
    fused: dict[int, float] = {}
    for key in pool:
        cos_part = (cosine.get(key, low) - low) / span if span > 0 else 1.0
        lex_part = relevance.get(key, 0.0) / top_relevance if top_relevance > 0 else 0.0
        fused[key] = SEMANTIC_WEIGHT * cos_part + (1 - SEMANTIC_WEIGHT) * lex_part
    return fused


def rank(fused: dict[int, float], reliability: dict[int, float], k: int) -> list[int]:
    """The ``k`` best candidates by fused relevance x reliability (ties: smaller key first),
    among those with a known reliability (the visible ones)."""
    visible = fused.keys() & reliability.keys()
    return sorted(visible, key=lambda r: (-fused[r] * reliability[r], r))[:k]
