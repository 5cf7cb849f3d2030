"""The kit's SQLite store machinery.

Declare each table once with its :class:`Kind`; open the file with :class:`SqliteStore`,
which migrates it forward, refuses what it must not write through, and routes each write
by kind — cold definition writes on the caller's thread, hot record writes on one writer
thread — with :meth:`SqliteStore.prune` as the only place rows are deleted by age or count.

See ``docs/decisions/0001-store-api.md`` for the contract.
"""

from __future__ import annotations

from robot_mcp_kit._exceptions import (
    DeclarationError,
    FlushTimeout,
    MigrationFailed,
    PruneRefused,
    SchemaMismatch,
    SchemaTooNew,
    StoreClosed,
    StoreError,
    StoreUnavailable,
    StoreUnreadable,
    UnknownTable,
)
from robot_mcp_kit.store._kinds import Kind, Table
from robot_mcp_kit.store._schema import META_TABLE, MigrationStep, Schema
from robot_mcp_kit.store._sqlite import SqliteStore
from robot_mcp_kit.store._writer import StoreStats

__all__ = [
    "META_TABLE",
    "DeclarationError",
    "FlushTimeout",
    "Kind",
    "MigrationFailed",
    "MigrationStep",
    "PruneRefused",
    "Schema",
    "SchemaMismatch",
    "SchemaTooNew",
    "SqliteStore",
    "StoreClosed",
    "StoreError",
    "StoreStats",
    "StoreUnavailable",
    "StoreUnreadable",
    "Table",
    "UnknownTable",
]
