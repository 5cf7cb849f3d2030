"""Defect: right after task_done the server posts one more progress event (contract §3.4)."""

from _base import Relay, build, serve

from robot_mcp_kit.models import TaskEvent, new_event_id


class TalksAfterDone(Relay):
    async def post(self, event: TaskEvent) -> None:
        await self.send(event)
        if event.type == "task_done":
            late = event.model_copy(
                update={
                    "event_id": new_event_id(),
                    "seq": event.seq + 1,
                    "type": "progress",
                    "payload": {"percent": 100, "note": "one more thing"},
                }
            )
            await self.send(late)


if __name__ == "__main__":
    serve(*build(relay=TalksAfterDone))
