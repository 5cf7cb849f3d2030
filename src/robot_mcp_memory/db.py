"""``index.db``: the memory server's tables, each with its declared kind (memory spec §4).

Everything the memory service writes lives in one SQLite file, ``MEMORY_DATA_DIR/index.db``.
This module only *declares* it; the machinery — connections, the versioned open, the hot
writer thread, the prune chokepoint — is :mod:`robot_mcp_kit.store`. Nothing here opens a
connection or a transaction of its own.

======================  ===========  ============================================================
table                   kind         why
======================  ===========  ============================================================
``processes``           definition   a human (or a distillation they armed) authored it; the
                                     outcome counters are records *about* it and sit on its row
``processes_fts``       derived      the search index, a projection of ``processes``: rebuilt by
                                     ``ProcessStore.reindex()``, never pruned on its own; its five
                                     fts5 shadow tables are sqlite's and named by the kit
``processes_postings``  derived      per owner (``shared`` or ``robot:<id>``), each term's
                                     column-weighted frequency in each document: the
                                     statistics of scoped ranking (issue 18)
``processes_owner_terms``  derived   per term and owner, how many documents hold it: the
                                     vocabulary typo repair reads, and each term's df
``processes_lengths``   derived      each document's owner, length in tokens and term
                                     frequencies (what a rewrite or delete takes out again)
``processes_revisions`` record       the versions a document had before a save, a revert, a merge
                                     or a delete replaced them (rendered markdown, counters
                                     included), each with the life of its id it belongs to and
                                     its owner then (``robot``, ``shared``); the newest
                                     ``REVISIONS_KEEP`` per id are kept
                                     (``MEMORY_REVISIONS_KEEP``), older ones pruned through the
                                     kit's chokepoint in the write's transaction
``processes_vectors``   derived      each document's two embedding vectors (float32 blobs) with
                                     the model's name and dimension; recomputed by a save, by
                                     ``reindex()`` and, for a changed model, at open
``fleet_robots``        definition   an operator (or the robot itself) registered the robot: its
                                     group, name and ``meta`` (a JSON object)
``fleet_groups``        definition   an operator arranged the groups (customer and factory tags)
                                     and flipped a group's ``self_improve`` (NULL: inherit)
``fleet_settings``      definition   operator settings by key; ``global_self_improve`` ('1'/'0')
``store_meta``          definition   the file's schema version: its identity, not its history;
                                     declared by the kit itself (``Schema.all_tables()``), not here
======================  ===========  ============================================================

Only ``processes_revisions`` is pruned (by count per document, never by age): a learned
process vanishing after a month would be data loss, and a robot or group is there until an
operator removes it.

Versions: 1 held ``processes``, ``processes_fts`` and ``store_meta``; 2 adds the three
``fleet_*`` tables (:func:`_to_v2`, run by the kit when it opens a version-1 file, in one
transaction with the version bump); 3 adds ``processes_vocab`` and ``processes_vectors``
(:func:`_to_v3`) — empty at first, the vectors are computed when a server with an
embedder opens the file; 4 replaces ``processes_vocab`` (an ``fts5vocab`` view of the
whole index, which let typo repair read every group's words) by the three per-owner
statistics tables (:func:`_to_v4`), also empty at first: the store counts every document
into them when it opens the file (:meth:`robot_mcp_memory.store.ProcessStore.sync_terms`);
5 adds ``processes_revisions`` and three columns of ``processes`` (:func:`_to_v5`): its
``revision`` (1 for every existing document), ``recent_outcomes`` (the last
:data:`~robot_mcp_memory.limits.STALE_WINDOW` outcomes, oldest first, ``s``/``f``) and
``last_success`` (a timestamp, NULL before the first success), the last two written on the
hot path with the counters; 6 gives every document a ``life`` (:func:`_to_v6`): an id freed
by a delete or a merge and saved again starts a new life, whose revisions are numbered from
1 and never show an earlier life's (decision 0029). The step adds ``processes.life`` and
rebuilds ``processes_revisions`` with ``life``, ``robot`` and ``shared`` (primary key
``(doc_id, life, revision)``), keeping every revision: a version-5 file numbered an id's
revisions on across lives, so the step tells the lives apart by the revisions that ended
one (:func:`legacy_lives`). ``robot`` and ``shared`` stay NULL there: the store reads a
revision's owner from its own frontmatter when it lists it
(:func:`robot_mcp_memory.store.revision_owner`).
``fleet_robots.group_id`` references ``fleet_groups`` (the kit turns ``foreign_keys`` on),
so a robot can never name a group that does not exist. :mod:`robot_mcp_memory.fleet` is
the only writer of the fleet tables.

The columns of ``processes`` are spec §4's, plus ``shared``; the fleet tables' are spec §4's
``...`` filled in (timestamps, ``meta``, the group's ``customer`` and ``factory`` tags). NOT
NULL and defaults are added where the store always writes a value. Row conventions
``ProcessStore`` relies on:

- timestamps are text as :func:`robot_mcp_kit.models.format_ts` writes them;
- ``tags`` is a JSON array; ``processes_fts.tags`` holds the same text (the tokenizer
  splits on the JSON punctuation, so the tags are indexed as words);
- ``shared`` is 0/1 (a fleet-wide document, DESIGN §5);
- ``processes.life`` is the life of its id the row is in (1 for an id's first); a kept
  revision carries the life it was in, and the ``robot`` and ``shared`` of the row it
  kept (who could read it then);
- ``processes_vectors.doc_rowid`` is the rowid of its ``processes`` row, written in the
  same transaction as the row (and deleted with it); ``model``/``dim`` say which embedder
  made it, and a row of another model is recomputed rather than compared;
- ``processes_postings``, ``processes_owner_terms`` and ``processes_lengths`` are written
  in the same transaction as the row, with :data:`TOKENIZE`'s tokens
  (:mod:`robot_mcp_memory.search._term_index`);
- the rowid of a ``processes_fts`` row equals the rowid of its ``processes`` row: search
  joins the two on it and a document's index entry is found without scanning the index
  (its ``id`` column is kept, as the spec's DDL has it, for humans and for ``reindex``
  checks). ``VACUUM`` keeps rowids here (sqlite 3.40, checked), and ``reindex()``
  re-derives every entry from the rows in any case.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path

from robot_mcp_kit.store import Kind, MigrationStep, Schema, SqliteStore, Table

__all__ = [
    "CHECKPOINT_PAGES",
    "FLEET_GROUPS",
    "FLEET_ROBOTS",
    "FLEET_SETTINGS",
    "INDEX_FILENAME",
    "LIFE_ENDING_REASONS",
    "MIGRATIONS",
    "PROCESSES",
    "PROCESSES_FTS",
    "PROCESSES_LENGTHS",
    "PROCESSES_OWNER_TERMS",
    "PROCESSES_POSTINGS",
    "PROCESSES_REVISIONS",
    "PROCESSES_REVISIONS_V5",
    "PROCESSES_V1",
    "PROCESSES_VECTORS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "TOKENIZE",
    "WRITE_CACHE_KIB",
    "legacy_lives",
    "open_index",
]

SCHEMA_VERSION = 6
"""The version of ``index.db`` this code writes."""

INDEX_FILENAME = "index.db"
"""The file's name inside ``MEMORY_DATA_DIR``."""

