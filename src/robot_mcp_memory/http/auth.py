"""How a tenant is bound to an HTTP connection (memory spec §6, §6a): tokens and the middleware.

Who the tenants are (:class:`~robot_mcp_memory.tenant.Tenant`, the admin, the robot token
map) is :mod:`robot_mcp_memory.tenant`'s; :class:`TokenAuth` maps a presented bearer token
to one of them in constant time.

How a tenant reaches a tool call — never through a session remembering who opened it:

- :class:`TenantAuthMiddleware` (pure ASGI: Starlette's ``BaseHTTPMiddleware`` runs the
  app in another task) resolves the bearer token of *every* HTTP request, answers 401
  itself when it does not match, and stores the tenant in the request's ASGI scope under
  :data:`~robot_mcp_memory.tenant.TENANT_SCOPE_KEY` (and in
  :data:`~robot_mcp_memory.tenant.current_tenant` while the app runs).
- The MCP SDK hands each tool call the Starlette request that *carried that message*
  (``request_context.request``): the POST on streamable HTTP, the POST to
  ``/messages/`` on SSE. :func:`~robot_mcp_memory.tenant.tenant_of_request` reads the
  tenant from it, so a streamable-HTTP session id reused with another robot's token acts
  only as that robot.
- On SSE the middleware also binds each session to the tenant of the ``GET /sse`` that
  opened it (it reads the session id from the ``endpoint`` event the transport sends) and
  answers 403 — without passing the message on — to a ``POST /messages/`` for that session
  made with any other token.
"""

from __future__ import annotations

import hmac
import re
import threading
from collections.abc import Mapping
from typing import Any, Protocol
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from robot_mcp_kit.log import get_logger
from robot_mcp_memory.http._json import send_json
from robot_mcp_memory.tenant import ADMIN, TENANT_SCOPE_KEY, Tenant, current_tenant

__all__ = ["TenantAuthMiddleware", "TenantResolver", "TokenAuth"]

_log = get_logger("robot_mcp_memory.tenancy")


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

    @classmethod
    def from_settings(cls, admin_token: str | None, robot_tokens: Mapping[str, str]) -> TokenAuth:
        """The map of ``MEMORY_TOKEN`` (admin) plus each robot token (scoped)."""
        tokens = {token: Tenant.for_robot(robot) for token, robot in robot_tokens.items()}
        if admin_token is not None:
            tokens[admin_token] = ADMIN
        return cls(tokens)

    def __call__(self, token: str) -> Tenant | None:
        presented = token.encode("utf-8", "surrogateescape")
        found: Tenant | None = None
        for candidate, tenant in self._tokens:
            if hmac.compare_digest(candidate, presented):
                found = tenant
        return found

    def __len__(self) -> int:
        return len(self._tokens)


_ENDPOINT_SESSION = re.compile(rb"session_id=([0-9a-fA-F]+)")


