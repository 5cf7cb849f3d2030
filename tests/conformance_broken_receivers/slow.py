"""Defect: takes 1 s to acknowledge each new event (contract §5.4: the time budget; the
matrix runs it with --time-budget 0.5)."""

import asyncio

from _receiver_base import Receiver, serve


class Slow(Receiver):
    async def pause(self) -> None:
        await asyncio.sleep(1.0)


make = Slow

if __name__ == "__main__":
    serve(make)
