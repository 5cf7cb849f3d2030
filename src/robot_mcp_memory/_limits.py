"""Every size and range limit of the memory server, defined once.

The tools, the document model and the store read these names; nothing else defines a
limit. Sizes are UTF-8 bytes of what the client *sent*, never of a re-rendered form, so a
refusal always quotes a size the client can check.

=======================  ==========================================================
limit                    what happens past it
=======================  ==========================================================
``MAX_DOC_BYTES``        ``save_process`` answers ``too_large``
``MAX_DOC_TERMS``        ``save_process`` answers ``too_large`` (distinct words)
``ROBOT_MAX_DOCUMENTS``  a robot token's ``save_process`` of a new document answers
                         ``too_large`` (the default of ``MEMORY_ROBOT_MAX_DOCUMENTS``)
``MAX_QUERY_BYTES``      ``find_processes`` searches the first 2 KiB, ``truncated``
``MAX_NOTE_BYTES``       ``record_outcome`` answers ``too_large``
``MAX_NOTE_CHARS``       an outcome note is cut to this many characters in the body
``MAX_LESSON_NOTE_BYTES``  ``record_params`` answers ``invalid`` (field ``note``)
``MAX_LABEL_CHARS``      a robot/group ``name``, ``customer``, ``factory`` is ``invalid``
``MAX_JSON_BYTES``       a robot's ``meta`` or a lesson's ``params`` is ``invalid``
``MAX_JSON_DEPTH``       ``meta`` / ``params`` nested deeper is ``invalid``
``MAX_K``                ``k`` is clamped to ``1..MAX_K``
``MAX_LIMIT``            ``limit`` is clamped to ``MAX_LIMIT``
``MAX_COUNT``            a counter in a document is ``invalid``; increments saturate
``MAX_YAML_DEPTH``       frontmatter nested deeper is ``invalid`` (checked pre-parse)
``MAX_ID_LENGTH``        a longer id is ``invalid``
``MAX_ANSWER_BYTES``     a find leaves markdown out, a list page stops early (the
                         default of ``MEMORY_MAX_ANSWER_BYTES``)
``ROBOT_MAX_CALLS``      a robot's further calls wait (``MEMORY_ROBOT_MAX_CALLS``)
``ROBOT_MAX_QUEUED``     a robot's further calls answer ``busy``
                         (``MEMORY_ROBOT_MAX_QUEUED``)
``ROBOT_TIME_SHARE``     a robot's next call waits for its time budget
                         (``MEMORY_ROBOT_TIME_SHARE``)
``ROBOT_BURST_S``        the running time a robot may use at once, before its share
``TRACE_QUERY_CHARS``    a trace span keeps no more of a ``find_processes`` query
                         (``MEMORY_TRACE_QUERY_CHARS``; 0: none of it)
``REVISIONS_KEEP``       older revisions of a document are pruned
                         (``MEMORY_REVISIONS_KEEP``)
``STALE_WINDOW``         only this many recent outcomes judge staleness
``STALE_MIN_OUTCOMES``   fewer recent outcomes never make a document stale
``STALE_FAILURE_SHARE``  more failures than this share of them mark it ``stale``
``NEAR_DUPLICATE_SIMILARITY``  a saved document this similar to another names it
``NEAR_DUPLICATE_CANDIDATES``  how many candidates are compared for near-copies
``NEAR_DUPLICATE_PROBE_TERMS``  how many rare terms of a saved document pick candidates
=======================  ==========================================================

``MAX_ANSWER_BYTES``, ``TRACE_QUERY_CHARS``, ``REVISIONS_KEEP`` and the three ``ROBOT_``
defaults named with a variable are what an operator may change through the environment
(:mod:`robot_mcp_memory.settings`); the others are fixed.
"""

from __future__ import annotations

import re

__all__ = [
    "MAX_ANSWER_BYTES",
    "MAX_COUNT",
    "MAX_DOC_BYTES",
    "MAX_DOC_TERMS",
    "MAX_ID_LENGTH",
    "MAX_JSON_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_K",
    "MAX_LABEL_CHARS",
    "MAX_LESSON_NOTE_BYTES",
    "MAX_LIMIT",
    "MAX_NOTE_BYTES",
    "MAX_NOTE_CHARS",
    "MAX_QUERY_BYTES",
    "MAX_TRACE_QUERY_CHARS",
    "MAX_YAML_DEPTH",
    "MAX_YAML_INDENT",
    "NEAR_DUPLICATE_CANDIDATES",
    "NEAR_DUPLICATE_PROBE_TERMS",
    "NEAR_DUPLICATE_SIMILARITY",
    "REVISIONS_KEEP",
    "ROBOT_BURST_S",
    "ROBOT_MAX_CALLS",
    "ROBOT_MAX_DOCUMENTS",
    "ROBOT_MAX_QUEUED",
    "ROBOT_TIME_SHARE",
    "STALE_FAILURE_SHARE",
    "STALE_MIN_OUTCOMES",
    "STALE_WINDOW",
    "TRACE_QUERY_CHARS",
    "clamp",
]

MAX_DOC_BYTES = 256 * 1024
"""Largest process document, in UTF-8 bytes of the markdown sent."""

MAX_DOC_TERMS = 10_000
"""Most distinct words (index terms) one document may have.

Each distinct word is a row of the per-owner statistics and of the index: the bound keeps
what one save can add to them, and the cost of that save, small. Prose of 256 KiB has
fewer; a document over it is made of generated or random words.
"""

ROBOT_MAX_DOCUMENTS = 10_000
"""Most documents one robot token may own (``MEMORY_ROBOT_MAX_DOCUMENTS`` sets it).

A save that would add one more answers ``too_large``; updates are always accepted. The
admin token and unscoped servers are not counted.
"""

