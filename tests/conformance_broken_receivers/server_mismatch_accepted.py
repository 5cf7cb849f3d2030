"""Defect: never compares the body's server with X-RVC-Server, so one server can post
events in another's name (contract §3.1, §4.4)."""

from typing import Any

from _receiver_base import Receiver, serve


class ServerMismatchAccepted(Receiver):
    def check_server(self, event: dict[str, Any], server: str) -> None:
        pass


make = ServerMismatchAccepted

if __name__ == "__main__":
    serve(make)
