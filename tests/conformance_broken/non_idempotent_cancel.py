"""Defect: cancelling an already cancelled task answers an error (kit spec §3.3)."""

from __future__ import annotations

import json

from _base import build, serve

from robot_mcp_kit.fastmcp_ext import _CANCEL_TASK_DOC, _TaskIdArg

if __name__ == "__main__":
    mcp, manager, poster = build()
    mcp.remove_tool("cancel_task")
    cancelled: set[str] = set()

    async def cancel_task(task_id: _TaskIdArg) -> str:
        if task_id in cancelled:
            return json.dumps({"error": "conflict", "detail": f"{task_id} is already cancelled"})
        info = await manager.cancel(task_id)
        if info is None:
            return json.dumps({"error": "not_found", "detail": f"no task {task_id}"})
        if info.state == "cancelled":
            cancelled.add(task_id)
        return json.dumps({"task_id": info.task_id, "state": info.state})

    mcp.add_tool(cancel_task, name="cancel_task", description=_CANCEL_TASK_DOC)
    serve(mcp, manager, poster)
