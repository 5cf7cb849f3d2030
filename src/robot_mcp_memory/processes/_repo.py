"""What the process documents need of storage: the :class:`ProcessRepo` port.

The port says what storage must do, not how; every rule (the collision rule, revisions
and lives, merges, outcomes, imports, near-copies, fusion and ranking) is
:class:`~robot_mcp_memory.processes.ProcessService`'s, written once over it.

- **Reads** go through :meth:`ProcessRepo.reading`: a :class:`ProcessReads` whose calls
  may share one snapshot (a backend may read each on its own), for the documents and
  their revisions, and for a find: the index's stems and vocabulary (typo repair), the
  lexical pool or top, the semantic pool, reliabilities and rows. Each search call takes
  the visibility filter (``robots``) and applies it in the store.
- **Writes** are transaction scripts: :meth:`ProcessRepo.write` runs a script over a
  :class:`ProcessTx` in one transaction (a backend may run it again when the store asks
  for a retry, so a script only reads and writes through the transaction). A row the
  script reads is locked until the transaction ends.
- **Outcomes** are counted by :meth:`ProcessRepo.count_outcome`: atomically, perhaps on a
  queue that never blocks the caller; a note is a script run in a write transaction.

A stored document has a **key** (an integer) that the derived data (index, vectors)
refers to; rows are read by column name: the document's columns
(:data:`~robot_mcp_memory.processes._rows.COLUMNS`), ``key``, ``revision``, ``life``,
``recent_outcomes`` and ``last_success`` where a method says so.

Storage errors are the memory server's own: :class:`~robot_mcp_memory.WriteConflict`,
:class:`~robot_mcp_kit.store.StoreUnavailable` (nothing written), and a document the
store cannot hold is a :class:`~robot_mcp_memory.DocError` (``invalid_value``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, TypeVar

from robot_mcp_memory.processes._embedding import Embedder, Pairs, Vectors
from robot_mcp_memory.processes._model import ProcessDoc
from robot_mcp_memory.processes._ranking import DocTerms, Phrase
from robot_mcp_memory.processes._rows import Row
from robot_mcp_memory.processes._typos import REPAIR_WEIGHT, Repair

__all__ = [
    "Counted",
    "Lexical",
    "ProcessReads",
    "ProcessRepo",
    "ProcessTx",
    "Scored",
    "Semantic",
]

T = TypeVar("T")

Robots = Collection[str] | None
"""The visibility filter: None for every document, else those robots' and the shared ones."""


@dataclass(frozen=True)
class Lexical:
    """What a find asks the lexical index.

    ``terms`` are the query's words (:func:`~robot_mcp_memory.processes.search_terms`),
    ``repairs`` the vocabulary terms standing in for its misspelt ones, ``owners`` the
    owners whose statistics the call may count (None: every owner), ``robots`` its
    visibility filter.
    """

    terms: tuple[str, ...]
    repairs: tuple[Repair, ...]
    owners: tuple[str, ...] | None
    robots: tuple[str, ...] | None

    def phrases(self, stems: Sequence[tuple[str, ...]]) -> list[Phrase]:
        """The phrases bm25 counts: each of the terms' index tokens (``stems``, in the
        terms' order) at full weight, then each repaired term at
        :data:`~robot_mcp_memory.processes.REPAIR_WEIGHT`."""
        phrases = [Phrase(token) for tokens in stems for token in tokens]
        return phrases + [Phrase(r.term, REPAIR_WEIGHT) for r in self.repairs]


@dataclass(frozen=True)
class Semantic:
    """What a find asks the vectors: the ``top`` visible documents (``robots``) by the
    better cosine of their two vectors with ``vector`` (made by ``model``), and the cosine
    of each of ``also`` (the lexical pool)."""

    model: Embedder
    vector: Vectors
    robots: tuple[str, ...] | None
    top: int
    also: tuple[int, ...]


class Scored(NamedTuple):
    """A document of the lexical top: its row, relevance, reliability and score."""

    row: Row
    relevance: float
    reliability: float
    score: float


class Counted(NamedTuple):
    """A counted outcome: the document's row, and whether the count is still on its way
    (``pending``: queued, not yet in ``row``'s counters; else ``row`` holds it)."""

    row: Row
    pending: bool