# The processes table as versions 1-4 created it; version 5 adds three columns
# (_PROCESSES_COLUMNS_V5), version 6 one (_PROCESSES_LIFE_V6). Kept for what it was: tests
# build older files from it.
_PROCESSES_V1 = """
    CREATE TABLE processes (
      id TEXT PRIMARY KEY,
      title TEXT NOT NULL,
      task_pattern TEXT NOT NULL DEFAULT '',
      tags TEXT NOT NULL DEFAULT '[]',
      robot TEXT NOT NULL DEFAULT 'unknown',
      created TEXT,
      updated TEXT,
      success_count INTEGER NOT NULL DEFAULT 0,
      failure_count INTEGER NOT NULL DEFAULT 0,
      last_used TEXT,
      source_mission_id TEXT,
      body TEXT NOT NULL,
      shared INTEGER NOT NULL DEFAULT 0
    )
    """
_PROCESSES_ROBOT_INDEX = "CREATE INDEX processes_robot ON processes (robot)"

PROCESSES_V1 = Table("processes", Kind.DEFINITION, _PROCESSES_V1, indexes=(_PROCESSES_ROBOT_INDEX,))
"""``processes`` as schema versions 1 to 4 declared it (for building older files)."""

PROCESSES = Table(
    "processes",
    Kind.DEFINITION,
    """
    CREATE TABLE processes (
      id TEXT PRIMARY KEY,
      title TEXT NOT NULL,
      task_pattern TEXT NOT NULL DEFAULT '',
      tags TEXT NOT NULL DEFAULT '[]',
      robot TEXT NOT NULL DEFAULT 'unknown',
      created TEXT,
      updated TEXT,
      success_count INTEGER NOT NULL DEFAULT 0,
      failure_count INTEGER NOT NULL DEFAULT 0,
      last_used TEXT,
      source_mission_id TEXT,
      body TEXT NOT NULL,
      shared INTEGER NOT NULL DEFAULT 0,
      revision INTEGER NOT NULL DEFAULT 1,
      recent_outcomes TEXT NOT NULL DEFAULT '',
      last_success TEXT,
      life INTEGER NOT NULL DEFAULT 1
    )
    """,
    indexes=(_PROCESSES_ROBOT_INDEX,),
)

