"""The memory server's tables on PostgreSQL, each with its declared kind.

=========================  ==========  ========================================================
table                      kind        why
=========================  ==========  ========================================================
``processes``              definition  the documents (the columns of SQLite's ``processes``,
                                       ``shared`` a boolean) plus ``rid``, the row's number that
                                       every derived row refers to (``ON DELETE CASCADE``);
                                       ``revision``, ``recent_outcomes`` (the last
                                       ``STALE_WINDOW`` outcomes, ``s``/``f``) and
                                       ``last_success`` as on SQLite (schema version 5);
                                       ``life``, the life of its id the row is in (version 2)
``processes_revisions``    record      the versions a save, revert, merge or delete replaced
                                       (rendered markdown), each with its ``life`` and the
                                       ``robot`` and ``shared`` of the row it kept (version 2);
                                       the newest ``revisions_keep`` per id are kept, older
                                       ones deleted in the write's transaction
``processes_search``       derived     each document's owner, length in tokens and weighted
                                       ``tsvector`` (title A, task pattern B, tags C, body D;
                                       GIN-indexed) in the :data:`TS_CONFIG` configuration
``processes_postings``     derived     (term, owner, document) -> the term's column-weighted
                                       frequency, read from the ``tsvector``, and the
                                       document's length: bm25's postings, read alone
``processes_owner_terms``  derived     (term, owner) -> how many of the owner's documents hold
                                       it: each term's df and the vocabulary of typo repair
``processes_vectors``      derived     each document's two embeddings as pgvector ``vector``
                                       columns, with the model's name and dimension; created
                                       only where the ``vector`` extension is installed
=========================  ==========  ========================================================

:data:`TS_CONFIG` is the ``english`` configuration with the English snowball stemmer and
*no* stop words: PostgreSQL's English stop list drops "on", "off", "up", "down", "not"…,
the small words a robot's action turns on (the query side drops its own stop words,
:data:`robot_mcp_memory.processes.STOPWORDS`, and keeps those). Its dictionary and
configuration are created with the search table (the first statements of its
``indexes``: the kit's :class:`~robot_mcp_kit.store.Table` takes one ``CREATE TABLE`` as
its ``ddl``).

The registry's three DEFINITION tables (:data:`FLEET_TABLES`) and the lessons
(:data:`LESSONS`, the kit's ``params`` table) have SQLite's columns, so a store copied
between the backends answers the same: ids, scopes and keys are ``TEXT COLLATE "C"``
(ordered by code point like SQLite's ``BINARY``, whatever the database's default
collation); timestamps are the text :func:`robot_mcp_kit.models.format_ts` writes; a
robot's ``meta`` is the JSON text the validation produced (not ``jsonb``, which would
reorder keys and respell numbers); ``fleet_groups.self_improve`` is a ``BOOLEAN`` (NULL:
inherit); ``fleet_robots.group_id`` references ``fleet_groups`` (no cascade).
"""

from __future__ import annotations

from robot_mcp_kit.store import Kind, Table
from robot_mcp_memory.processes import BM25_WEIGHTS

__all__ = [
    "FLEET_GROUPS",
    "FLEET_ROBOTS",
    "FLEET_SETTINGS",
    "FLEET_TABLES",
    "LESSONS",
    "LESSON_TABLES",
    "NEEDS",
    "OWNER_SQL",
    "PROCESSES",
    "PROCESSES_OWNER_TERMS",
    "PROCESSES_POSTINGS",
    "PROCESSES_REVISIONS",
    "PROCESSES_REVISIONS_V1",
    "PROCESSES_SEARCH",
    "PROCESSES_V1",
    "PROCESSES_VECTORS",
    "PROCESS_TABLES",
    "TSVECTOR_SQL",
    "TS_CONFIG",
    "WEIGHT_SQL",
]

TS_CONFIG = "robot_english"
"""The text search configuration of every document and query word."""

OWNER_SQL = "CASE WHEN p.shared THEN 'shared' ELSE 'robot:' || p.robot END"
""":func:`robot_mcp_memory.processes.owner_key` over ``processes AS p``."""

TSVECTOR_SQL = " || ".join(
    f"setweight(to_tsvector('{TS_CONFIG}', p.{column}), '{label}')"
    for column, label in (("title", "A"), ("task_pattern", "B"), ("tags", "C"), ("body", "D"))
)
"""The weighted ``tsvector`` of ``processes AS p`` (title A, task pattern B, tags C, body D)."""

