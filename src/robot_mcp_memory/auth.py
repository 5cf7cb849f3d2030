"""The bearer-token gate of the HTTP transports, and the tenant it binds per connection.

``BearerAuthMiddleware`` is pure ASGI on purpose (memory spec §6a): Starlette's
``BaseHTTPMiddleware`` runs the downstream app in another task, so a tenant set there would
not reach the MCP session loop that ``GET /sse`` starts. Here the tenant is set in
:data:`current_tenant` *before* the app is called, so every task the request spawns (the
SSE session and the tool calls it serves) inherits it, and it is reset in ``finally``.

Today one token exists: ``MEMORY_TOKEN``, which authenticates an unscoped (admin) tenant.
Per-robot tokens (``MEMORY_ROBOT_TOKENS``) plug in as more entries of :class:`TokenAuth`
mapping a token to ``Tenant(name=robot, robot=robot)``; nothing else here changes.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

from starlette.types import ASGIApp, Receive, Scope, Send

from robot_mcp_memory.logs import get_logger

__all__ = [
    "ADMIN",
    "BearerAuthMiddleware",
    "Tenant",
    "TenantResolver",
    "TokenAuth",
    "current_tenant",
]

_log = get_logger("robot_mcp_memory.auth")


@dataclass(frozen=True)
class Tenant:
    """Who a connection authenticated as.

    ``robot`` is None for an unscoped tenant (the ``MEMORY_TOKEN`` admin, stdio, or an open
    server): it sees and may change everything. A scoped tenant (a per-robot token) is
    confined to what :func:`robot_mcp_memory.server.visible_robots` gives its robot.
    """

    name: str
    robot: str | None = None

    @property
    def scoped(self) -> bool:
        """True when this tenant is confined to one robot's documents."""
        return self.robot is not None


ADMIN = Tenant(name="admin")
"""The tenant ``MEMORY_TOKEN`` authenticates: unscoped."""

current_tenant: ContextVar[Tenant | None] = ContextVar("robot_mcp_memory_tenant", default=None)
"""The tenant of the current connection; None outside a gated request (stdio, open server)."""


class TenantResolver(Protocol):
    """Maps a presented bearer token to its tenant, or None when no token matches."""

    def __call__(self, token: str) -> Tenant | None: ...


class TokenAuth:
    """A constant-time token -> tenant map.

    Every configured token is compared with :func:`hmac.compare_digest`, without stopping
    at the first match, so the time taken says nothing about which token (or which prefix)
    was close. Thread-safe: immutable after construction.
    """

    def __init__(self, tokens: Mapping[str, Tenant]) -> None:
        if any(not token for token in tokens):
            raise ValueError("TokenAuth: an empty token would admit anyone; refusing it")
        self._tokens = tuple((token.encode(), tenant) for token, tenant in tokens.items())

    def __call__(self, token: str) -> Tenant | None:
        presented = token.encode()
        found: Tenant | None = None
        for candidate, tenant in self._tokens:
            if hmac.compare_digest(candidate, presented):
                found = tenant
        return found

    def __len__(self) -> int:
        return len(self._tokens)


class BearerAuthMiddleware:
    """Require ``Authorization: Bearer <token>`` on every HTTP request but the exempt paths.

    Rejected requests get ``401`` with ``WWW-Authenticate: Bearer`` and a JSON body
    ``{"error": "unauthorized", "detail": ...}``; the wrapped app is never called for them.
    Accepted requests run with :data:`current_tenant` set to the resolved tenant.
    Non-HTTP scopes (``lifespan``) pass through untouched; a websocket without a valid
    token is closed with 1008 (the app serves none, but a gate should not rely on that).
    """

    def __init__(
        self,
        app: ASGIApp,
        resolve: TenantResolver,
        *,
        exempt_paths: frozenset[str] = frozenset({"/healthz"}),
        realm: str = "robot-mcp-memory",
    ) -> None:
        self.app = app
        self.resolve = resolve
        self.exempt_paths = exempt_paths
        self.realm = realm

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "http" and scope.get("path") in self.exempt_paths:
            await self.app(scope, receive, send)
            return

        token = _bearer_token(scope)
        tenant = self.resolve(token) if token else None
        if tenant is None:
            detail = "missing bearer token" if token is None else "invalid bearer token"
            _log.warning(
                "auth_rejected",
                path=scope.get("path"),
                reason=detail,
                client=_client(scope),
            )
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
            else:
                await self._reject(send, detail, invalid=token is not None)
            return

        reset = current_tenant.set(tenant)
        try:
            await self.app(scope, receive, send)
        finally:
            current_tenant.reset(reset)

    async def _reject(self, send: Send, detail: str, *, invalid: bool) -> None:
        challenge = f'Bearer realm="{self.realm}"'
        if invalid:
            challenge += ', error="invalid_token"'
        body = json.dumps({"error": "unauthorized", "detail": detail}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", challenge.encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _bearer_token(scope: Scope) -> str | None:
    """The token of the first ``Authorization: Bearer`` header, None when absent or not Bearer."""
    headers: list[tuple[bytes, bytes]] = scope.get("headers") or []
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, credentials = value.decode("latin-1").strip().partition(" ")
            if scheme.lower() == "bearer" and credentials.strip():
                return credentials.strip()
            return None
    return None


def _client(scope: Scope) -> Any:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else None
