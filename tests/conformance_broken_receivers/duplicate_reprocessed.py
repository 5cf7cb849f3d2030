"""Defect: acknowledges a re-sent event and processes it again (contract §5.3: dedupe)."""

from typing import Any

from _receiver_base import Receiver, serve


class DuplicateReprocessed(Receiver):
    def duplicate(self, server: str, event: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.store((server, event["task_id"]), event)
        return 200, {"accepted": True}


make = DuplicateReprocessed

if __name__ == "__main__":
    serve(make)
