"""The rules of process documents that do not rank: what a save, a revision, a merge, an
outcome, an import and a near-copy are. Every backend's writes follow them, through
:class:`~robot_mcp_memory.processes.ProcessService`.

Records (what the service answers): :class:`Saved`, :class:`Imported`, :class:`Merged`,
:class:`Revision`, :class:`NearDuplicate`, :class:`DocState`. Rules: the collision rule's
ids (:func:`same_mission`, :func:`next_candidate`), the limits (:func:`check_terms`,
:func:`check_size`, :func:`robot_documents_refusal`), the outcome log
(:func:`outcome_line`, :func:`append_outcome`, :func:`outcome_lines`), the stale mark
(:attr:`DocState.stale`), the import verdict (:func:`import_verdict`), near-copies
(:func:`probe_terms`, :func:`near_copies`), a merge's reason (:func:`merge_reason`,
:func:`merged_from`) and the lives of an id (:func:`legacy_lives`, :func:`revision_owner`,
decision 0029).

Pure; thread-safe.
"""

from __future__ import annotations

import math
import re
import secrets
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from robot_mcp_kit.log import get_logger
from robot_mcp_memory._exceptions import DamagedRow, DocError, DocTooLarge
from robot_mcp_memory._limits import (
    MAX_DOC_BYTES,
    MAX_DOC_TERMS,
    MAX_ID_LENGTH,
    MAX_NOTE_CHARS,
    NEAR_DUPLICATE_PROBE_TERMS,
    NEAR_DUPLICATE_SIMILARITY,
    STALE_FAILURE_SHARE,
    STALE_MIN_OUTCOMES,
)
from robot_mcp_memory.processes._model import ProcessDoc
from robot_mcp_memory.processes._ranking import DocTerms
from robot_mcp_memory.processes._rows import Row, row_to_doc

__all__ = [
    "LIFE_ENDING_REASONS",
    "DocState",
    "Imported",
    "Merged",
    "NearDuplicate",
    "Revision",
    "Saved",
    "append_outcome",
    "check_size",
    "check_terms",
    "fits",
    "import_verdict",
    "legacy_lives",
    "merge_reason",
    "merged_from",
    "near_copies",
    "next_candidate",
    "outcome_line",
    "outcome_lines",
    "probe_quorum",
    "probe_terms",
    "revision_owner",
    "robot_documents_refusal",
    "same_mission",
]

_log = get_logger("robot_mcp_memory.store")

_SEQUENTIAL_SUFFIXES = 99  # id-2 … id-99, then random ones: nobody can fill the family
_RANDOM_SUFFIX_TRIES = 16

_OUTCOME_HEADING = re.compile(r"^##[ \t]+outcome log[ \t]*$", re.MULTILINE | re.IGNORECASE)
_SECTION_END = re.compile(r"^#{1,2}[ \t]", re.MULTILINE)
_OUTCOME_LINE = re.compile(r"^- \S+ (?:success|failure): .*$", re.MULTILINE)

LIFE_ENDING_REASONS = frozenset({"delete", "merged"})
"""The ``reason`` of a revision that was the last version of its life: the document was
deleted (by its robot or the admin), or merged away into another."""


# --- records --------------------------------------------------------------------------


@dataclass(frozen=True)
class Saved:
    """The outcome of a save (or a revert).

    ``doc`` is the document as stored (its final id, counters, timestamps); ``created`` is
    False when an existing document was updated; ``renamed_from`` is the id the caller
    asked for when the document was stored under a suffixed one (``-2``, ``-3``…);
    ``revision`` is the stored document's revision (a save that changed nothing leaves it).
    """

    doc: ProcessDoc
    created: bool
    renamed_from: str | None
    revision: int = 1


@dataclass(frozen=True)
class Imported:
    """What an import did: ``action`` is ``inserted``, ``skipped`` (the same document is
    stored under that id), ``conflict`` (another one is; nothing written) or ``suffixed``
    (stored under ``id``, a suffixed form of the document's id)."""

    action: str
    id: str


@dataclass(frozen=True)
class Merged:
    """The outcome of a merge: the kept document as stored, and the revision (of its life
    ``merged_life``) under which the merged-away document was kept (revert it to bring that
    document back)."""

    kept: Saved
    merged_id: str
    merged_revision: int
    merged_life: int = 1


@dataclass(frozen=True)
class Revision:
    """One kept earlier version of a document: its number, when it was replaced (or
    deleted) and by what (``save``, ``revert``, ``merge:<id>:<rev>``, ``merged``,
    ``delete``); the life of its id it belongs to; and who owned it then (``robot`` and
    ``shared`` of the version itself, which decide who may read it; ``robot`` None: not
    known, the admin's only)."""

    revision: int
    replaced: str
    reason: str
    life: int = 1
    robot: str | None = None
    shared: bool = False


@dataclass(frozen=True)
class NearDuplicate:
    """A stored document that is a near-copy of another: its id, title and similarity
    (cosine of the two documents' weighted term frequencies, 0..1)."""

    id: str
    title: str
    similarity: float


