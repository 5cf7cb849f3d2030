"""Defect: cancel_task answers cancelled and get_task says cancelled, but the body is never
cancelled: it keeps running and posting progress (contract §7, cancel must
asyncio-cancel the underlying task)."""

from __future__ import annotations

from typing import Any

from _base import build, serve

from robot_mcp_kit import TaskManager
from robot_mcp_kit.models import EventType, TaskInfo
from robot_mcp_kit.tasks import Principal


class CancelKeepsRunning(TaskManager):
    async def cancel(self, task_id: str, *, caller: Principal | None = None) -> TaskInfo | None:
        task = self._tasks.get(task_id)
        if task is None or self.get(task_id, caller=caller) is None:
            return None
        # Marks the task cancelled without ever cancelling its asyncio task.
        self._finish(task, "cancelled")
        return self._info(task)

    async def _emit(
        self, task: Any, type_: EventType, payload: dict[str, Any], *, terminal: bool = False
    ) -> None:
        # The kit drops a finished task's late reports; this server posts them anyway.
        await super()._emit(task, type_, payload, terminal=terminal or task.state == "cancelled")


if __name__ == "__main__":
    serve(*build(manager_cls=CancelKeepsRunning))