TOKENIZE = "porter unicode61"
"""The FTS5 ``tokenize`` option of the index; the per-owner statistics use the same tokens."""

PROCESSES_FTS = Table(
    "processes_fts",
    Kind.DERIVED,
    f"""
    CREATE VIRTUAL TABLE processes_fts USING fts5(
      id UNINDEXED, title, task_pattern, tags, body, tokenize='{TOKENIZE}'
    )
    """,
    derived_from="processes",
)

# Version 3 (issue 11). The v2 -> v3 step runs these very strings.
_PROCESSES_VOCAB_V3 = "CREATE VIRTUAL TABLE processes_vocab USING fts5vocab(processes_fts, row)"
_PROCESSES_VECTORS_V3 = """
    CREATE TABLE processes_vectors (
      doc_rowid INTEGER PRIMARY KEY,
      model TEXT NOT NULL,
      dim INTEGER NOT NULL,
      head BLOB NOT NULL,
      doc BLOB NOT NULL
    )
    """

PROCESSES_VECTORS = Table(
    "processes_vectors", Kind.DERIVED, _PROCESSES_VECTORS_V3, derived_from="processes"
)

# The fleet tables as version 2 creates them. The v1 -> v2 step runs these very strings:
# if a later version changes a table, its Table gets new ddl and a new step, and these
# stay what version 2 was.
_FLEET_GROUPS_V2 = """
    CREATE TABLE fleet_groups (
      group_id TEXT PRIMARY KEY,
      name TEXT,
      customer TEXT,
      factory TEXT,
      self_improve INTEGER CHECK (self_improve IN (0, 1)),
      created TEXT NOT NULL,
      updated TEXT NOT NULL
    )
    """
_FLEET_ROBOTS_V2 = """
    CREATE TABLE fleet_robots (
      robot_id TEXT PRIMARY KEY,
      group_id TEXT REFERENCES fleet_groups (group_id),
      name TEXT,
      meta TEXT NOT NULL DEFAULT '{}',
      registered TEXT NOT NULL,
      updated TEXT NOT NULL
    )
    """
_FLEET_ROBOTS_GROUP_INDEX_V2 = "CREATE INDEX fleet_robots_group ON fleet_robots (group_id)"
_FLEET_SETTINGS_V2 = "CREATE TABLE fleet_settings (key TEXT PRIMARY KEY, value TEXT)"

FLEET_GROUPS = Table("fleet_groups", Kind.DEFINITION, _FLEET_GROUPS_V2)
FLEET_ROBOTS = Table(
    "fleet_robots",
    Kind.DEFINITION,
    _FLEET_ROBOTS_V2,
    indexes=(_FLEET_ROBOTS_GROUP_INDEX_V2,),
)
FLEET_SETTINGS = Table("fleet_settings", Kind.DEFINITION, _FLEET_SETTINGS_V2)


def _to_v2(conn: sqlite3.Connection) -> None:
    """Migration step 1 -> 2: create the fleet tables (statements only, no commit)."""
    for ddl in (
        _FLEET_GROUPS_V2,
        _FLEET_ROBOTS_V2,
        _FLEET_ROBOTS_GROUP_INDEX_V2,
        _FLEET_SETTINGS_V2,
    ):
        conn.execute(ddl)


def _to_v3(conn: sqlite3.Connection) -> None:
    """Migration step 2 -> 3: the vocabulary view and the (empty) vectors table."""
    conn.execute(_PROCESSES_VOCAB_V3)
    conn.execute(_PROCESSES_VECTORS_V3)


# Version 4 (issue 18): per-owner statistics, so a scoped call counts only what it may read.
_PROCESSES_POSTINGS_V4 = """
    CREATE TABLE processes_postings (
      owner TEXT NOT NULL,
      term TEXT NOT NULL,
      doc_rowid INTEGER NOT NULL,
      freq REAL NOT NULL,
      PRIMARY KEY (owner, term, doc_rowid)
    ) WITHOUT ROWID
    """
