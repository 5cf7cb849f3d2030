"""The memory server's PostgreSQL backend (``MEMORY_DATABASE_URL=postgresql://...``).

Adapters of the storage ports (:mod:`robot_mcp_memory.ports`) over one database:
:class:`~robot_mcp_memory.postgres._database.PgDatabase` holds the pool and opens the
schema (:mod:`robot_mcp_memory.postgres._schema`). Importing this package needs the
``postgres`` extra (psycopg 3 and psycopg_pool).
"""

from __future__ import annotations

from robot_mcp_memory.postgres._database import META_TABLE, PgDatabase, PgSchema, describe_url
from robot_mcp_memory.postgres._schema import SCHEMA

__all__ = ["META_TABLE", "SCHEMA", "PgDatabase", "PgSchema", "describe_url"]
