"""Defect: acknowledges every event but loses those whose payload is over 4 KiB (a column
too narrow, the failed insert swallowed) (contract §5.4)."""

import json
from typing import Any

from _receiver_base import Receiver, serve


class LossyStore(Receiver):
    def store(self, key: tuple[str, str], event: dict[str, Any]) -> None:
        if len(json.dumps(event["payload"])) <= 4096:
            super().store(key, event)


make = LossyStore

if __name__ == "__main__":
    serve(make)
