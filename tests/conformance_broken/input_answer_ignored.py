"""Defect: answer_task_input answers the task but does not hand the answer to it
(contract §11.2): the task waits on and nothing announces the answer."""

from typing import Any

from _base import build, serve

from robot_mcp_kit.tasks import current_principal

if __name__ == "__main__":
    mcp, manager, poster = build(inputs=False)

    @mcp.tool()
    async def answer_task_input(
        task_id: str, request_id: str, action: str, content: dict[str, Any] | None = None
    ) -> str:
        """Answer a question a task waits on (this one drops the answer)."""
        info = manager.get(task_id, caller=current_principal())
        return "{}" if info is None else info.model_dump_json()

    serve(mcp, manager, poster)
