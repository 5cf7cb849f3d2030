"""Typo repair: query words the caller's documents do not hold, matched to their vocabulary.

**Typo repair** (:class:`TypoRepair`). A query word of 4 to 24 ASCII letters whose stem
none of the caller's documents holds is matched to the vocabulary of the documents the
caller may read (``processes_owner_terms``, counted per owner,
:mod:`._term_index`): vocabulary terms one edit (a deletion, insertion, substitution or
transposition) away from the word, or from the word less up to three final letters (the
vocabulary holds stems: "pakage" → "packag"), each searched by a spelling that stems back
to it ("coffe" as "coffee"). At most :data:`MAX_REPAIRS_PER_WORD` terms per word, those in
the most documents first, for at most :data:`MAX_REPAIRED_WORDS` words per query; repaired
terms count :data:`REPAIR_WEIGHT` of an exact term's bm25.

Only the caller's vocabulary is read, so whether a misspelling is repaired says nothing
about the words of documents it may not read (decision 0022). Nothing is cached: every lookup
is an indexed read of the vocabulary table, which each write keeps up to date in its own
transaction, so a write never makes the next search reload anything. Cost: one stem
lookup per query, then one indexed read of a few hundred candidate strings per absent
word.
"""

from __future__ import annotations

import re
import string
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "MAX_REPAIRED_WORDS",
    "MAX_REPAIRS_PER_WORD",
    "REPAIR_WEIGHT",
    "Repair",
    "Stemmer",
    "TypoRepair",
    "Vocabulary",
]

REPAIR_WEIGHT = 0.5
"""A repaired term's bm25 counts this much of an exact term's."""

MAX_REPAIRED_WORDS = 6
"""Most absent words of one query that typo repair looks at."""

MAX_REPAIRS_PER_WORD = 2
"""Most vocabulary terms one absent word is repaired to."""

_REPAIRABLE_WORD = re.compile(r"[a-z]{4,24}")
_LETTERS = string.ascii_lowercase


def _edits1(word: str) -> set[str]:
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    deletes = [a + b[1:] for a, b in splits if b]
    transposes = [a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1]
    replaces = [a + c + b[1:] for a, b in splits if b for c in _LETTERS]
    inserts = [a + c + b for a, b in splits for c in _LETTERS]
    return set(deletes + transposes + replaces + inserts)


class Vocabulary(Protocol):
    """What typo repair reads of the index: how many of some owners' documents hold each
    term (the backend's :class:`~robot_mcp_memory.processes.ProcessReads`)."""

    def document_frequency(
        self, terms: Collection[str], owners: Sequence[str] | None
    ) -> dict[str, int]: ...


class Stemmer(Protocol):
    """The index's tokens of words (the backend's
    :class:`~robot_mcp_memory.processes.ProcessReads`)."""

    def stems(self, words: Sequence[str]) -> list[tuple[str, ...]]: ...


@dataclass(frozen=True)
class Repair:
    """A vocabulary term standing in for a misspelt query word: the ``term`` (a stem, as
    the index holds it) and a ``spelling`` that a MATCH stems back to it."""

    term: str
    spelling: str


class TypoRepair:
    """Repairs query words the caller's documents do not hold to nearby vocabulary terms.

    Args:
        terms: the per-owner statistics (the vocabulary is their ``processes_owner_terms``).
        tokenizer: the index's tokenizer (stems of query words and spellings).

    Both are the backend's: SQLite's FTS5 tokens and statistics, or PostgreSQL's.

    Thread-safe; reads only.
    """

    def __init__(self, terms: Vocabulary, tokenizer: Stemmer) -> None:
        self._terms = terms
        self._tokenizer = tokenizer

    def repair(self, words: Sequence[str], owners: Sequence[str] | None) -> list[Repair]:
        """The terms standing in for the ``words`` that no document of ``owners`` (None:
        every owner) holds, in the order of the words."""
        candidates = [w for w in words if _REPAIRABLE_WORD.fullmatch(w)]
        if not candidates:
            return []
        stems = [
            s[0] if len(s) == 1 else w
            for w, s in zip(candidates, self._tokenizer.stems(candidates), strict=True)
        ]
        held = self._terms.document_frequency(stems, owners)
        repaired: dict[str, Repair] = {}
        looked_at = 0
        for word, stem in zip(candidates, stems, strict=True):
            if stem in held:
                continue
            looked_at += 1
            if looked_at > MAX_REPAIRED_WORDS:
                break
            for term in self._nearest(word, owners):
                spelling = self._spelling(term)
                if spelling is not None and spelling not in words:
                    repaired.setdefault(term, Repair(term, spelling))
        return list(repaired.values())

    def _nearest(self, word: str, owners: Sequence[str] | None) -> list[str]:
        # The word itself first, then the word less one, two, three final letters (the
        # vocabulary holds porter stems), never shorter than four letters: the first form
        # with a neighbour in the vocabulary wins, its most common neighbours first.
        forms = [word[:n] for n in range(len(word), max(3, len(word) - 4), -1)]
        edits = {form: {t for t in _edits1(form) if len(t) >= 4} for form in forms}
        found = self._terms.document_frequency(set().union(*edits.values()), owners)
        for form in forms:
            near = [t for t in edits[form] if t in found]
            if near:
                near.sort(key=lambda t: (-found[t], t))
                return near[:MAX_REPAIRS_PER_WORD]
        return []

    def _spelling(self, term: str) -> str | None:
        # The vocabulary holds porter stems, and a query term is stemmed again: "coffe"
        # (from "coffee") would become "coff". Use the first spelling that stems back to
        # the term: the term itself, or with the final letters porter removed.
        spellings = [term, term + "e", term + "s"]
        if term.endswith("i"):
            spellings.insert(1, term[:-1] + "y")
        for spelling, stems in zip(spellings, self._tokenizer.stems(spellings), strict=True):
            if stems == (term,):
                return spelling
        return None
