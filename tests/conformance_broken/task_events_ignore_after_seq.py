"""Defect: get_task_events ignores after_seq and always answers from seq 1 (optional §3.3).

A receiver repairing a gap after seq 4 would be handed events 1-4 again, and 5, 6 only if
they happen to fit the page: the optional clause's after_seq check must catch it.
"""

from __future__ import annotations

from typing import Any

from _base import build, serve

from robot_mcp_kit import TASK_EVENTS_TOOL_NAME
from robot_mcp_kit.fastmcp_ext import TASK_TOOL_DESCRIPTIONS, TaskIdArg
from robot_mcp_kit.tasks import current_principal

if __name__ == "__main__":
    mcp, manager, poster = build()
    mcp.remove_tool(TASK_EVENTS_TOOL_NAME)

    async def get_task_events(task_id: TaskIdArg, after_seq: int = 0) -> dict[str, Any]:
        # The defect: after_seq is not applied.
        page = manager.events(task_id, 0, caller=current_principal())
        if page is None:
            return {"error": "not_found", "detail": f"no task {task_id}"}
        return page.model_dump(mode="json")

    mcp.add_tool(
        get_task_events,
        name=TASK_EVENTS_TOOL_NAME,
        description=TASK_TOOL_DESCRIPTIONS[TASK_EVENTS_TOOL_NAME],
    )
    serve(mcp, manager, poster)
