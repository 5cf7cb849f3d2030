"""Defect: reads X-RVC-Timestamp with float(), so '+1765532000', '1_765_532_000' and
'1765532000.0' pass (contract §4.1: 1-12 ASCII digits)."""

from _receiver_base import Receiver, serve


class LenientTimestamp(Receiver):
    def parse_timestamp(self, stamp: str) -> int | None:
        try:
            return int(float(stamp))
        except ValueError:
            return None


make = LenientTimestamp

if __name__ == "__main__":
    serve(make)
