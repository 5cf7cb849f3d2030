"""Defect: verifies the signature over the body parsed and re-serialized, not the bytes
received, so a re-formatted body passes (contract §4.1: the exact bytes)."""

import json

from _receiver_base import Receiver, serve


class ReserializedBody(Receiver):
    def signed_message(self, stamp: str, body: bytes) -> bytes:
        try:
            value = json.loads(body)
        except (ValueError, RecursionError):
            return super().signed_message(stamp, body)
        canonical = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
        return super().signed_message(stamp, canonical)


make = ReserializedBody

if __name__ == "__main__":
    serve(make)
