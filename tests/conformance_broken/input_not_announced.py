"""Defect: a task's question is never announced: input_required events are dropped
(contract §11.1), so the brain cannot know the task waits."""

from _base import Relay, build, serve

from robot_mcp_kit.models import TaskEvent


class DropQuestions(Relay):
    async def post(self, event: TaskEvent) -> None:
        if event.type != "input_required":
            await self.send(event)


if __name__ == "__main__":
    serve(*build(relay=DropQuestions))
