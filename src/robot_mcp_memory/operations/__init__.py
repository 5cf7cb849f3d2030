"""The operator's commands on a store: ``backup``, ``restore``, ``dump``, ``load``.

:func:`backup_store` and :func:`restore_store` copy the SQLite files consistently while
the server serves (:mod:`._backup`); :class:`DataDirLock` is the lock a running server
holds on ``MEMORY_DATA_DIR``, which ``restore`` and ``load`` respect (:mod:`._lock`);
:func:`dump_memory` and :func:`load_memory` write and read the store as reviewable files
through the ports only, on any backend (:mod:`._dump`); on PostgreSQL, ``backup`` and
``restore`` are that format from one snapshot and its load into an empty database
(:func:`backup_database`, :func:`restore_database`).
The console script (:mod:`robot_mcp_memory.__main__`) calls these.
"""

from __future__ import annotations

from robot_mcp_memory._exceptions import OperationRefused, StoreInUse
from robot_mcp_memory.operations._backup import (
    BACKUP_MANIFEST,
    STORE_FILES,
    BackupReport,
    backup_store,
    require_sqlite,
    restore_store,
)
from robot_mcp_memory.operations._dump import (
    DUMP_MANIFEST,
    DumpReport,
    backup_database,
    dump_memory,
    load_memory,
    memory_to_dump,
    restore_database,
    snapshot_memory,
)
from robot_mcp_memory.operations._lock import LOCK_FILENAME, DataDirLock

__all__ = [
    "BACKUP_MANIFEST",
    "DUMP_MANIFEST",
    "LOCK_FILENAME",
    "STORE_FILES",
    "BackupReport",
    "DataDirLock",
    "DumpReport",
    "OperationRefused",
    "StoreInUse",
    "backup_database",
    "backup_store",
    "dump_memory",
    "load_memory",
    "memory_to_dump",
    "require_sqlite",
    "restore_database",
    "restore_store",
    "snapshot_memory",
]
