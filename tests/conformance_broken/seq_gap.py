"""Defect: every task's events skip seq 3 (1, 2, 4, 5, ...) (contract §3.3)."""

from _base import Relay, build, serve

from robot_mcp_kit.models import TaskEvent


class SkipSeqThree(Relay):
    async def post(self, event: TaskEvent) -> None:
        if event.seq >= 3:
            event = event.model_copy(update={"seq": event.seq + 1})
        await self.send(event)


if __name__ == "__main__":
    serve(*build(relay=SkipSeqThree))
