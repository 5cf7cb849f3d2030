"""Defect: takes any JSON object with an event_id and a task_id as an event (§3.1, §4.4)."""

from typing import Any

from _receiver_base import Receiver, Refused, serve


class LaxEvent(Receiver):
    def validate(self, value: Any, server: str) -> dict[str, Any]:
        if not isinstance(value, dict) or not isinstance(value.get("event_id"), str):
            raise Refused(422, "not_an_object")
        if not isinstance(value.get("task_id"), str):
            raise Refused(422, "invalid_event")
        if value.get("server") != server:
            raise Refused(422, "server_mismatch")
        return value


make = LaxEvent

if __name__ == "__main__":
    serve(make)