class TenantAuthMiddleware:
    """Require ``Authorization: Bearer <token>`` on every HTTP request but the exempt paths.

    Rejected requests get ``401`` with ``WWW-Authenticate: Bearer`` and a JSON body
    ``{"error": "unauthorized", "detail": ...}``; a POST to an SSE session opened by another
    tenant gets ``403`` ``{"error": "forbidden", ...}``; the wrapped app is never called
    for either. Accepted requests run with the tenant in the ASGI scope
    (:data:`~robot_mcp_memory.tenant.TENANT_SCOPE_KEY`) and in
    :data:`~robot_mcp_memory.tenant.current_tenant`, reset in ``finally``.
    Non-HTTP scopes (``lifespan``) pass through; a websocket without a valid token is
    closed with 1008.

    Args:
        sse_path: the path of the SSE stream (``GET``) whose sessions are bound.
        messages_path: the path prefix of the SSE message endpoint (``POST``).
    """

    def __init__(
        self,
        app: ASGIApp,
        resolve: TenantResolver,
        *,
        exempt_paths: frozenset[str] = frozenset({"/healthz"}),
        realm: str = "robot-mcp-memory",
        sse_path: str = "/sse",
        messages_path: str = "/messages/",
    ) -> None:
        self.app = app
        self.resolve = resolve
        self.exempt_paths = exempt_paths
        self.realm = realm
        self.sse_path = sse_path
        self.messages_path = messages_path
        self._sessions: dict[str, Tenant] = {}
        self._lock = threading.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if scope["type"] == "http" and path in self.exempt_paths:
            await self.app(scope, receive, send)
            return

        token = _bearer_token(scope)
        tenant = self.resolve(token) if token else None
        if tenant is None:
            detail = "missing bearer token" if token is None else "invalid bearer token"
            _log.warning("auth_rejected", path=path, reason=detail, client=_client(scope))
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
            else:
                await _drain(receive)
                await self._reject(send, detail, invalid=token is not None)
            return

        if scope["type"] == "http" and path.startswith(self.messages_path):
            opener = self._session_tenant(scope, tenant)
            if opener is not None:
                _log.warning(
                    "session_tenant_mismatch",
                    path=path,
                    tenant=tenant.name,
                    session_tenant=opener.name,
                    client=_client(scope),
                )
                await _drain(receive)
                await send_json(
                    send,
                    403,
                    {
                        "error": "forbidden",
                        "detail": "this SSE session was opened with another token; "
                        "post with the token that opened it",
                    },
                )
                return

        scope[TENANT_SCOPE_KEY] = tenant
        reset = current_tenant.set(tenant)
        try:
            if scope["type"] == "http" and path == self.sse_path and scope.get("method") == "GET":
                await self._serve_sse(scope, receive, send, tenant)
            else:
                await self.app(scope, receive, send)
        finally:
            current_tenant.reset(reset)

    async def _serve_sse(self, scope: Scope, receive: Receive, send: Send, tenant: Tenant) -> None:
        """Run the SSE stream, binding the session id it announces to ``tenant``."""
        session: str | None = None

        async def watching_send(message: Message) -> None:
            nonlocal session
            if session is None and message["type"] == "http.response.body":
                found = _ENDPOINT_SESSION.search(message.get("body", b""))
                if found is not None:
                    session = _session_key(found.group(1).decode())
                    with self._lock:
                        self._sessions[session] = tenant
            await send(message)

        try:
            await self.app(scope, receive, watching_send)
        finally:
            if session is not None:
                with self._lock:
                    self._sessions.pop(session, None)

    def _session_tenant(self, scope: Scope, tenant: Tenant) -> Tenant | None:
        """The tenant that opened a session named in the query other than ``tenant``, if any.

        Every ``session_id`` value is checked, normalised as :class:`uuid.UUID` reads it
        (the SDK's parser), so no spelling of an id slips past the binding.
        """
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        with self._lock:
            for raw in query.get("session_id") or []:
                opener = self._sessions.get(_session_key(raw))
                if opener is not None and opener != tenant:
                    return opener
        return None

    async def _reject(self, send: Send, detail: str, *, invalid: bool) -> None:
        challenge = f'Bearer realm="{self.realm}"'
        if invalid:
            challenge += ', error="invalid_token"'
        await send_json(
            send,
            401,
            {"error": "unauthorized", "detail": detail},
            extra_headers=[(b"www-authenticate", challenge.encode())],
        )


_DRAIN_LIMIT = 64 * 1024


async def _drain(receive: Receive) -> None:
    """Read (and drop) a refused request's body, up to 64 KiB.

    Answering before the body is read and then closing leaves unread bytes in the socket,
    which the kernel turns into a TCP reset that can destroy the answer on its way to the
    client. Past the limit the server closes the connection after answering anyway.
    """
    received = 0
    while received <= _DRAIN_LIMIT:
        message = await receive()
        if message["type"] != "http.request":
            return
        received += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


def _session_key(raw: str) -> str:
    # As uuid.UUID(hex=...) normalises what it accepts: braces, urn prefix, dashes, case.
    return raw.replace("urn:", "").replace("uuid:", "").strip("{}").replace("-", "").lower()


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
