"""Defect: no nesting limit: a deeply nested body overflows the parser's recursion, 500
(contract §4.4)."""

from _receiver_base import Receiver, serve


class RecursiveParser(Receiver):
    def too_deep(self, body: bytes) -> bool:
        return False


make = RecursiveParser

if __name__ == "__main__":
    serve(make)
