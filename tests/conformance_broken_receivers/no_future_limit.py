"""Defect: refuses old timestamps but takes any future one (contract §4.3)."""

from _receiver_base import SKEW_S, Receiver, Refused, serve


class NoFutureLimit(Receiver):
    def check_window(self, seconds: int, now: float) -> None:
        if seconds < now - SKEW_S:
            raise Refused(401, "stale_timestamp")


make = NoFutureLimit

if __name__ == "__main__":
    serve(make)
