"""The 18 memory tools: module-level handlers by group, and the one runner of every call.

:mod:`.processes`, :mod:`.fleet` and :mod:`.lessons` each hold their handlers
(``find_processes(memory, tenant, *, query, k, robot) -> dict``…) and a ``register(mcp,
runner)`` adding the wrappers; :class:`ToolRunner` runs every call and :func:`answer_for`
turns every failure into its answer.
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
    answer_for,
)

__all__ = ["ANSWER_SCHEMA", "ToolRunner", "answer_for", "fleet", "lessons", "processes"]
