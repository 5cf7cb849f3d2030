"""Answering an HTTP request with a JSON body straight from pure-ASGI middleware.

The tenant gate (:mod:`robot_mcp_memory.http._auth`: 401, 403) and the JSON-RPC body guard
(:mod:`._jsonrpc_guard`: 400, 413) refuse a request themselves, without calling the app;
both send their answer through :func:`send_json`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from starlette.types import Send

__all__ = ["send_json"]


async def send_json(
    send: Send,
    status: int,
    payload: Any,
    *,
    compact: bool = False,
    extra_headers: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    """Send ``payload`` as a complete ``application/json`` response with ``status``.

    ``compact`` drops the spaces after ``,`` and ``:`` (the JSON-RPC answers); the
    ``content-length`` is always set, so the client never waits for more.
    """
    separators = (",", ":") if compact else None
    body = json.dumps(payload, separators=separators).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *extra_headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
