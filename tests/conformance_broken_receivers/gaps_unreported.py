"""Defect: takes a gap without noticing it (contract §5.3)."""

from typing import Any

from _receiver_base import Receiver, serve


class GapsUnreported(Receiver):
    def hook(self, server: str, task_id: str) -> dict[str, Any]:
        return {**super().hook(server, task_id), "gaps": []}


make = GapsUnreported

if __name__ == "__main__":
    serve(make)