WEIGHT_SQL = (
    "CASE w "
    + " ".join(
        f"WHEN '{label}' THEN {weight!r}"
        for label, weight in zip("ABCD", BM25_WEIGHTS[1:], strict=True)
    )
    + " END"
)
"""A position's weight label ``w`` as its column's bm25 weight (SQLite's column weights)."""

PROCESSES = Table(
    "processes",
    Kind.DEFINITION,
    """
    CREATE TABLE processes (
      rid BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
      id TEXT NOT NULL UNIQUE,
      title TEXT NOT NULL,
      task_pattern TEXT NOT NULL DEFAULT '',
      tags TEXT NOT NULL DEFAULT '[]',
      robot TEXT NOT NULL DEFAULT 'unknown',
      created TEXT,
      updated TEXT,
      success_count BIGINT NOT NULL DEFAULT 0,
      failure_count BIGINT NOT NULL DEFAULT 0,
      last_used TEXT,
      source_mission_id TEXT,
      body TEXT NOT NULL,
      shared BOOLEAN NOT NULL DEFAULT false,
      revision BIGINT NOT NULL DEFAULT 1,
      recent_outcomes TEXT NOT NULL DEFAULT '',
      last_success TEXT,
      life BIGINT NOT NULL DEFAULT 1
    )
    """,
    indexes=("CREATE INDEX processes_robot ON processes (robot)",),
)

PROCESSES_REVISIONS = Table(
    "processes_revisions",
    Kind.RECORD,
    """
    CREATE TABLE processes_revisions (
      doc_id TEXT NOT NULL,
      revision BIGINT NOT NULL,
      replaced TEXT NOT NULL,
      reason TEXT NOT NULL,
      markdown TEXT NOT NULL,
      life BIGINT NOT NULL DEFAULT 1,
      robot TEXT,
      shared BOOLEAN,
      PRIMARY KEY (doc_id, life, revision)
    )
    """,
    time_column="replaced",
)

PROCESSES_V1 = Table(
    "processes",
    Kind.DEFINITION,
    """
    CREATE TABLE processes (
      rid BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
      id TEXT NOT NULL UNIQUE,
      title TEXT NOT NULL,
      task_pattern TEXT NOT NULL DEFAULT '',
      tags TEXT NOT NULL DEFAULT '[]',
      robot TEXT NOT NULL DEFAULT 'unknown',
      created TEXT,
      updated TEXT,
      success_count BIGINT NOT NULL DEFAULT 0,
      failure_count BIGINT NOT NULL DEFAULT 0,
      last_used TEXT,
      source_mission_id TEXT,
      body TEXT NOT NULL,
      shared BOOLEAN NOT NULL DEFAULT false,
      revision BIGINT NOT NULL DEFAULT 1,
      recent_outcomes TEXT NOT NULL DEFAULT '',
      last_success TEXT
    )
    """,
    indexes=("CREATE INDEX processes_robot ON processes (robot)",),
)
"""``processes`` as schema version 1 declared it (for building older databases)."""

PROCESSES_REVISIONS_V1 = Table(
    "processes_revisions",
    Kind.RECORD,
    """
    CREATE TABLE processes_revisions (
      doc_id TEXT NOT NULL,
      revision BIGINT NOT NULL,
      replaced TEXT NOT NULL,
      reason TEXT NOT NULL,
      markdown TEXT NOT NULL,
      PRIMARY KEY (doc_id, revision)
    )
    """,
    time_column="replaced",
)
"""``processes_revisions`` as schema version 1 declared it (for building older databases)."""

PROCESSES_SEARCH = Table(
    "processes_search",
    Kind.DERIVED,
    """
    CREATE TABLE processes_search (
      rid BIGINT PRIMARY KEY REFERENCES processes (rid) ON DELETE CASCADE,
      owner TEXT NOT NULL,
      tokens INTEGER NOT NULL,
      tsv TSVECTOR NOT NULL
    )
    """,
    derived_from="processes",
    indexes=(
        f"CREATE TEXT SEARCH DICTIONARY {TS_CONFIG}_stem (TEMPLATE = snowball, LANGUAGE = english)",
        f"CREATE TEXT SEARCH CONFIGURATION {TS_CONFIG} (COPY = english)",
        f"ALTER TEXT SEARCH CONFIGURATION {TS_CONFIG} "
        f"ALTER MAPPING REPLACE english_stem WITH {TS_CONFIG}_stem",
        "CREATE INDEX processes_search_owner ON processes_search (owner, tokens)",
        "CREATE INDEX processes_search_tsv ON processes_search USING GIN (tsv)",
    ),
)

