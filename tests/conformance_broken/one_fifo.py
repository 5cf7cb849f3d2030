"""Defect: every task's events wait in one FIFO queue for the whole process (contract §5.1).

Each task's events still go out in seq order, and retried on the schedule, but the next
event of any task is posted only once the one before it is acknowledged or given up: an
event the receiver keeps refusing holds back every other task's events for 10 minutes.
"""

import asyncio

from _base import Relay, build, serve

from robot_mcp_kit import EventPoster
from robot_mcp_kit.models import TaskEvent


class OneFifo(Relay):
    def __init__(self, poster: EventPoster) -> None:
        super().__init__(poster)
        self.queue: asyncio.Queue[TaskEvent] = asyncio.Queue()
        self.worker: asyncio.Task[None] | None = None

    async def post(self, event: TaskEvent) -> None:
        if self.worker is None:
            self.worker = asyncio.get_running_loop().create_task(self.drain())
        self.queue.put_nowait(event)

    async def drain(self) -> None:
        while True:
            event = await self.queue.get()
            await self.send(event)
            await self.poster.flush()  # the next event waits until this one is settled


if __name__ == "__main__":
    serve(*build(relay=OneFifo))
