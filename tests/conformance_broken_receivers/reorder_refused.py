"""Defect: refuses an event whose seq is below one already seen (contract §5.3)."""

from _receiver_base import Receiver, Refused, serve


class ReorderRefused(Receiver):
    def check_order(self, expected: int, seq: int) -> None:
        if seq < expected:
            raise Refused(409, "out_of_order")


make = ReorderRefused

if __name__ == "__main__":
    serve(make)
