"""The memory server's PostgreSQL schema: every table with its kind, and the version.

The tables are declared next to the adapter that writes them (``_process_tables``,
``_fleet_tables``, ``_lesson_tables``) and put together here, in one :class:`PgSchema`
that :class:`~robot_mcp_memory.postgres._database.PgDatabase` opens. Version 1 is the
first PostgreSQL schema; forward steps go in ``MIGRATIONS`` as ``{n: step}``: 2 numbers
each id's lives (``processes.life``, and ``life``, ``robot``, ``shared`` on each kept
revision; :func:`~robot_mcp_memory.postgres._process_revisions.to_lives`, decision 0029).
"""

from __future__ import annotations

from robot_mcp_memory.postgres._database import PgMigrationStep, PgSchema
from robot_mcp_memory.postgres._fleet_tables import FLEET_TABLES
from robot_mcp_memory.postgres._lesson_tables import LESSON_TABLES
from robot_mcp_memory.postgres._process_revisions import to_lives
from robot_mcp_memory.postgres._process_tables import NEEDS, PROCESS_TABLES

__all__ = ["IDENTITY", "MIGRATIONS", "SCHEMA", "SCHEMA_VERSION"]

IDENTITY = "robot-mcp-memory"
"""What ``store_meta`` says this database is."""

SCHEMA_VERSION = 2
"""The version of the PostgreSQL schema this code writes."""

MIGRATIONS: dict[int, PgMigrationStep] = {2: to_lives}

SCHEMA = PgSchema(
    IDENTITY,
    SCHEMA_VERSION,
    (*PROCESS_TABLES, *FLEET_TABLES, *LESSON_TABLES),
    migrations=MIGRATIONS,
    extensions=("vector",),
    needs=NEEDS,
)
