"""Defect: takes 1 s to acknowledge each new event (contract §5.4: the time budget; the
matrix runs it with --time-budget 0.5). ``acknowledged`` counts the new events it took,
so a test can tell how many the suite posted before it stopped."""

import asyncio
from typing import Any

from _receiver_base import Receiver, serve


class Slow(Receiver):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.acknowledged = 0

    async def pause(self) -> None:
        await asyncio.sleep(1.0)
        self.acknowledged += 1


make = Slow

if __name__ == "__main__":
    serve(make)
