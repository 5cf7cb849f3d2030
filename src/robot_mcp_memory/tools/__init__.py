"""The 20 memory tools: module-level handlers by group, and the one runner of every call.

:mod:`.processes`, :mod:`.fleet` and :mod:`.lessons` each hold their handlers
(``find_processes(memory, tenant, *, query, k, robot) -> dict``…) and a ``register(mcp,
runner)`` adding the wrappers; :class:`ToolRunner` runs every call, each robot's within its
share of calls (:class:`~robot_mcp_memory.shares.CallShares`), and :func:`answer_for` turns
every failure into its answer; :func:`wire_bytes` / :func:`answer_bytes` count what an
answer puts on the wire. :data:`ADMIN_TOOLS` names the tools only the admin can call (a
scoped connection's ``tools/list`` leaves them out).
"""

from __future__ import annotations

from robot_mcp_memory.tools import (
    fleet,
    lessons,
    processes,
)
from robot_mcp_memory.tools._runner import (
    ANSWER_SCHEMA,
    ToolRunner,
    answer_bytes,
    answer_for,
    busy_answer,
    wire_bytes,
)

ADMIN_TOOLS = fleet.ADMIN_TOOLS | processes.ADMIN_TOOLS
"""Every tool a scoped (robot) connection can never call: they always answer ``forbidden``."""

__all__ = [
    "ADMIN_TOOLS",
    "ANSWER_SCHEMA",
    "ToolRunner",
    "answer_bytes",
    "answer_for",
    "busy_answer",
    "fleet",
    "lessons",
    "processes",
    "wire_bytes",
]
