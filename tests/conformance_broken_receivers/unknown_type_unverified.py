"""Defect: acknowledges a post naming a type it does not know before verifying it (§4.4:
the signature and the envelope are checked first, whatever the type)."""

import json
from typing import Any

from _receiver_base import EVENT_TYPES, Receive, Receiver, Scope, serve


class UnknownTypeUnverified(Receiver):
    async def handle(self, scope: Scope, receive: Receive) -> tuple[int, dict[str, Any]]:
        body = await self.read_body(receive)
        try:
            value = None if self.too_deep(body) else json.loads(body)
        except ValueError:
            value = None
        kind = value.get("type") if isinstance(value, dict) else None
        if isinstance(kind, str) and kind not in EVENT_TYPES:
            return 200, {"ignored": True}
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        server = self.authenticate(headers, body)
        return await self.accept(server, self.parse(body, server))


make = UnknownTypeUnverified

if __name__ == "__main__":
    serve(make)
