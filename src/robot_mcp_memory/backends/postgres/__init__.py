"""The PostgreSQL backend (``MEMORY_DATABASE_URL=postgresql://...``): one database that
several replicas share. Importing it needs the ``postgres`` extra (psycopg 3 and
psycopg_pool).

:class:`PgStorage` is the database before anything is opened; :class:`PgBackend` the
opened store over one pool (:class:`~._database.PgDatabase`).
"""

from __future__ import annotations

from robot_mcp_memory.backends.postgres._storage import PgBackend, PgStorage

__all__ = ["PgBackend", "PgStorage"]
