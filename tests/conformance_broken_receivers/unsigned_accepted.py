"""Defect: checks the signature only when one is sent (contract §4.3)."""

from _receiver_base import Receiver, serve


class UnsignedAccepted(Receiver):
    def unsigned(self, server: str) -> str:
        return server


make = UnsignedAccepted

if __name__ == "__main__":
    serve(make)
