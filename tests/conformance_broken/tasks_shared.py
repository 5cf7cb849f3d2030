"""Defect: the task tools answer every caller for every task (contract §13): with
authentication, another principal lists, reads, answers and cancels tasks it did not
start. The manager ignores the caller the task tools hand it."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from _base import build, serve

from robot_mcp_kit import TaskManager, TaskState
from robot_mcp_kit.models import InputAnswer, TaskEventPage, TaskInfo
from robot_mcp_kit.tasks import EVENTS_PAGE_MAX, Principal


class SharedTasks(TaskManager):
    def get(self, task_id: str, *, caller: Principal | None = None) -> TaskInfo | None:
        return super().get(task_id)

    def list(
        self, states: Collection[TaskState] | None = None, *, caller: Principal | None = None
    ) -> list[TaskInfo]:
        return super().list(states)

    def events(
        self,
        task_id: str,
        after_seq: int = 0,
        limit: int = EVENTS_PAGE_MAX,
        *,
        caller: Principal | None = None,
    ) -> TaskEventPage | None:
        return super().events(task_id, after_seq, limit)

    async def answer_input(
        self,
        task_id: str,
        answers: Mapping[str, InputAnswer | Mapping[str, Any]],
        *,
        caller: Principal | None = None,
    ) -> list[str] | None:
        return await super().answer_input(task_id, answers)

    async def cancel(self, task_id: str, *, caller: Principal | None = None) -> TaskInfo | None:
        return await super().cancel(task_id)


if __name__ == "__main__":
    serve(*build(manager_cls=SharedTasks))
