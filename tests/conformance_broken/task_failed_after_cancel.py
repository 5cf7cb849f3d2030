"""Defect: cancelling a running task also posts a task_failed for it (contract §7)."""

from __future__ import annotations

from _base import NAME, Relay, build, serve

from robot_mcp_kit import TaskManager
from robot_mcp_kit.models import TaskEvent, TaskFailure, TaskInfo, new_event_id, utc_now
from robot_mcp_kit.tasks import Principal


class ReportsCancelAsFailure(TaskManager):
    async def cancel(self, task_id: str, *, caller: Principal | None = None) -> TaskInfo | None:
        before = self.get(task_id, caller=caller)
        info = await super().cancel(task_id, caller=caller)
        if before is not None and before.state == "running" and info is not None:
            relay = self.poster
            assert isinstance(relay, Relay)
            failure = TaskFailure(error_code="CANCELLED", message="The task was cancelled.")
            await relay.send(
                TaskEvent(
                    event_id=new_event_id(),
                    task_id=task_id,
                    server=NAME,
                    tool=info.tool,
                    type="task_failed",
                    seq=relay.last_seq.get(task_id, 0) + 1,
                    ts=utc_now(),
                    payload=failure.model_dump(mode="json"),
                )
            )
        return info


if __name__ == "__main__":
    serve(*build(manager_cls=ReportsCancelAsFailure))
