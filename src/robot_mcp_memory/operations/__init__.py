"""The operator's commands on a store: ``backup``, ``restore``, ``dump``, ``load``.

:func:`backup` and :func:`restore` use the storage's own consistent copy of its files
where it has one (a data directory) and the dump format from one snapshot elsewhere (a
database server) (:mod:`._commands`); :func:`dump_memory` and :func:`load_memory` write
and read the store as reviewable files through the services only, on any backend
(:mod:`._dump`). The console script (:mod:`robot_mcp_memory.__main__`) calls these.
"""

from __future__ import annotations

from robot_mcp_memory._exceptions import OperationRefused, StoreInUse
from robot_mcp_memory.operations._commands import backup, restore
from robot_mcp_memory.operations._dump import (
    DUMP_MANIFEST,
    DumpReport,
    dump_memory,
    load_memory,
    memory_to_dump,
)

__all__ = [
    "DUMP_MANIFEST",
    "DumpReport",
    "OperationRefused",
    "StoreInUse",
    "backup",
    "dump_memory",
    "load_memory",
    "memory_to_dump",
    "restore",
]
