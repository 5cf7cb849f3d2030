"""Defect: processes an event before checking its signature, then refuses it (§5.4)."""

import json

from _receiver_base import Receiver, serve


class StoresBeforeVerifying(Receiver):
    def authenticate(self, headers: dict[str, str], body: bytes) -> str:
        try:
            value = json.loads(body)
        except (ValueError, RecursionError):
            value = None
        server = headers.get("x-rvc-server") or (value or {}).get("server")
        if isinstance(value, dict) and isinstance(value.get("event_id"), str) and server:
            self.record(str(server), value)
        return super().authenticate(headers, body)


make = StoresBeforeVerifying

if __name__ == "__main__":
    serve(make)
