"""The process store: :class:`ProcessStore`, the SQLite adapter of the processes port.

In the memory server "store" means this one thing; the SQLite file under it (a
:class:`robot_mcp_kit.store.SqliteStore` on :data:`robot_mcp_memory.db.SCHEMA`) is the
*index*.
"""

from __future__ import annotations

from robot_mcp_memory._exceptions import RevisionConflict
from robot_mcp_memory.store._process_store import (
    DocState,
    NearDuplicate,
    ProcessStore,
    Revision,
    near_copies,
    probe_terms,
    revision_owner,
    stale_sql,
)
from robot_mcp_memory.store._writes import (
    Imported,
    Merged,
    Saved,
    append_outcome,
    document_terms,
    import_verdict,
    next_candidate,
    outcome_line,
    outcome_lines,
    robot_documents_refusal,
    same_mission,
)

__all__ = [
    "DocState",
    "Imported",
    "Merged",
    "NearDuplicate",
    "ProcessStore",
    "Revision",
    "RevisionConflict",
    "Saved",
    "append_outcome",
    "document_terms",
    "import_verdict",
    "near_copies",
    "next_candidate",
    "outcome_line",
    "outcome_lines",
    "probe_terms",
    "revision_owner",
    "robot_documents_refusal",
    "same_mission",
    "stale_sql",
]