class ProcessReads(Protocol):
    """Reads of the process documents (see the module docstring)."""

    def row(self, id: str) -> Row | None:
        """The document's row (its columns), or None."""
        ...

    def owner(self, id: str) -> tuple[str, bool] | None:
        """``(robot, shared)`` of the document (never its body), or None."""
        ...

    def rows(self, *, robots: Robots, stale: bool | None, limit: int, offset: int) -> list[Row]:
        """A page of visible documents by id (bytewise), ``stale`` True/False keeping only
        the ones that are (are not) stale by :class:`~robot_mcp_memory.processes.DocState`'s
        rule."""
        ...

    def count(self, *, robots: Robots) -> int:
        """How many visible documents there are."""
        ...

    def states(self, ids: Collection[str]) -> list[Row]:
        """``id``, ``revision``, ``recent_outcomes``, ``last_success`` and ``life`` of each
        of ``ids`` that exists."""
        ...

    def lives(self, id: str) -> list[int]:
        """The lives of ``id`` with a row or a kept revision, oldest first."""
        ...

    def revisions(self, id: str, life: int | None) -> list[Row]:
        """The kept revisions of ``id``'s life ``life`` (None: its latest), newest first:
        ``revision``, ``replaced``, ``reason``, ``life``, ``robot``, ``shared`` and, where
        no owner was stored with it, ``markdown``."""
        ...

    def revision_markdown(self, id: str, revision: int, life: int | None) -> str | None:
        """The markdown of that kept revision, or None."""
        ...

    def current_at(self, id: str, revision: int, life: int | None) -> Row | None:
        """The document's row if it is at ``revision`` of ``life`` (None: any), else None."""
        ...

    # --- finding ----------------------------------------------------------------------

    def stems(self, words: Sequence[str]) -> list[tuple[str, ...]]:
        """Each word's tokens as the lexical index holds them."""
        ...

    def document_frequency(
        self, terms: Collection[str], owners: Sequence[str] | None
    ) -> dict[str, int]:
        """How many documents of ``owners`` (None: every owner) hold each of ``terms`` in
        the lexical index; absent terms are left out."""
        ...

    def lexical_top(self, query: Lexical, k: int) -> list[Scored]:
        """The ``k`` visible documents best by relevance x reliability (ties: smaller key),
        with their rows: relevance is bm25 by :mod:`~robot_mcp_memory.processes._ranking`'s
        rules over the query's owners."""
        ...

    def lexical_pool(self, query: Lexical, limit: int) -> dict[int, tuple[float, float]]:
        """The ``limit`` visible documents best by relevance: key -> (relevance,
        reliability)."""
        ...

    def semantic_pool(self, query: Semantic) -> tuple[dict[int, float], float, float]:
        """The query's documents by cosine (:class:`Semantic`), with the least and greatest
        cosine over every visible document (0, 0 when there are none)."""
        ...

    def reliabilities(self, keys: Collection[int], robots: Robots) -> dict[int, float]:
        """The reliability of each of ``keys`` that is visible."""
        ...

    def rows_of(self, keys: Collection[int], robots: Robots) -> dict[int, Row]:
        """The rows of each of ``keys`` that is visible."""
        ...

    # --- near-copies ------------------------------------------------------------------

    def index_terms(self, id: str) -> list[str]:
        """The terms the lexical index holds for ``id`` (none for a missing id)."""
        ...

    def holding(
        self, terms: Sequence[str], owners: Sequence[str] | None, at_least: int, other_than: str
    ) -> list[tuple[str, str]]:
        """``(id, title)`` of the documents of ``owners`` (None: every owner) other than
        ``other_than`` holding at least ``at_least`` of ``terms``, those holding most
        first (ties by id), at most
        :data:`~robot_mcp_memory._limits.NEAR_DUPLICATE_CANDIDATES`."""
        ...

    def term_frequencies(self, ids: Collection[str]) -> dict[str, dict[str, float]]:
        """Each document's weighted term frequencies as
        :meth:`ProcessRepo.count_terms` counts them (the same on every backend)."""
        ...