@dataclass(frozen=True)
class DocState:
    """What the store knows about a document beyond its markdown.

    ``revision`` is its current revision, ``life`` the life of its id it is in (1 for an
    id's first, decision 0029); ``recent`` its last
    :data:`~robot_mcp_memory._limits.STALE_WINDOW` outcomes, oldest first (``s``/``f``);
    ``last_success`` when it last succeeded (None: never, or before it was recorded).
    ``stale`` is True when at least ``STALE_MIN_OUTCOMES`` recent outcomes are recorded
    and more than ``STALE_FAILURE_SHARE`` of them failed: a mark, never a deletion.
    """

    revision: int
    recent: str
    last_success: str | None
    life: int = 1

    @property
    def stale(self) -> bool:
        """See the class docstring (the filter of a listing applies the same rule)."""
        failures = self.recent.count("f")
        return len(self.recent) >= STALE_MIN_OUTCOMES and failures > STALE_FAILURE_SHARE * len(
            self.recent
        )


# --- saves ----------------------------------------------------------------------------


def same_mission(stored: str | None, incoming: str | None) -> bool:
    """Whether a save may update a stored document in place: equal ``source_mission_id``,
    or either one missing."""
    return stored is None or incoming is None or stored == incoming


def _suffixed(base: str, n: int) -> str:
    suffix = f"-{n}"
    return base[: MAX_ID_LENGTH - len(suffix)].rstrip("-") + suffix


def next_candidate(base: str, n: int) -> str:
    """The id the collision rule tries ``n``-th: ``base-2`` … ``base-99``, then random.

    Past the sequential family the suffix is random (six hex digits), so no one — however
    many ids they hold — can fill every id another save would go to.

    Raises:
        DocError: ``reason="conflict"`` once the random tries are spent too.
    """
    if n <= _SEQUENTIAL_SUFFIXES:
        return _suffixed(base, n)
    if n > _SEQUENTIAL_SUFFIXES + _RANDOM_SUFFIX_TRIES:
        raise DocError(
            "id",
            "conflict",
            f"id {base!r}, its suffixed forms up to {_suffixed(base, _SEQUENTIAL_SUFFIXES)!r} "
            f"and {_RANDOM_SUFFIX_TRIES} random ones are all taken; choose a different id",
        )
    return base[: MAX_ID_LENGTH - 7].rstrip("-") + "-" + secrets.token_hex(3)


def check_terms(terms: DocTerms) -> DocTerms:
    """``terms``, refused past :data:`~robot_mcp_memory._limits.MAX_DOC_TERMS` distinct ones.

    Raises:
        DocTooLarge: ``field="document"``, ``unit="distinct words"``.
    """
    if terms.distinct > MAX_DOC_TERMS:
        raise DocTooLarge(
            terms.distinct,
            MAX_DOC_TERMS,
            unit="distinct words",
            detail=f"the document has {terms.distinct} distinct words; the limit is "
            f"{MAX_DOC_TERMS} per document: split it, or leave out generated text",
        )
    return terms


def check_size(doc: ProcessDoc, detail: str) -> None:
    """Refuse ``doc`` when its rendering is past
    :data:`~robot_mcp_memory._limits.MAX_DOC_BYTES` (``detail`` says why it grew).

    Raises:
        DocTooLarge: the rendered size and the limit.
    """
    size = len(doc.render().encode("utf-8", "surrogatepass"))
    if size > MAX_DOC_BYTES:
        raise DocTooLarge(size, detail=detail)


def fits(doc: ProcessDoc) -> bool:
    """Whether ``doc``'s rendering is within :data:`~robot_mcp_memory._limits.MAX_DOC_BYTES`."""
    return len(doc.render().encode("utf-8", "surrogatepass")) <= MAX_DOC_BYTES


def robot_documents_refusal(robot: str, owned: int, limit: int) -> DocTooLarge:
    """The refusal of a new document of ``robot``, which already owns ``owned``."""
    return DocTooLarge(
        owned + 1,
        limit,
        field="documents",
        unit="documents",
        detail=f"robot {robot!r} already has {owned} documents, the most one robot may "
        f"have ({limit}, MEMORY_ROBOT_MAX_DOCUMENTS): update an existing one (same id and "
        "source_mission_id) or delete one with delete_process",
    )


def import_verdict(row: Row, id: str, markdown: str, *, suffix: bool) -> Imported | None:
    """What an import answers when ``id`` is already taken by ``row``: ``skipped`` for the
    same document (its rendering equals ``markdown``), ``conflict`` for another one unless
    ``suffix`` (None: go on to the next free id)."""
    try:
        same = row_to_doc(row).render() == markdown
    except DamagedRow:
        same = False
    if same:
        return Imported("skipped", id)
    return None if suffix else Imported("conflict", id)


# --- the outcome log ------------------------------------------------------------------


def outcome_line(when: str, success: bool, note: str) -> str:
    """The Outcome log line ``- <ts> success|failure: <note>`` (whitespace collapsed, cut
    to :data:`~robot_mcp_memory._limits.MAX_NOTE_CHARS`)."""
    text = " ".join(note.split())
    if len(text) > MAX_NOTE_CHARS:
        text = text[: MAX_NOTE_CHARS - 1] + "…"
    return f"- {when} {'success' if success else 'failure'}: {text}"


