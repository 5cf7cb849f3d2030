"""Defect: reads a body of any size (contract §4.4)."""

from _receiver_base import Receiver, serve


class NoSizeLimit(Receiver):
    def __init__(self, secrets: dict[str, list[str]]) -> None:
        super().__init__(secrets)
        self.max_body_bytes = 1 << 40


make = NoSizeLimit

if __name__ == "__main__":
    serve(make)