MAX_QUERY_BYTES = 2 * 1024
"""A longer query is searched by its first ``MAX_QUERY_BYTES`` (DESIGN §5)."""

MAX_NOTE_BYTES = 4 * 1024
"""Longest outcome note accepted by ``record_outcome``."""

MAX_NOTE_CHARS = 500
"""An outcome note is cut to this many characters (one line in the Outcome log)."""

MAX_LESSON_NOTE_BYTES = 1024
"""Longest lesson note, in UTF-8 bytes, after its whitespace is collapsed to single spaces."""

MAX_LABEL_CHARS = 200
"""Longest robot or group ``name``, group ``customer`` or ``factory``."""

MAX_JSON_BYTES = 16 * 1024
"""Largest robot ``meta`` (and lesson ``params``), as compact UTF-8 JSON."""

MAX_JSON_DEPTH = 16
"""Deepest nesting of objects and arrays in ``meta`` (and lesson ``params``)."""

MAX_K = 50
"""Most results one ``find_processes`` returns."""

MAX_LIMIT = 500
"""Most summaries one ``list_processes`` page holds."""

MAX_COUNT = 2**31 - 1
"""Largest ``success_count`` / ``failure_count``.

Far beyond any real history, well inside SQLite's 64-bit INTEGER: an increment can never
overflow into a REAL (a REAL counter would make the row unreadable), and the hot
increment saturates here instead of growing.
"""

MAX_YAML_DEPTH = 32
"""Deepest nesting of lists and mappings the frontmatter may have."""

MAX_YAML_INDENT = 128
"""Widest leading indentation of a frontmatter line, in characters.

Block-style nesting needs indentation, so this bounds it before the YAML parser (whose
composer recurses once per level) ever sees the text.
"""

MAX_ID_LENGTH = 100
"""Longest process id, in characters."""

TRACE_QUERY_CHARS = 32
"""Default of how many leading characters of a ``find_processes`` query its trace span keeps.

Enough to tell "bring me the parcel from" from "where is the charging dock" in a trace
viewer; a query's rest, and every document's text, never reach a span or a metric
(decision 0026). At most :data:`MAX_TRACE_QUERY_CHARS`."""

MAX_TRACE_QUERY_CHARS = 256
"""The most ``MEMORY_TRACE_QUERY_CHARS`` may be set to."""

MAX_ANSWER_BYTES = 512 * 1024
"""Default bound on one ``find_processes`` / ``list_processes`` answer, in bytes on the wire.

Counted as the runner sends it: the JSON text *and* the ``structuredContent`` copy. A find
past it leaves the markdown of further results out (they stay listed, to be fetched with
``get_process``); a list page stops early with ``next_offset``. The best result's markdown
(and a list's first summary) is always included, so one answer is at most the larger of
this bound and one document's (a document is at most :data:`MAX_DOC_BYTES`).
"""

ROBOT_MAX_CALLS = 1
"""Default number of calls one robot token runs at once in each of its two lanes (the
document tools; the registry and lesson tools); further calls wait in the lane.

One: a call runs in a worker thread of the one server process, so each call a robot runs
at once takes CPU (and the GIL) from every other robot's calls. Measured with
``benchmarks/bench_fairness.py`` (decision 0021)."""

ROBOT_MAX_QUEUED = 8
"""Default number of calls of one robot token that may wait in each lane; past it a call
answers ``busy`` at once, without running."""

ROBOT_TIME_SHARE = 0.1
"""Default fraction of the time one robot token's calls may keep running, per lane, on
average (a budget refilled at this many seconds per second); a call starts once the
lane's budget is not negative. One robot's calls running back to back, even one at a
time, made another robot's find p95 about 3 x slower; at this share it was 1.5-1.7 x in
``benchmarks/bench_fairness.py`` (decision 0021)."""

ROBOT_BURST_S = 0.5
"""Seconds of running time a robot's lane may use at once (its full budget) before
``ROBOT_TIME_SHARE`` paces it: a mission's few calls (a find over 100 000 documents takes
about 0.1 s) never wait for budget."""


REVISIONS_KEEP = 20
"""Default number of earlier versions kept per document (``MEMORY_REVISIONS_KEEP``).

A document that a distillation rewrites after every mission changes a few times a day;
20 versions is weeks of its history, enough to undo a bad save or a merge noticed late,
while the table stays bounded at 20 x the documents (at most 256 KiB each). The newest
are kept; pruning is by count per document, never by age, so a document that rarely
changes keeps its old versions (decision 0027)."""

STALE_WINDOW = 10
"""How many of a document's most recent outcomes judge whether it is stale."""

STALE_MIN_OUTCOMES = 5
"""Fewer recent outcomes than this never mark a document stale: two failures of a new
process are not a trend."""

STALE_FAILURE_SHARE = 0.5
"""A document is ``stale`` when MORE than this share of its recent outcomes failed."""


NEAR_DUPLICATE_SIMILARITY = 0.8
"""A stored document whose weighted term frequencies have at least this cosine with a
saved one's is named among its ``near_duplicates``: two distillations of one mission
that differ in a step or two score 0.85-0.95, two processes of different tasks that
share the building's vocabulary stay under 0.6 (decision 0027)."""

NEAR_DUPLICATE_CANDIDATES = 5
"""How many candidate documents (those sharing most of the probe terms) are compared with a
saved one."""

NEAR_DUPLICATE_PROBE_TERMS = 8
"""How many of a saved document's rarest terms (held by at least one other document the
caller may read) pick the candidates: a near-copy holds nearly all of them."""


def clamp(value: int, low: int, high: int) -> int:
    """``value`` limited to ``low..high``."""
    return max(low, min(high, int(value)))


ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""A robot or group id, matched against the WHOLE string (``re.fullmatch``)."""