_PROCESSES_OWNER_TERMS_V4 = """
    CREATE TABLE processes_owner_terms (
      term TEXT NOT NULL,
      owner TEXT NOT NULL,
      docs INTEGER NOT NULL,
      PRIMARY KEY (term, owner)
    ) WITHOUT ROWID
    """
_PROCESSES_LENGTHS_V4 = """
    CREATE TABLE processes_lengths (
      doc_rowid INTEGER PRIMARY KEY,
      owner TEXT NOT NULL,
      tokens INTEGER NOT NULL,
      terms TEXT NOT NULL
    )
    """
_PROCESSES_LENGTHS_OWNER_INDEX_V4 = (
    "CREATE INDEX processes_lengths_owner ON processes_lengths (owner, tokens)"
)

PROCESSES_POSTINGS = Table(
    "processes_postings", Kind.DERIVED, _PROCESSES_POSTINGS_V4, derived_from="processes"
)
PROCESSES_OWNER_TERMS = Table(
    "processes_owner_terms", Kind.DERIVED, _PROCESSES_OWNER_TERMS_V4, derived_from="processes"
)
PROCESSES_LENGTHS = Table(
    "processes_lengths",
    Kind.DERIVED,
    _PROCESSES_LENGTHS_V4,
    derived_from="processes",
    indexes=(_PROCESSES_LENGTHS_OWNER_INDEX_V4,),
)


def _to_v4(conn: sqlite3.Connection) -> None:
    """Migration step 3 -> 4: drop the fleet-wide vocabulary view, create the (empty)
    per-owner statistics tables; the store fills them when it opens the file."""
    conn.execute("DROP TABLE processes_vocab")
    for ddl in (
        _PROCESSES_POSTINGS_V4,
        _PROCESSES_OWNER_TERMS_V4,
        _PROCESSES_LENGTHS_V4,
        _PROCESSES_LENGTHS_OWNER_INDEX_V4,
    ):
        conn.execute(ddl)


# Version 5 (issue 22): revisions, and the recent outcomes that mark a stale document.
_PROCESSES_REVISIONS_V5 = """
    CREATE TABLE processes_revisions (
      doc_id TEXT NOT NULL,
      revision INTEGER NOT NULL,
      replaced TEXT NOT NULL,
      reason TEXT NOT NULL,
      markdown TEXT NOT NULL,
      PRIMARY KEY (doc_id, revision)
    )
    """
_PROCESSES_COLUMNS_V5 = (
    "ALTER TABLE processes ADD COLUMN revision INTEGER NOT NULL DEFAULT 1",
    "ALTER TABLE processes ADD COLUMN recent_outcomes TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE processes ADD COLUMN last_success TEXT",
)

PROCESSES_REVISIONS_V5 = Table(
    "processes_revisions", Kind.RECORD, _PROCESSES_REVISIONS_V5, time_column="replaced"
)
"""``processes_revisions`` as schema version 5 declared it (for building older files)."""


def _to_v5(conn: sqlite3.Connection) -> None:
    """Migration step 4 -> 5: the revisions table and the three new ``processes`` columns
    (every existing document is at revision 1, with no recent outcomes)."""
    conn.execute(_PROCESSES_REVISIONS_V5)
    for ddl in _PROCESSES_COLUMNS_V5:
        conn.execute(ddl)


# Version 6 (issue 32): lives. An id freed by a delete or a merge and saved again starts a
# new life; a revision is read under the owner it had.
_PROCESSES_REVISIONS_V6 = """
    CREATE TABLE processes_revisions (
      doc_id TEXT NOT NULL,
      revision INTEGER NOT NULL,
      replaced TEXT NOT NULL,
      reason TEXT NOT NULL,
      markdown TEXT NOT NULL,
      life INTEGER NOT NULL DEFAULT 1,
      robot TEXT,
      shared INTEGER,
      PRIMARY KEY (doc_id, life, revision)
    )
    """
_PROCESSES_LIFE_V6 = "ALTER TABLE processes ADD COLUMN life INTEGER NOT NULL DEFAULT 1"

PROCESSES_REVISIONS = Table(
    "processes_revisions", Kind.RECORD, _PROCESSES_REVISIONS_V6, time_column="replaced"
)

LIFE_ENDING_REASONS = frozenset({"delete", "merged"})
"""The ``reason`` of a revision that was the last version of its life: the document was
deleted (by its robot or the admin), or merged away into another."""


