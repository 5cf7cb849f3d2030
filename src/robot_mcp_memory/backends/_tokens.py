"""The tokenizer both backends count a document's terms with: FTS5's own, run on a scratch
table.

SQLite's index stores porter stems of unicode61 tokens (:data:`TOKENIZE`). Scoped ranking
and typo repair there need those very stems outside a MATCH — the stems of a query's
terms, the terms of a document and how often each occurs — and Python has no porter
stemmer that is guaranteed to agree with sqlite's. Both backends count a document's
distinct words (the limit) and its near-copies' similarity with the same tokens, so the
two answer alike. So :class:`Tokenizer` asks sqlite, as a library (no store is opened):
it inserts the text into an in-memory FTS5 table with the same ``tokenize`` option, reads
the tokens back through an ``fts5vocab`` ``instance`` view and rolls the insert back. The
answers are therefore exactly what ``processes_fts`` holds for the same text.

Cost: one in-memory insert and read per call (about 0.1 ms for a query, 0.3 ms for a
2 KiB document, 20 ms for a 256 KiB one). Each thread gets its own scratch connection.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from robot_mcp_memory.processes import COLUMN_WEIGHTS, DocTerms

__all__ = ["TOKENIZE", "Tokenizer"]

TOKENIZE = "porter unicode61"
"""The FTS5 ``tokenize`` option of SQLite's index; the shared count uses the same tokens."""


class Tokenizer:
    """FTS5's tokenizer (:data:`TOKENIZE`) as a function. Thread-safe:
    each thread uses its own in-memory scratch database."""

    def __init__(self) -> None:
        self._local = threading.local()

    @contextmanager
    def _scratch(self) -> Iterator[sqlite3.Connection]:
        """This thread's scratch database, inside a transaction that is rolled back: the
        scratch table is empty again after every call."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(":memory:", isolation_level=None)
            conn.execute(
                "CREATE VIRTUAL TABLE scratch USING fts5("
                f"title, task_pattern, tags, body, tokenize='{TOKENIZE}')"
            )
            conn.execute("CREATE VIRTUAL TABLE scratch_tokens USING fts5vocab(scratch, instance)")
            self._local.conn = conn
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("ROLLBACK")

    def stems(self, words: Sequence[str]) -> list[tuple[str, ...]]:
        """Each word's tokens as the index holds them, in order (usually one stem; none for
        a word with no letters or digits; several for a word the tokenizer splits)."""
        if not words:
            return []
        found: dict[int, list[tuple[int, str]]] = {}
        with self._scratch() as conn:
            conn.executemany(
                "INSERT INTO scratch (rowid, body) VALUES (?, ?)", list(enumerate(words, start=1))
            )
            for term, doc, offset in conn.execute("SELECT term, doc, offset FROM scratch_tokens"):
                found.setdefault(int(doc), []).append((int(offset), str(term)))
        return [tuple(t for _, t in sorted(found.get(i, []))) for i in range(1, len(words) + 1)]

    def stem(self, word: str) -> str | None:
        """The one token ``word`` is indexed as, or None when it is not exactly one token."""
        tokens = self.stems([word])[0]
        return tokens[0] if len(tokens) == 1 else None

    def document(self, title: str, task_pattern: str, tags: str, body: str) -> DocTerms:
        """The terms of a document's indexed columns (``tags`` as its JSON text, as the
        index holds it), each weighted by its column (:data:`COLUMN_WEIGHTS`)."""
        freq: dict[str, float] = {}
        tokens = 0
        with self._scratch() as conn:
            conn.execute(
                "INSERT INTO scratch (rowid, title, task_pattern, tags, body) "
                "VALUES (1, ?, ?, ?, ?)",
                (title, task_pattern, tags, body),
            )
            for term, column in conn.execute("SELECT term, col FROM scratch_tokens"):
                freq[term] = freq.get(term, 0.0) + COLUMN_WEIGHTS[column]
                tokens += 1
        return DocTerms(freq=freq, tokens=tokens)
