"""A pure-ASGI guard in front of the MCP message endpoints: only JSON-RPC gets through.

The SDK answers some malformed bodies with 500 and a logged traceback (invalid UTF-8, JSON
nested past the recursion limit, an integer of 5 000 digits on streamable HTTP; anything
that is not a JSON-RPC message on the SSE ``/messages/`` endpoint, which also pushes the
error into the live session), and others with 400 carrying the parser's or pydantic's own
text. :class:`JsonRpcBodyGuard` reads the body of a ``POST`` to the message endpoint first
and answers what the SDK would not survive itself, with fixed text only:

- not JSON the SDK's parsers both accept (invalid UTF-8, syntax, nesting past pydantic's
  limit, a lone surrogate, an integer too long to convert): ``400`` with the JSON-RPC
  *Parse error* ``{"jsonrpc": "2.0", "id": null, "error": {"code": -32700, ...}}``;
- JSON that is not a JSON-RPC message (an array, a number, an object without ``method``
  or ``result``): ``400`` with *Invalid Request* (-32600);
- a body over the SDK's own limit (4 MiB): ``413``, before more than that is read.

Anything else is handed on unchanged (the body replayed), so the SDK parses exactly what
was checked, and still applies its own checks (Accept, Content-Type, session, Host) with
its own fixed answers. Requests other than a ``POST`` to the message endpoint pass untouched.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from mcp.types import INVALID_REQUEST, PARSE_ERROR, JSONRPCMessage
from pydantic import ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from robot_mcp_kit.log import get_logger
from robot_mcp_memory.http._json import send_json
from robot_mcp_memory.logs import RateLimiter

__all__ = ["JsonRpcBodyGuard", "check_jsonrpc_body"]

_log = get_logger("robot_mcp_memory.http")

_PARSE_ERROR = "Parse error"
_INVALID_REQUEST = "Invalid Request"
_TOO_LARGE = "Request body too large"


def check_jsonrpc_body(body: bytes) -> tuple[int, str] | None:
    """None when ``body`` is one JSON-RPC message both SDK transports parse; else the
    JSON-RPC error ``(code, message)`` to answer with. Never raises."""
    # The SSE transport parses with pydantic's JSON parser (strict UTF-8, ~200 levels deep);
    # the streamable HTTP transport with json.loads, then pydantic on the objects.
    try:
        JSONRPCMessage.model_validate_json(body)
    except ValidationError as exc:
        if any(error["type"] == "json_invalid" for error in exc.errors()):
            return PARSE_ERROR, _PARSE_ERROR
        return INVALID_REQUEST, _INVALID_REQUEST
    except Exception:  # whatever else the parser raises, the body is not JSON
        return PARSE_ERROR, _PARSE_ERROR
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):  # JSONDecodeError, UnicodeDecodeError, int digits
        return PARSE_ERROR, _PARSE_ERROR
    try:
        JSONRPCMessage.model_validate(parsed)
    except ValidationError:
        return INVALID_REQUEST, _INVALID_REQUEST
    return None


class JsonRpcBodyGuard:
    """Check the body of every ``POST`` to ``paths`` before ``app`` sees it.

    Args:
        app: the MCP app.
        paths: the message endpoints: an entry ending in ``/`` also covers what is under it
            (the SSE transport mounts ``/messages/``), any other entry is an exact path.
        max_body_bytes: the SDK's body limit; a larger body is answered 413.
    """

    def __init__(self, app: ASGIApp, *, paths: Iterable[str], max_body_bytes: int) -> None:
        self.app = app
        self.paths = tuple(paths)
        self.max_body_bytes = max_body_bytes
        self._log_limit = RateLimiter()

    def _guards(self, scope: Scope) -> bool:
        if scope["type"] != "http" or scope.get("method") != "POST":
            return False
        path: str = scope.get("path", "")
        # Whatever the Content-Type says: the SDK's own check of it is looser than a prefix
        # match ("text/plain, application/json" passes), so every body is checked here.
        return any(path == p or (p.endswith("/") and path.startswith(p)) for p in self.paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._guards(scope):
            await self.app(scope, receive, send)
            return

        declared = _header(scope, b"content-length")
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            await self._refuse(scope, send, 413, INVALID_REQUEST, _TOO_LARGE)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk: bytes = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                await self._refuse(scope, send, 413, INVALID_REQUEST, _TOO_LARGE)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)

        problem = check_jsonrpc_body(body)
        if problem is not None:
            await self._refuse(scope, send, 400, *problem)
            return

        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, send: Send, status: int, code: int, text: str) -> None:
        dropped = self._log_limit.allow((status, code))
        if dropped is not None:
            client = scope.get("client")
            _log.warning(
                "jsonrpc_body_refused",
                status=status,
                reason=text,
                path=scope.get("path"),
                client=f"{client[0]}:{client[1]}" if client else None,
                suppressed=dropped,
            )
        await send_json(
            send,
            status,
            {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": text}},
            compact=True,
        )


def _header(scope: Scope, name: bytes) -> str:
    headers: Any = scope.get("headers") or []
    for key, value in headers:
        if key.lower() == name:
            return str(value.decode("latin-1")).strip()
    return ""
