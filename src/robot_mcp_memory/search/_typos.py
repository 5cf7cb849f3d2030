"""Typo repair: query words the index does not hold, matched to its vocabulary.

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
"""

from __future__ import annotations

import re
import string
import threading
from collections.abc import Sequence

from robot_mcp_kit.store import SqliteStore
from robot_mcp_memory.search._words import match_expression

__all__ = ["MAX_REPAIRED_WORDS", "MAX_REPAIRS_PER_WORD", "REPAIR_WEIGHT", "TypoRepair"]

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
