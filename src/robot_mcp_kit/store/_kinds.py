"""Table kinds and table declarations.

Every table a store holds is declared once, as data: its name, its :class:`Kind` and the
one statement that creates it. Every check the store makes (the startup check, the prune
chokepoint, the row counts in the ``store_ready`` line) reads that declaration.

The kinds answer one question, "what does elapsed time do to this content?":

- ``RECORD`` — history (events, outcome counters). Prunable by age or count, written hot.
- ``DEFINITION`` — something a human or an armed process authored. Never removed by
  elapsed time; written cold (synchronously, never dropped).
- ``BELIEF`` — an observation that is only meaningful with the epoch it was made in;
  superseded by a newer epoch rather than aged out, so it is not prunable either.
- ``DERIVED`` — a projection of another table (a search index). It has no content of its
  own: rebuilt from its source, never pruned on its own, and a backup may skip it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from robot_mcp_kit._exceptions import DeclarationError

__all__ = ["Kind", "Table"]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""A plain SQL identifier; always ``fullmatch``-ed ("$" would also match before a final
newline, issue 9 finding 5)."""


class Kind(StrEnum):
    """What elapsed time does to a table's rows."""

    RECORD = "record"  # prunes by age or count; hot writes
    DEFINITION = "definition"  # never removed by elapsed time; cold writes
    BELIEF = "belief"  # carries the epoch it was observed in
    DERIVED = "derived"  # projection of another table: rebuilt, never pruned on its own


@dataclass(frozen=True)
class Table:
    """One declared table.

    Args:
        name: the table's name, a plain SQL identifier (it is quoted wherever the store
            builds SQL from it).
        kind: what elapsed time does to its rows.
        ddl: exactly one ``CREATE TABLE`` / ``CREATE VIRTUAL TABLE`` statement, run when a
            fresh file is created.
        derived_from: ``DERIVED`` only, and required there: the declared source table.
        time_column: ``RECORD`` only: the column ``prune(older_than_s=...)`` compares —
            unix seconds (INTEGER/REAL) or ISO-8601 UTC text as ``format_ts`` writes it.
            Also orders ``prune(keep_last=...)`` (rowid order without it).
        indexes: extra ``CREATE INDEX`` statements run with ``ddl`` on a fresh file.
        epoch_column: ``BELIEF`` only, and required there: the column holding the epoch
            the row was observed in (checked against the file at open).

    Raises:
        DeclarationError: at construction, for a declaration that contradicts its kind
            (a ``ValueError``).
    """

    name: str
    kind: Kind
    ddl: str
    derived_from: str | None = None
    time_column: str | None = None
    indexes: tuple[str, ...] = ()
    epoch_column: str | None = None

    def __post_init__(self) -> None:
        if not _IDENT.fullmatch(self.name):
            raise DeclarationError(
                f"table name {self.name!r} is not a plain SQL identifier "
                "(letters, digits and underscores, not starting with a digit)"
            )
        if self.name.lower().startswith("sqlite_"):
            raise DeclarationError(f"table name {self.name!r} is reserved by sqlite")
        object.__setattr__(self, "kind", Kind(self.kind))
        object.__setattr__(self, "indexes", tuple(self.indexes))
        head = " ".join(self.ddl.split()[:3]).upper()
        if not (head.startswith("CREATE TABLE") or head.startswith("CREATE VIRTUAL TABLE")):
            raise DeclarationError(
                f"table {self.name!r}: ddl must be one CREATE TABLE or CREATE VIRTUAL TABLE "
                f"statement, got {self.ddl[:40]!r}"
            )
        if self.kind is Kind.DERIVED:
            if not self.derived_from:
                raise DeclarationError(
                    f"table {self.name!r} is DERIVED and must name its source in derived_from"
                )
        elif self.derived_from is not None:
            raise DeclarationError(
                f"table {self.name!r} is {self.kind.value}; only a DERIVED table has "
                f"derived_from (got {self.derived_from!r})"
            )
        if self.time_column is not None and self.kind is not Kind.RECORD:
            raise DeclarationError(
                f"table {self.name!r} is {self.kind.value}; only a RECORD table has a "
                f"time_column (got {self.time_column!r})"
            )
        if self.kind is Kind.BELIEF:
            if not self.epoch_column:
                raise DeclarationError(
                    f"table {self.name!r} is a BELIEF and must name its epoch_column"
                )
        elif self.epoch_column is not None:
            raise DeclarationError(
                f"table {self.name!r} is {self.kind.value}; only a BELIEF table has an "
                f"epoch_column (got {self.epoch_column!r})"
            )
        for column in (self.time_column, self.epoch_column):
            if column is not None and not _IDENT.fullmatch(column):
                raise DeclarationError(
                    f"table {self.name!r}: column {column!r} is not a plain SQL identifier"
                )

    @property
    def is_virtual(self) -> bool:
        """True for a ``CREATE VIRTUAL TABLE`` declaration (fts5, rtree, ...)."""
        return " ".join(self.ddl.split()[:2]).upper() == "CREATE VIRTUAL"

    @property
    def module(self) -> str | None:
        """The virtual-table module (``fts5``, ``rtree``, ...), lower-cased; None if not virtual."""
        if not self.is_virtual:
            return None
        match = re.search(r"\bUSING\s+([A-Za-z0-9_]+)", self.ddl, re.IGNORECASE)
        return match.group(1).lower() if match else None
