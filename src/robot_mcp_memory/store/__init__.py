"""The process store: :class:`ProcessStore`, the SQLite adapter of the processes port.

In the memory server "store" means this one thing; the SQLite file under it (a
:class:`robot_mcp_kit.store.SqliteStore` on :data:`robot_mcp_memory.db.SCHEMA`) is the
*index*.
"""

from __future__ import annotations

from robot_mcp_memory.store._process_store import ProcessStore
from robot_mcp_memory.store._writes import (
    Saved,
    append_outcome,
    document_terms,
    next_candidate,
    outcome_line,
    robot_documents_refusal,
    same_mission,
)

__all__ = [
    "ProcessStore",
    "Saved",
    "append_outcome",
    "document_terms",
    "next_candidate",
    "outcome_line",
    "robot_documents_refusal",
    "same_mission",
]
