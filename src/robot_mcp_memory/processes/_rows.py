"""A document's stored row, read back as a document.

Every backend stores a document in the columns :data:`COLUMNS` names and reads it back
here, so both read a row the same way.

Reads are tolerant of a damaged row: a counter or timestamp the document model would
refuse (a REAL counter left by an overflow, a hand-edited date) is repaired on the way out
and logged as ``process_row_repaired``; a row that cannot be read at all raises
:class:`DamagedRow` from :func:`row_to_doc`, and :func:`readable` turns that into None
(logged as ``process_row_damaged``) for searches and lists.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import ValidationError

from robot_mcp_kit.log import get_logger
from robot_mcp_memory._exceptions import DamagedRow
from robot_mcp_memory._limits import MAX_COUNT
from robot_mcp_memory.processes._model import ProcessDoc

__all__ = ["COLUMNS", "Row", "readable", "row_to_doc", "tags_json"]

_log = get_logger("robot_mcp_memory.store")

COLUMNS = (
    "id, title, task_pattern, tags, robot, created, updated, success_count, "
    "failure_count, last_used, source_mission_id, body, shared"
)
"""The columns of ``processes`` a document is read from, in DDL order."""


class Row(Protocol):
    """A row read by column name: a ``sqlite3.Row``, or a dict from a PostgreSQL cursor."""

    def __getitem__(self, key: str, /) -> Any: ...


def tags_json(tags: Sequence[str]) -> str:
    """The ``tags`` column's text: a JSON array."""
    return json.dumps(list(tags), ensure_ascii=False)


# Columns a damaged value of which is replaced by its default on read (the document is
# still the document); a bad id, title or body makes the row unreadable instead.
_REPAIRABLE: dict[str, Any] = {
    "task_pattern": "",
    "tags": [],
    "robot": "unknown",
    "created": None,
    "updated": None,
    "last_used": None,
    "source_mission_id": None,
    "success_count": 0,
    "failure_count": 0,
}


def _row_fields(row: Row) -> dict[str, Any]:
    try:
        tags: Any = json.loads(row["tags"])
    except (TypeError, ValueError):
        tags = None  # repaired below
    return {
        "id": row["id"],
        "title": row["title"],
        "task_pattern": row["task_pattern"],
        "tags": tags,
        "robot": row["robot"],
        "created": row["created"],
        "updated": row["updated"],
        "success_count": _stored_count(row["success_count"]),
        "failure_count": _stored_count(row["failure_count"]),
        "last_used": row["last_used"],
        "source_mission_id": row["source_mission_id"],
        "shared": bool(row["shared"]),
        "body": row["body"],
    }


def _stored_count(value: Any) -> Any:
    # A REAL (an overflowed increment of an older version) or an out-of-range integer is
    # brought back into 0..MAX_COUNT; anything else is left for validation to judge.
    if isinstance(value, float):
        return int(min(max(value, 0.0), float(MAX_COUNT))) if value == value else 0
    if isinstance(value, int) and not 0 <= value <= MAX_COUNT:
        return min(max(value, 0), MAX_COUNT)
    return value


def row_to_doc(row: Row) -> ProcessDoc:
    """The row as a document, repairing damaged optional fields (logged); else DamagedRow."""
    fields = _row_fields(row)
    repaired: list[str] = []
    for _ in range(len(_REPAIRABLE) + 1):
        try:
            doc = ProcessDoc.model_validate(fields)
        except ValidationError as exc:
            bad = {str(error["loc"][0]) for error in exc.errors() if error.get("loc")}
            fixable = bad & _REPAIRABLE.keys()
            if not fixable or bad - fixable:
                raise DamagedRow(str(row["id"])) from None
            for name in fixable:
                fields[name] = _REPAIRABLE[name]
            repaired.extend(sorted(fixable))
            continue
        if repaired or fields["tags"] is None:
            _log.warning("process_row_repaired", id=row["id"], fields=",".join(repaired) or "tags")
        return doc
    raise DamagedRow(str(row["id"]))  # pragma: no cover - each pass repairs a field or raises


def readable(row: Row) -> ProcessDoc | None:
    """The row as a document, or None (logged) when it is damaged beyond repair."""
    try:
        return row_to_doc(row)
    except DamagedRow:
        _log.error("process_row_damaged", id=row["id"])
        return None
