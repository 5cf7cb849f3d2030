"""The memory server's PostgreSQL schema: every table with its kind, the version and the
forward steps.

The tables are declared in :mod:`._tables` and put together here, in one
:class:`~._database.PgSchema` that :class:`~._database.PgDatabase` opens. Version 1 is the
first PostgreSQL schema; forward steps go in :data:`MIGRATIONS` as ``{n: step}``: 2 numbers
each id's lives (``processes.life``, and ``life``, ``robot``, ``shared`` on each kept
revision; :func:`to_lives`, decision 0029).
"""

from __future__ import annotations

from typing import Any

import psycopg
import psycopg.sql

from robot_mcp_memory.backends.postgres._database import PgMigrationStep, PgSchema
from robot_mcp_memory.backends.postgres._tables import (
    FLEET_TABLES,
    LESSON_TABLES,
    NEEDS,
    PROCESS_TABLES,
)
from robot_mcp_memory.processes import legacy_lives, revision_owner

__all__ = ["IDENTITY", "MIGRATIONS", "SCHEMA", "SCHEMA_VERSION", "to_lives"]

Conn = psycopg.Connection[Any]

IDENTITY = "robot-mcp-memory"
"""What ``store_meta`` says this database is."""

SCHEMA_VERSION = 2
"""The version of the PostgreSQL schema this code writes."""


def to_lives(conn: Conn) -> None:
    """Schema step 1 -> 2: ``processes.life``, and ``life``, ``robot`` and ``shared`` on
    every kept revision under the key ``(doc_id, life, revision)``; every revision kept.

    Version 1 numbered an id's revisions on across its lives, so each id's lives are told
    apart by the revisions that ended one (:func:`~robot_mcp_memory.processes.legacy_lives`); each
    revision's owner is read from its own frontmatter
    (:func:`~robot_mcp_memory.processes.revision_owner`; unreadable: no owner, the admin's only).
    """
    conn.execute("ALTER TABLE processes ADD COLUMN life BIGINT NOT NULL DEFAULT 1")
    conn.execute(
        "ALTER TABLE processes_revisions ADD COLUMN life BIGINT NOT NULL DEFAULT 1, "
        "ADD COLUMN robot TEXT, ADD COLUMN shared BOOLEAN"
    )
    for (name,) in conn.execute(
        "SELECT conname FROM pg_constraint WHERE conrelid = 'processes_revisions'::regclass "
        "AND contype = 'p'"
    ).fetchall():
        conn.execute(
            psycopg.sql.SQL("ALTER TABLE processes_revisions DROP CONSTRAINT {}").format(
                psycopg.sql.Identifier(name)
            )
        )
    kept: dict[str, list[tuple[int, str]]] = {}
    for doc_id, revision, reason in conn.execute(
        "SELECT doc_id, revision, reason FROM processes_revisions"
    ).fetchall():
        kept.setdefault(str(doc_id), []).append((int(revision), str(reason)))
    with conn.cursor() as cur:
        for doc_id, revisions in kept.items():
            lives, now = legacy_lives(revisions)
            cur.executemany(
                "UPDATE processes_revisions SET life = %s WHERE doc_id = %s AND revision = %s",
                [(life, doc_id, revision) for revision, life in lives.items()],
            )
            cur.execute("UPDATE processes SET life = %s WHERE id = %s", (now, doc_id))
            owners = []
            for revision, markdown in conn.execute(
                "SELECT revision, markdown FROM processes_revisions WHERE doc_id = %s",
                (doc_id,),
            ).fetchall():
                robot, shared = revision_owner(str(markdown))
                owners.append((robot, shared, doc_id, revision))
            cur.executemany(
                "UPDATE processes_revisions SET robot = %s, shared = %s "
                "WHERE doc_id = %s AND revision = %s",
                owners,
            )
    conn.execute("ALTER TABLE processes_revisions ADD PRIMARY KEY (doc_id, life, revision)")


MIGRATIONS: dict[int, PgMigrationStep] = {2: to_lives}

SCHEMA = PgSchema(
    IDENTITY,
    SCHEMA_VERSION,
    (*PROCESS_TABLES, *FLEET_TABLES, *LESSON_TABLES),
    migrations=MIGRATIONS,
    extensions=("vector",),
    needs=NEEDS,
)
