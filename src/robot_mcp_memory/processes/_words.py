"""The words a query is searched by (decision 0011).

**Words.** The query (its first :data:`~robot_mcp_memory._limits.MAX_QUERY_BYTES`, DESIGN §5)
is NFKC-normalised and reduced to words (runs of Unicode letters and digits), lowercased;
English function words and polite filler (:data:`STOPWORDS`) are dropped — but never the
small words a robot's action turns on (:data:`ACTION_WORDS`: on/off, up/down, in/out,
into/onto, over/under, above/below, left/right, open/close, before/after, not/no): "turn
on the light" and "turn off the light" must not rank alike. Adjacent words are also tried
joined ("mail room" → "mailroom"); each term is double-quoted (FTS5 operators are inert)
and the terms are OR-ed, at most :data:`MAX_TERMS`. A query with no words left finds
nothing.

Pure functions; used by the process service's find and its typo repair.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Sequence

from robot_mcp_memory._limits import MAX_QUERY_BYTES

__all__ = [
    "ACTION_WORDS",
    "MAX_TERMS",
    "STOPWORDS",
    "content_words",
    "match_expression",
    "search_terms",
    "truncate_query",
]

MAX_TERMS = 32
"""Most terms one search ORs together (single words first, then joined pairs)."""

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


def search_terms(query: str) -> list[str]:
    """The words a find searches for, in order, deduplicated.

    Single words first (lowercased, stopwords dropped), then each pair of adjacent words
    joined into one, at most :data:`MAX_TERMS` in all. Pure.
    """
    kept = content_words(query)
    terms: dict[str, None] = dict.fromkeys(kept)
    for first, second in itertools.pairwise(kept):
        terms.setdefault(first + second)
    return list(terms)[:MAX_TERMS]


def content_words(query: str) -> list[str]:
    """The query's words, NFKC-normalised and lowercased, stopwords dropped. Pure."""
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
