"""A store's schema: its version, its declared tables and the steps that migrate to it."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

from robot_mcp_kit._exceptions import DeclarationError, UnknownTable
from robot_mcp_kit.store._kinds import Kind, Table

__all__ = ["META_TABLE", "MigrationStep", "Schema"]

# The table the store itself owns: the file's schema version under key 'schema_version'.
# A schema may declare it too (the memory server does); either way it is one DEFINITION.
META_TABLE = Table(
    "store_meta",
    Kind.DEFINITION,
    "CREATE TABLE store_meta (key TEXT PRIMARY KEY, value TEXT)",
)

# The shadow tables sqlite creates for each virtual-table module, by suffix. They are
# sqlite's own: nobody declares a kind for them, and the startup check lets them be.
_SHADOW_SUFFIXES: Mapping[str, tuple[str, ...]] = {
    "fts5": ("_data", "_idx", "_content", "_docsize", "_config"),
    "fts4": ("_content", "_segments", "_segdir", "_docsize", "_stat"),
    "fts3": ("_content", "_segments", "_segdir", "_docsize", "_stat"),
    "rtree": ("_node", "_rowid", "_parent"),
}


class MigrationStep(Protocol):
    """One step of a migration: brings the file from version N-1 to N.

    It runs inside the transaction that also records version N, on the store's write
    connection; it must use ``conn.execute`` and never commit (no ``conn.commit()``, no
    ``executescript``, which commits first). If it raises, the transaction is rolled back
    and the file keeps version N-1.
    """

    def __call__(self, conn: sqlite3.Connection) -> None: ...


@dataclass(frozen=True)
class Schema:
    """The declaration a :class:`SqliteStore` opens a file against.

    Args:
        version: the version this code writes, ``>= 1``.
        tables: every table the file may hold (``store_meta`` is added if not declared).
        migrations: key N is the step from N-1 to N, for ``2 <= N <= version``.
        pruned: the RECORD tables this schema's owner prunes, by calling
            :meth:`SqliteStore.prune` on its own schedule (the outbox declares
            ``outbox_events``). A declaration for the reader, checked here: each name must be
            a declared RECORD. The store does not read it — nothing is pruned at open, and
            ``prune`` accepts any declared RECORD, listed or not.

    Raises:
        DeclarationError: at construction (a ``ValueError``) — a version below 1, a
            duplicate table, a ``pruned`` name that is not a declared RECORD, a DERIVED
            table whose source is not declared, a migration key outside ``2..version``.
    """

    version: int
    tables: tuple[Table, ...]
    migrations: Mapping[int, MigrationStep] = field(default_factory=dict)
    pruned: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if not isinstance(self.version, int) or self.version < 1:
            raise DeclarationError(f"schema version must be an int >= 1, got {self.version!r}")
        tables = tuple(self.tables)
        object.__setattr__(self, "tables", tables)
        object.__setattr__(self, "pruned", frozenset(self.pruned))
        object.__setattr__(self, "migrations", MappingProxyType(dict(self.migrations)))
        by_name: dict[str, Table] = {}
        for table in tables:
            if not isinstance(table, Table):
                raise DeclarationError(f"schema tables must be Table declarations, got {table!r}")
            if table.name.lower() in by_name:
                raise DeclarationError(f"table {table.name!r} is declared twice")
            by_name[table.name.lower()] = table
        for table in tables:
            if table.derived_from is not None and table.derived_from.lower() not in by_name:
                raise DeclarationError(
                    f"DERIVED table {table.name!r} is derived from {table.derived_from!r}, "
                    f"which is not declared (declared: {sorted(t.name for t in tables)})"
                )
        for name in sorted(self.pruned):
            declared = by_name.get(name.lower())
            if declared is None:
                raise DeclarationError(
                    f"pruned names {name!r}, which is not a declared table "
                    f"(declared: {sorted(t.name for t in tables)})"
                )
            if declared.kind is not Kind.RECORD:
                raise DeclarationError(
                    f"pruned names {name!r}, a {declared.kind.value} table; only a RECORD "
                    "table may be pruned"
                )
        for key in self.migrations:
            if not isinstance(key, int) or not 2 <= key <= self.version:
                raise DeclarationError(
                    f"migration key {key!r} is outside 2..{self.version}; key N is the step "
                    "from version N-1 to N"
                )
        shadows = self.not_ours()
        for table in tables:
            if table.name.lower() in shadows:
                raise DeclarationError(
                    f"table {table.name!r} is a shadow table sqlite creates for a declared "
                    "virtual table; do not declare it"
                )

    def table(self, name: str) -> Table:
        """Return the declared table called ``name`` (``store_meta`` included).

        Raises:
            UnknownTable: naming the declared tables, for a name that is not one of them
                (a ``KeyError``).
        """
        for table in self.all_tables():
            if table.name.lower() == name.lower():
                return table
        raise UnknownTable(
            f"{name!r} is not a declared table "
            f"(declared: {sorted(t.name for t in self.all_tables())})"
        )

    def all_tables(self) -> tuple[Table, ...]:
        """The declared tables plus ``store_meta`` when the schema does not declare it."""
        if any(t.name.lower() == META_TABLE.name for t in self.tables):
            return self.tables
        return (*self.tables, META_TABLE)

    def not_ours(self) -> frozenset[str]:
        """The names of sqlite's own shadow tables for the declared DERIVED virtual tables.

        For ``processes_fts`` declared as an fts5 DERIVED table this is
        ``processes_fts_data``, ``_idx``, ``_content``, ``_docsize`` and ``_config``
        (lower-cased). Derived from the declarations, so nobody lists them by hand.
        """
        names: set[str] = set()
        for table in self.tables:
            if table.kind is not Kind.DERIVED:
                continue
            for suffix in _SHADOW_SUFFIXES.get(table.module or "", ()):
                names.add(f"{table.name}{suffix}".lower())
        return frozenset(names)
