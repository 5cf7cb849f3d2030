"""The 20 memory tools: module-level handlers by group, and the one runner of every call.

``processes``, ``fleet`` and ``lessons`` (:mod:`._processes`, :mod:`._fleet`,
:mod:`._lessons`) each hold their handlers
(``find_processes(memory, tenant, *, query, k, robot) -> dict``…) and a ``register(mcp,
runner)`` adding the wrappers; :class:`ToolRunner` runs every call, each robot's within its
share of calls (:class:`~robot_mcp_memory.shares.CallShares`), and :func:`answer_for` turns
every failure into its answer; :func:`wire_bytes` / :func:`answer_bytes` count what an
answer puts on the wire. :data:`ADMIN_TOOLS` names the tools only the admin can call (a
scoped connection's ``tools/list`` leaves them out).
"""

from __future__ import annotations

from robot_mcp_memory.tools import _fleet as fleet
from robot_mcp_memory.tools import _lessons as lessons
from robot_mcp_memory.tools import _processes as processes
from robot_mcp_memory.tools._runner import ToolRunner, answer_for

ADMIN_TOOLS = fleet.ADMIN_TOOLS | processes.ADMIN_TOOLS
"""Every tool a scoped (robot) connection can never call: they always answer ``forbidden``."""

__all__ = [
    "ADMIN_TOOLS",
    "ToolRunner",
    "answer_for",
    "fleet",
    "lessons",
    "processes",
]
