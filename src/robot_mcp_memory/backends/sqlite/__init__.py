"""The SQLite backend: ``MEMORY_DATA_DIR`` with ``index.db`` and ``lessons.db``.

:class:`SqliteStorage` is the directory (its lock, its consistent copy, the snapshot a dump
reads); :class:`SqliteBackend` the opened store.
"""

from __future__ import annotations

from robot_mcp_memory.backends.sqlite._schema import SCHEMA_VERSION
from robot_mcp_memory.backends.sqlite._storage import SqliteBackend, SqliteStorage

__all__ = ["SCHEMA_VERSION", "SqliteBackend", "SqliteStorage"]