class ProcessTx(Protocol):
    """One write transaction (see the module docstring). Rows read here carry ``key``,
    the document's columns, ``revision``, ``life`` and ``last_success``, and are locked
    until the transaction ends."""

    def row(self, id: str) -> Row | None:
        """The document's row, locked; None when ``id`` is free."""
        ...

    def rows(self, ids: Collection[str]) -> dict[str, Row]:
        """The documents' rows, locked in id order (two scripts locking one pair never
        wait for each other in a circle)."""
        ...

    def insert(self, values: dict[str, Any], *, resume_life: bool) -> int | None:
        """Insert a document (``values`` by column) as its free ``id``: in a new life of
        the id (its highest kept life plus one) at revision 1, or with ``resume_life`` in
        its latest life after that life's kept revisions. Its key, or None when another
        transaction just took the id (read its row again)."""
        ...

    def update(self, key: int, values: dict[str, Any], *, bump: bool) -> None:
        """Replace the document's content columns (``values``; never its counters) and
        raise its revision by one when ``bump``."""
        ...

    def set_counters(self, key: int, values: dict[str, Any]) -> None:
        """Set ``success_count``, ``failure_count``, ``last_used``, ``last_success`` (the
        ones given)."""
        ...

    def delete(self, key: int) -> None:
        """Remove the document with its index entry and vectors."""
        ...

    def index(self, key: int, terms: DocTerms, vectors: Pairs | None) -> Row:
        """Bring the document's index entry and vectors (None: none) in step with its
        row; the row as stored."""
        ...

    def owned(self, robot: str) -> int:
        """How many documents ``robot`` owns, counted so that a concurrent script adding
        one of its documents waits for this transaction."""
        ...

    def latest_life(self, id: str) -> int:
        """The latest life of ``id``: its row's, else its highest kept (0: neither)."""
        ...

    def kept(self, id: str, revision: int, life: int) -> Row | None:
        """``markdown``, ``reason`` and ``replaced`` of that kept revision, or None."""
        ...

    def merged_markdown(self, id: str, revision: int, replaced: str) -> str | None:
        """The markdown a merge kept of the document it merged away (``reason`` merged,
        kept at ``replaced``), or None once pruned."""
        ...

    def keep_revision(self, row: Row, markdown: str, reason: str, replaced: str) -> None:
        """Keep the version ``row`` holds (rendered ``markdown``) under its life and
        revision with its owner; a version kept under that number before is replaced."""
        ...

    def prune_revisions(self, id: str, keep: int) -> None:
        """Delete ``id``'s kept revisions past the newest ``keep`` (by when they were
        replaced, then life and number)."""
        ...


class ProcessRepo(Protocol):
    """The process documents as stored (see the module docstring)."""

    @property
    def where(self) -> str:
        """The store, for messages."""
        ...

    def use_vectors(self, model: Embedder) -> bool:
        """Store ``model``'s vectors from now on; False when this store cannot hold vectors
        (it says why itself)."""
        ...

    def count_terms(self, title: str, task_pattern: str, tags: str, body: str) -> DocTerms:
        """A document's terms as the shared tokenizer counts them (``tags`` its JSON text);
        the same count on every backend."""
        ...

    def unstorable(self, doc: ProcessDoc) -> str | None:
        """The field of ``doc`` this store cannot hold, or None."""
        ...

    def reading(self) -> AbstractContextManager[ProcessReads]:
        """Reads (see :class:`ProcessReads`)."""
        ...

    def write(self, script: Callable[[ProcessTx], T]) -> T:
        """Run ``script`` in one transaction, committed when it returns, rolled back when
        it raises; its answer."""
        ...

    def count_outcome(
        self,
        id: str,
        success: bool,
        stamp: str,
        note: Callable[[ProcessTx, Row], Any] | None = None,
    ) -> Counted | None:
        """Count one outcome of ``id`` atomically: the saturating counter, ``last_used``
        and the recent outcomes to ``stamp``, ``last_success`` on a success. ``note``, when
        given, runs with the document's locked row in a write transaction (the count's, or
        one of its own after it). None for an unknown id."""
        ...

    def flush(self) -> None:
        """Wait until every counted outcome is in the rows."""
        ...

    def sync_vectors(self, model: Embedder, embed: Callable[[list[Row]], Pairs]) -> int:
        """Drop vectors of any other model, store ``embed(rows)`` for every document that
        has none (a batch of rows per transaction) and ready them for
        :meth:`ProcessReads.semantic_pool`; how many documents were embedded."""
        ...

    def rebuild_index(self) -> int:
        """Rebuild the lexical index from the rows and drop every vector (a sync embeds
        them again); how many documents were indexed."""
        ...

    def close(self) -> None:
        """Write what is queued and release what the repository holds. Idempotent."""
        ...
