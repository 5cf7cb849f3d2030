"""Defect: cancelling an already cancelled task answers an error (contract §6.2)."""

from __future__ import annotations

from typing import Any

from _base import build, serve

from robot_mcp_kit import TaskInfo
from robot_mcp_kit.fastmcp_ext import TASK_TOOL_DESCRIPTIONS, TaskIdArg, add_start_tool
from robot_mcp_kit.tasks import current_principal

if __name__ == "__main__":
    mcp, manager, poster = build()
    mcp.remove_tool("cancel_task")
    cancelled: set[str] = set()

    async def cancel_task(task_id: TaskIdArg) -> TaskInfo | dict[str, Any]:
        if task_id in cancelled:
            return {"error": "conflict", "detail": f"{task_id} is already cancelled"}
        info = await manager.cancel(task_id, caller=current_principal())
        if info is None:
            return {"error": "not_found", "detail": f"no task {task_id}"}
        if info.state == "cancelled":
            cancelled.add(task_id)
        return info

    # The kit's registration (structured TaskInfo-or-error answers), so the only defect
    # is the one this file is about.
    add_start_tool(
        mcp, cancel_task, name="cancel_task", description=TASK_TOOL_DESCRIPTIONS["cancel_task"]
    )
    serve(mcp, manager, poster)
