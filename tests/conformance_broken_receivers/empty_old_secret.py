"""Defect: the rotation's previous secret comes from an unset variable, so the empty key
signs too (contract §4.3)."""

from _receiver_base import Receiver, serve


class EmptyOldSecret(Receiver):
    def secrets_for(self, server: str) -> list[str] | None:
        keys = super().secrets_for(server)
        return None if keys is None else [*keys, ""]


make = EmptyOldSecret

if __name__ == "__main__":
    serve(make)
