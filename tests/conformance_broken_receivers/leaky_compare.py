"""Defect: compares the signature character by character, doing work per matching one, and
stops at the first difference: a timing leak (contract §4.3). Everything else is right, so
the suite passes it with a warning."""

import time

from _receiver_base import Receiver, serve


class LeakyCompare(Receiver):
    def signatures_match(self, given: str, expected: str) -> bool:
        if len(given) != len(expected):
            return False
        for mine, theirs in zip(given, expected, strict=True):
            if mine != theirs:
                return False
            time.sleep(0.0002)
        return True


make = LeakyCompare

if __name__ == "__main__":
    serve(make)
