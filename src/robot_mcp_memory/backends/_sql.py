"""What the two SQL backends spell differently, said once, and the session SQL runs in.

:class:`Dialect` names each difference (the placeholder, the row lock, the list of a
group's robots); SQL both backends share is written once with ``?`` placeholders and run
through a :class:`Session`, which each backend implements over its own connections and
whose errors are the memory server's (:class:`~robot_mcp_memory.WriteConflict`,
:class:`~robot_mcp_memory.MissingReference`), never its driver's. :class:`Sessions` hands
them out: a read, a write (one transaction), a consistent read of several statements.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["POSTGRES", "SQLITE", "Dialect", "Row", "Session", "Sessions"]


class Row(Protocol):
    """A row read by column name: a ``sqlite3.Row``, or a dict from a psycopg cursor."""

    def __getitem__(self, key: str, /) -> Any: ...


@dataclass(frozen=True)
class Dialect:
    """How one backend spells what the shared SQL needs.

    Args:
        name: for messages.
        marker: the placeholder the driver takes (shared SQL is written with ``?``).
        for_update: appended to a SELECT that locks its rows until the transaction ends
            (empty where the transaction holds the whole store).
        id_list: an aggregate of ``r.robot_id`` values (a group's members).
        key: the column a process document's derived rows refer to.
        bytewise: what orders text by its bytes (SQLite's default collation does).
        smallest, largest: the two-argument minimum and maximum.
        any_of: ``column`` is one of the values bound to the one placeholder it holds
            (:meth:`values` spells the parameter).
        tail: the last ``{n}`` characters of ``{text}``.
        holds_nul: whether its text can hold a NUL character.
    """

    name: str
    marker: str
    for_update: str
    id_list: str
    key: str
    bytewise: str
    smallest: str
    largest: str
    any_of: str
    tail: str
    holds_nul: bool

    def one_of(self, column: str, values: Collection[Any]) -> tuple[str, Any]:
        """``column`` is one of ``values``: the SQL (one ``?``) and its parameter."""
        return self.any_of.format(column=column), self.values(values)

    def values(self, values: Collection[Any]) -> Any:
        """``values`` as the one parameter of :attr:`any_of`."""
        if self.marker == "?":
            return json.dumps(list(values), ensure_ascii=False)
        return list(values)

    def sql(self, text: str) -> str:
        """``text`` (``?`` placeholders) in this backend's spelling."""
        if self.marker == "?":
            return text
        return text.replace("%", "%%").replace("?", self.marker)

    @staticmethod
    def ids(value: Any) -> tuple[str, ...]:
        """The sorted ids an :attr:`id_list` aggregate read back (none for NULL)."""
        if not value:
            return ()
        if isinstance(value, str):
            return tuple(sorted(value.split(",")))
        return tuple(sorted(str(v) for v in value))


SQLITE = Dialect(
    name="SQLite",
    marker="?",
    for_update="",
    id_list="group_concat(r.robot_id, ',')",
    key="rowid",
    bytewise="",
    smallest="min",
    largest="max",
    any_of="{column} IN (SELECT value FROM json_each(?))",
    tail="substr({text}, -{n})",
    holds_nul=True,
)
"""SQLite: every write transaction holds the whole file (``BEGIN IMMEDIATE``)."""

POSTGRES = Dialect(
    name="PostgreSQL",
    marker="%s",
    for_update=" FOR UPDATE",
    id_list="array_agg(r.robot_id ORDER BY r.robot_id)",
    key="rid",
    bytewise=' COLLATE "C"',
    smallest="LEAST",
    largest="GREATEST",
    any_of="{column} = ANY(?)",
    tail="right({text}, {n})",
    holds_nul=False,
)
"""PostgreSQL: rows are locked one by one (``SELECT ... FOR UPDATE``)."""


class Session(Protocol):
    """Statements on one backend, in its :class:`Dialect` (``?`` placeholders).

    Raises, for every method:
        WriteConflict: a unique key the store keeps was met (nothing was written).
        MissingReference: a foreign key named a missing record (nothing was written).
        robot_mcp_kit.store.StoreUnavailable: the store cannot be reached.
    """

    @property
    def dialect(self) -> Dialect: ...

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None: ...

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]: ...

    def run(self, sql: str, params: Sequence[Any] = ()) -> int: ...

    def many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None: ...


class Sessions(Protocol):
    """Where a backend's sessions come from.

    ``read()``: statements that each read the store as it is (not for writes);
    ``write()``: one transaction, committed when the block ends, rolled back when it
    raises; ``consistent()``: several reads of one moment.
    """

    def read(self) -> AbstractContextManager[Session]: ...

    def write(self) -> AbstractContextManager[Session]: ...

    def consistent(self) -> AbstractContextManager[Session]: ...
