"""Defect: refuses an event whose seq skips ahead (contract §5.3: take it, note the gap)."""

from _receiver_base import Receiver, Refused, serve


class GapRefused(Receiver):
    def check_order(self, expected: int, seq: int) -> None:
        if seq > expected:
            raise Refused(409, "gap")


make = GapRefused

if __name__ == "__main__":
    serve(make)
