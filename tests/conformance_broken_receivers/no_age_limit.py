"""Defect: refuses future timestamps but takes any old one: a replay passes (§4.3)."""

from _receiver_base import SKEW_S, Receiver, Refused, serve


class NoAgeLimit(Receiver):
    def check_window(self, seconds: int, now: float) -> None:
        if seconds > now + SKEW_S:
            raise Refused(401, "future_timestamp")


make = NoAgeLimit

if __name__ == "__main__":
    serve(make)
