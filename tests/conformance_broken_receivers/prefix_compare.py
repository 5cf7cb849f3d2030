"""Defect: compares all but the last hex digit of the signature (contract §4.3)."""

import hmac

from _receiver_base import Receiver, serve


class PrefixCompare(Receiver):
    def signatures_match(self, given: str, expected: str) -> bool:
        return hmac.compare_digest(given.encode("latin-1")[:-1], expected.encode()[:-1])


make = PrefixCompare

if __name__ == "__main__":
    serve(make)
