"""Defect: answers 409 to an event_id it has seen: the poster re-sends it (contract §5.3)."""

from typing import Any

from _receiver_base import Receiver, Refused, serve


class DuplicateConflict(Receiver):
    def duplicate(self, server: str, event: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        raise Refused(409, "duplicate")


make = DuplicateConflict

if __name__ == "__main__":
    serve(make)
