"""Defect: the task tools answer JSON strings, so structured clients get {"result": "<json>"}.

This breaks contract §6.4: the mcp SDK wraps a
``-> str`` tool's answer as ``{"result": <the JSON text>}`` in ``structuredContent`` and
declares ``{"result": string}`` as the output schema. Plain-text clients see no difference.
"""

import json
from typing import Any

from _base import build, serve

from robot_mcp_kit.fastmcp_ext import TASK_TOOL_DESCRIPTIONS
from robot_mcp_kit.tasks import current_principal

if __name__ == "__main__":
    mcp, manager, poster = build()
    for name in ("get_task", "cancel_task", "list_tasks"):
        mcp.remove_tool(name)

    async def get_task(task_id: str) -> str:
        info = manager.get(task_id, caller=current_principal())
        if info is None:
            return json.dumps({"error": "not_found", "detail": task_id})
        return info.model_dump_json()

    async def cancel_task(task_id: str) -> str:
        info = await manager.cancel(task_id, caller=current_principal())
        if info is None:
            return json.dumps({"error": "not_found", "detail": task_id})
        return json.dumps({"task_id": info.task_id, "state": info.state})

    async def list_tasks(states: list[str] | None = None) -> str:
        infos: list[Any] = manager.list(states, caller=current_principal())  # type: ignore[arg-type]
        return json.dumps({"tasks": [i.model_dump(mode="json") for i in infos]})

    mcp.add_tool(get_task, name="get_task", description=TASK_TOOL_DESCRIPTIONS["get_task"])
    mcp.add_tool(cancel_task, name="cancel_task", description=TASK_TOOL_DESCRIPTIONS["cancel_task"])
    mcp.add_tool(list_tasks, name="list_tasks", description=TASK_TOOL_DESCRIPTIONS["list_tasks"])
    serve(mcp, manager, poster)
