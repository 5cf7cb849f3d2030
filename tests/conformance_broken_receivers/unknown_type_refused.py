"""Defect: refuses an event of a type it does not know (§4.4: acknowledge it, ignore it)."""

from _receiver_base import EVENT_TYPES, Receiver, Refused, serve


class UnknownTypeRefused(Receiver):
    def check_type(self, kind: str) -> None:
        if kind not in EVENT_TYPES:
            raise Refused(422, "unknown_type")


make = UnknownTypeRefused

if __name__ == "__main__":
    serve(make)
