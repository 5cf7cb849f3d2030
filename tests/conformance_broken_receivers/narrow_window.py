"""Defect: a 30 s window instead of 300 s refuses posters whose clocks drift (§4.3)."""

from _receiver_base import Receiver, Refused, serve


class NarrowWindow(Receiver):
    def check_window(self, seconds: int, now: float) -> None:
        if abs(seconds - now) > 30:
            raise Refused(401, "stale_timestamp")


make = NarrowWindow

if __name__ == "__main__":
    serve(make)
