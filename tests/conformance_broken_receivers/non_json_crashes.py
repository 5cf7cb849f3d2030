"""Defect: a body that is not JSON raises out of the handler: 500 (contract §4.4)."""

import json
from typing import Any

from _receiver_base import Receiver, serve


class NonJsonCrashes(Receiver):
    def parse(self, body: bytes, server: str) -> dict[str, Any]:
        if self.too_deep(body):
            return super().parse(body, server)
        return self.validate(json.loads(body.decode("utf-8")), server)


make = NonJsonCrashes

if __name__ == "__main__":
    serve(make)
