"""Defect: progress seq 3 (past 50 %) reuses the event_id of seq 2 (contract §3.1).

The brain dedupes on event_id, so the reused event is acknowledged and then lost.
"""

from _base import Relay, build, serve

from robot_mcp_kit import EventPoster
from robot_mcp_kit.models import TaskEvent


class ReuseSeqTwoId(Relay):
    def __init__(self, poster: EventPoster) -> None:
        super().__init__(poster)
        self.seq_two_ids: dict[str, str] = {}

    async def post(self, event: TaskEvent) -> None:
        # Only short tasks' progress past half-way: a cancelled task (always early, and
        # cancelled at a moment the suite does not control) and terminal and trigger events
        # stay intact, so what the defect breaks is the same on every run.
        if event.seq == 2:
            self.seq_two_ids[event.task_id] = event.event_id
        elif (
            event.seq == 3
            and event.type == "progress"
            and float(event.payload.get("percent", 0)) >= 50
            and event.task_id in self.seq_two_ids
        ):
            event = event.model_copy(update={"event_id": self.seq_two_ids[event.task_id]})
        await self.send(event)


if __name__ == "__main__":
    serve(*build(relay=ReuseSeqTwoId))
