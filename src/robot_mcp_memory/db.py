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
``store_meta``          definition   the file's schema version: its identity, not its history
======================  ===========  ============================================================

Nothing is pruned (``SCHEMA.pruned`` is empty): a learned process vanishing after a month
would be data loss. The fleet tables arrive with the fleet issue, as a migration.

The columns are spec §4's, plus ``shared``; NOT NULL and defaults are added where the
store always writes a value. Row conventions ``ProcessStore`` relies on:

- timestamps are text as :func:`robot_mcp_kit.models.format_ts` writes them;
- ``tags`` is a JSON array; ``processes_fts.tags`` holds the same text (the tokenizer
  splits on the JSON punctuation, so the tags are indexed as words);
- ``shared`` is 0/1 (a fleet-wide document, DESIGN §5);
- the rowid of a ``processes_fts`` row equals the rowid of its ``processes`` row: search
  joins the two on it and a document's index entry is found without scanning the index
  (its ``id`` column is kept, as the spec's DDL has it, for humans and for ``reindex``
  checks). ``VACUUM`` keeps rowids here (sqlite 3.40, checked), and ``reindex()``
  re-derives every entry from the rows in any case.
"""

from __future__ import annotations

from pathlib import Path

from robot_mcp_kit.store import Kind, Schema, SqliteStore, Table

__all__ = [
    "INDEX_FILENAME",
    "PROCESSES",
    "PROCESSES_FTS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "STORE_META",
    "open_index",
]

SCHEMA_VERSION = 1
"""The version of ``index.db`` this code writes."""

INDEX_FILENAME = "index.db"
"""The file's name inside ``MEMORY_DATA_DIR``."""

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
      shared INTEGER NOT NULL DEFAULT 0
    )
    """,
    indexes=("CREATE INDEX processes_robot ON processes (robot)",),
)

PROCESSES_FTS = Table(
    "processes_fts",
    Kind.DERIVED,
    """
    CREATE VIRTUAL TABLE processes_fts USING fts5(
      id UNINDEXED, title, task_pattern, tags, body, tokenize='porter unicode61'
    )
    """,
    derived_from="processes",
)

STORE_META = Table(
    "store_meta",
    Kind.DEFINITION,
    "CREATE TABLE store_meta (key TEXT PRIMARY KEY, value TEXT)",
)

SCHEMA = Schema(version=SCHEMA_VERSION, tables=(PROCESSES, PROCESSES_FTS, STORE_META))
"""``index.db`` as the kit opens it."""


def open_index(data_dir: str | Path, *, hot_queue_max: int = 10_000) -> SqliteStore:
    """Open (creating if missing) ``data_dir/index.db`` against :data:`SCHEMA`.

    ``data_dir`` is created if missing; ``hot_queue_max`` bounds the hot-write queue (the
    outcome counters). The kit's errors pass through: ``StoreUnreadable`` (names the path
    and the remedy), ``SchemaTooNew``, ``SchemaMismatch``, ``MigrationFailed``.
    """
    directory = Path(data_dir)
    directory.mkdir(parents=True, exist_ok=True)
    return SqliteStore(directory / INDEX_FILENAME, SCHEMA, hot_queue_max=hot_queue_max)