PROCESSES_POSTINGS = Table(
    "processes_postings",
    Kind.DERIVED,
    """
    CREATE TABLE processes_postings (
      term TEXT NOT NULL,
      owner TEXT NOT NULL,
      rid BIGINT NOT NULL REFERENCES processes (rid) ON DELETE CASCADE,
      freq REAL NOT NULL,
      tokens INTEGER NOT NULL,
      PRIMARY KEY (term, owner, rid)
    )
    """,
    derived_from="processes",
    indexes=("CREATE INDEX processes_postings_rid ON processes_postings (rid)",),
)

PROCESSES_OWNER_TERMS = Table(
    "processes_owner_terms",
    Kind.DERIVED,
    """
    CREATE TABLE processes_owner_terms (
      term TEXT NOT NULL,
      owner TEXT NOT NULL,
      docs INTEGER NOT NULL,
      PRIMARY KEY (term, owner)
    )
    """,
    derived_from="processes",
)

PROCESSES_VECTORS = Table(
    "processes_vectors",
    Kind.DERIVED,
    """
    CREATE TABLE processes_vectors (
      rid BIGINT PRIMARY KEY REFERENCES processes (rid) ON DELETE CASCADE,
      model TEXT NOT NULL,
      dim INTEGER NOT NULL,
      head HALFVEC NOT NULL,
      doc HALFVEC NOT NULL
    )
    """,
    derived_from="processes",
)

PROCESS_TABLES: tuple[Table, ...] = (
    PROCESSES,
    PROCESSES_REVISIONS,
    PROCESSES_SEARCH,
    PROCESSES_POSTINGS,
    PROCESSES_OWNER_TERMS,
    PROCESSES_VECTORS,
)
NEEDS: dict[str, str] = {"processes_vectors": "vector"}
"""Table name -> the extension it needs (``vector``): created only where it is installed."""

FLEET_GROUPS = Table(
    "fleet_groups",
    Kind.DEFINITION,
    """
    CREATE TABLE fleet_groups (
      group_id TEXT COLLATE "C" PRIMARY KEY,
      name TEXT,
      customer TEXT,
      factory TEXT,
      self_improve BOOLEAN,
      created TEXT NOT NULL,
      updated TEXT NOT NULL
    )
    """,
)

FLEET_ROBOTS = Table(
    "fleet_robots",
    Kind.DEFINITION,
    """
    CREATE TABLE fleet_robots (
      robot_id TEXT COLLATE "C" PRIMARY KEY,
      group_id TEXT COLLATE "C" REFERENCES fleet_groups (group_id),
      name TEXT,
      meta TEXT NOT NULL DEFAULT '{}',
      registered TEXT NOT NULL,
      updated TEXT NOT NULL
    )
    """,
    indexes=("CREATE INDEX fleet_robots_group ON fleet_robots (group_id, robot_id)",),
)

FLEET_SETTINGS = Table(
    "fleet_settings",
    Kind.DEFINITION,
    'CREATE TABLE fleet_settings (key TEXT COLLATE "C" PRIMARY KEY, value TEXT)',
)

FLEET_TABLES: tuple[Table, ...] = (FLEET_GROUPS, FLEET_ROBOTS, FLEET_SETTINGS)

LESSONS = Table(
    "lessons",
    Kind.DEFINITION,
    """
    CREATE TABLE lessons (
      scope TEXT COLLATE "C" NOT NULL,
      key TEXT COLLATE "C" NOT NULL,
      value_json TEXT NOT NULL,
      success_count BIGINT NOT NULL DEFAULT 0,
      failure_count BIGINT NOT NULL DEFAULT 0,
      place TEXT,
      robot TEXT,
      created TEXT NOT NULL,
      updated TEXT NOT NULL,
      note TEXT,
      PRIMARY KEY (scope, key)
    )
    """,
)

LESSON_TABLES: tuple[Table, ...] = (LESSONS,)
