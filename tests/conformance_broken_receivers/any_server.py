"""Defect: an X-RVC-Server it does not know is verified with the first server's secrets
(contract §4.3)."""

from _receiver_base import Receiver, serve


class AnyServer(Receiver):
    def secrets_for(self, server: str) -> list[str] | None:
        return self.secrets.get(server) or next(iter(self.secrets.values()))


make = AnyServer

if __name__ == "__main__":
    serve(make)