def legacy_lives(
    kept: Sequence[tuple[int, str]],
) -> tuple[dict[int, int], int]:
    """The lives of an id's revisions as a version-5 store kept them, which numbered an
    id's revisions on across its lives: ``kept`` is its ``(revision, reason)`` pairs.
    Returns each revision's life and the life a row of the id is in now.

    A life ends with a revision of :data:`LIFE_ENDING_REASONS`; the next revision, or the
    row, is in the next life (a deleted id that the admin brought back by a revert counts
    as a new life too: it cannot be told from a re-created one, and the stricter reading
    keeps the earlier versions to the admin). Pure; both backends' migrations use it.
    """
    lives: dict[int, int] = {}
    life = 1
    for revision, reason in sorted(kept):
        lives[revision] = life
        if reason in LIFE_ENDING_REASONS:
            life += 1
    return lives, life


def _to_v6(conn: sqlite3.Connection) -> None:
    """Migration step 5 -> 6: ``processes.life`` and the revisions rebuilt with ``life``,
    ``robot`` and ``shared`` under the key ``(doc_id, life, revision)``. Every revision is
    kept; each id's lives are told apart by :func:`legacy_lives`. ``robot`` and ``shared``
    stay NULL: the store reads such a revision's owner from its frontmatter."""
    conn.execute(_PROCESSES_LIFE_V6)
    conn.execute(_PROCESSES_REVISIONS_V6.replace("processes_revisions", "processes_revisions_v6"))
    ids = [str(r[0]) for r in conn.execute("SELECT DISTINCT doc_id FROM processes_revisions")]
    for doc_id in ids:
        kept = [
            (int(r[0]), str(r[1]))
            for r in conn.execute(
                "SELECT revision, reason FROM processes_revisions WHERE doc_id = ?", (doc_id,)
            )
        ]
        lives, now = legacy_lives(kept)
        for revision, life in lives.items():
            conn.execute(
                "INSERT INTO processes_revisions_v6 (doc_id, revision, replaced, reason, "
                "markdown, life) SELECT doc_id, revision, replaced, reason, markdown, ? "
                "FROM processes_revisions WHERE doc_id = ? AND revision = ?",
                (life, doc_id, revision),
            )
        conn.execute("UPDATE processes SET life = ? WHERE id = ?", (now, doc_id))
    conn.execute("DROP TABLE processes_revisions")
    conn.execute("ALTER TABLE processes_revisions_v6 RENAME TO processes_revisions")


MIGRATIONS: Mapping[int, MigrationStep] = {
    2: _to_v2,
    3: _to_v3,
    4: _to_v4,
    5: _to_v5,
    6: _to_v6,
}
"""Key N is the step from version N-1 to N (the kit runs them in order)."""

SCHEMA = Schema(
    version=SCHEMA_VERSION,
    tables=(
        PROCESSES,
        PROCESSES_FTS,
        PROCESSES_POSTINGS,
        PROCESSES_OWNER_TERMS,
        PROCESSES_LENGTHS,
        PROCESSES_VECTORS,
        PROCESSES_REVISIONS,
        FLEET_GROUPS,
        FLEET_ROBOTS,
        FLEET_SETTINGS,
    ),
    migrations=MIGRATIONS,
    pruned=frozenset({"processes_revisions"}),
)
"""``index.db`` as the kit opens it (the kit adds its own ``store_meta``)."""


WRITE_CACHE_KIB = 32 * 1024
"""Page cache of the write connection: a save touches a page of the per-owner statistics per
distinct word, and the pages it touches should be in memory (measured: 2-3x the saves/s)."""

CHECKPOINT_PAGES = 4_000
"""WAL pages (16 MiB at 4 KiB) before a commit checkpoints: a statistics page rewritten by
many saves is copied back to the file once per checkpoint."""


def open_index(data_dir: str | Path, *, hot_queue_max: int = 10_000) -> SqliteStore:
    """Open (creating if missing) ``data_dir/index.db`` against :data:`SCHEMA`.

    ``data_dir`` is created if missing; ``hot_queue_max`` bounds the hot-write queue (the
    outcome counters). The kit's errors pass through: ``StoreUnreadable`` (names the path
    and the remedy), ``SchemaTooNew``, ``SchemaMismatch``, ``MigrationFailed``.
    """
    directory = Path(data_dir)
    directory.mkdir(parents=True, exist_ok=True)
    return SqliteStore(
        directory / INDEX_FILENAME,
        SCHEMA,
        hot_queue_max=hot_queue_max,
        write_cache_kib=WRITE_CACHE_KIB,
        checkpoint_pages=CHECKPOINT_PAGES,
    )
