"""Defect: keeps only the first of a server's secrets, so a rotation breaks (§4.3)."""

from _receiver_base import Receiver, serve


class SingleSecret(Receiver):
    def secrets_for(self, server: str) -> list[str] | None:
        keys = super().secrets_for(server)
        return None if keys is None else keys[:1]


make = SingleSecret

if __name__ == "__main__":
    serve(make)