def append_outcome(body: str, line: str) -> str:
    """``body`` with ``line`` appended under ``## Outcome log`` (created at the end if
    missing)."""
    heading = _OUTCOME_HEADING.search(body)
    if heading is None:
        return body.rstrip("\n") + "\n\n## Outcome log\n" + line + "\n"
    start = heading.end()
    following = _SECTION_END.search(body, start)
    end = following.start() if following else len(body)
    section = body[start:end].rstrip("\n")
    rest = body[end:]
    return body[:start] + section + "\n" + line + "\n" + ("\n" if rest else "") + rest


def outcome_lines(body: str) -> list[str]:
    """The ``- <ts> success|failure: <note>`` lines under a body's ``## Outcome log``."""
    heading = _OUTCOME_HEADING.search(body)
    if heading is None:
        return []
    following = _SECTION_END.search(body, heading.end())
    section = body[heading.end() : following.start() if following else len(body)]
    return _OUTCOME_LINE.findall(section)


# --- merges ---------------------------------------------------------------------------


def merge_reason(merged_id: str, merged_revision: int) -> str:
    """The reason under which a merge keeps the version of the document it merged into."""
    return f"merge:{merged_id}:{merged_revision}"


def merged_from(reason: str) -> tuple[str, int] | None:
    """``(merged_id, merged_revision)`` of a :func:`merge_reason`; None for any other."""
    if not reason.startswith("merge:"):
        return None
    merged_id, _, rev = reason[len("merge:") :].rpartition(":")
    return merged_id, int(rev) if rev.isdigit() else -1


# --- lives (decision 0029) ------------------------------------------------------------


def legacy_lives(kept: Sequence[tuple[int, str]]) -> tuple[dict[int, int], int]:
    """The lives of an id's revisions as a store kept them before lives, numbering an id's
    revisions on across its lives: ``kept`` is its ``(revision, reason)`` pairs. Returns
    each revision's life and the life a row of the id is in now.

    A life ends with a revision of :data:`LIFE_ENDING_REASONS`; the next revision, or the
    row, is in the next life (a deleted id brought back by a revert counts as a new life
    too: it cannot be told from a re-created one, and the stricter reading keeps the
    earlier versions to the admin). Both backends' migrations use it.
    """
    lives: dict[int, int] = {}
    life = 1
    for revision, reason in sorted(kept):
        lives[revision] = life
        if reason in LIFE_ENDING_REASONS:
            life += 1
    return lives, life


def revision_owner(markdown: str) -> tuple[str | None, bool]:
    """``(robot, shared)`` of a kept revision, read from its own frontmatter; ``(None,
    False)`` (an owner not known: the admin's only) when it cannot be read. For revisions
    kept before their owner was stored."""
    try:
        doc = ProcessDoc.parse(markdown)
    except DocError:
        _log.warning("process_revision_owner_unknown", reason="unreadable_markdown")
        return None, False
    return doc.robot, doc.shared


# --- near-copies ----------------------------------------------------------------------


def _cosine(a: dict[str, float], b: dict[str, float], a_norm: float) -> float:
    """The cosine of two sparse vectors, ``a``'s norm given (0 when either is empty)."""
    small, large = (a, b) if len(a) <= len(b) else (b, a)
    dot = sum(w * large[t] for t, w in small.items() if t in large)
    norm = a_norm * math.sqrt(sum(w * w for w in b.values()))
    return dot / norm if norm else 0.0


def probe_terms(terms: Collection[str], df: dict[str, int]) -> list[str]:
    """The terms of a document that pick its near-copy candidates: the
    :data:`~robot_mcp_memory._limits.NEAR_DUPLICATE_PROBE_TERMS` rarest by ``df`` (documents
    holding each) of those another document holds too (``df`` at least 2), ties by term.
    A candidate must hold at least half of them (:func:`probe_quorum`)."""
    probe = sorted((t for t in terms if df.get(t, 0) >= 2), key=lambda t: (df[t], t))
    return probe[:NEAR_DUPLICATE_PROBE_TERMS]


def probe_quorum(probe: Sequence[str]) -> int:
    """How many of the probe terms a near-copy candidate must hold: at least half."""
    return (len(probe) + 1) // 2


def near_copies(
    mine: dict[str, float], candidates: Collection[tuple[str, str, dict[str, float]]]
) -> list[NearDuplicate]:
    """The ``(id, title, weighted term frequencies)`` candidates whose cosine with ``mine``
    is at least :data:`~robot_mcp_memory._limits.NEAR_DUPLICATE_SIMILARITY`, most similar
    first (ties by id)."""
    norm = math.sqrt(sum(w * w for w in mine.values()))
    near = []
    for id, title, theirs in candidates:
        similarity = _cosine(mine, theirs, norm)
        if similarity >= NEAR_DUPLICATE_SIMILARITY:
            near.append(NearDuplicate(id, title, round(similarity, 4)))
    return sorted(near, key=lambda n: (-n.similarity, n.id))
