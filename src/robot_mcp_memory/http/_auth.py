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
  tenant from it.

A session belongs to the token that opened it:

- On SSE the middleware binds each session to the tenant of the ``GET /sse`` that opened
  it (it reads the session id from the ``endpoint`` event the transport sends) and answers
  403 — without passing the message on — to a ``POST /messages/`` for that session made
  with any other token.
- On streamable HTTP it binds each session to the tenant whose request opened it (the
  ``mcp-session-id`` header of the answer), in a :class:`~._sessions.SessionBook`, and
  answers a request naming that session with another token — POST, GET stream or DELETE —
  exactly as the SDK answers an unknown session (``404``, ``"Session not found"``), without
  passing it on: the intruder learns nothing, not even that the session exists.

Each robot has a share of the server (:class:`~._shares.ConnectionShares`: streams, requests in
progress, streamable sessions, and the connection slots kept for the admin); a request past
it is answered ``429`` with ``Retry-After`` and a sentence naming the share. At its session
share a robot that opens another session has its least recently used idle one ended for it.
"""

from __future__ import annotations

import hmac
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any, Protocol
from urllib.parse import parse_qs

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from robot_mcp_kit.log import get_logger
from robot_mcp_memory.http._json import send_json
from robot_mcp_memory.http._sessions import SessionBook
from robot_mcp_memory.logs import RateLimiter
from robot_mcp_memory.shares import ConnectionShares, Refusal, ShareLimits
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

SESSION_HEADER = b"mcp-session-id"
# The SDK's answer to a session id it does not know (StreamableHTTPSessionManager's
# _error_response("Session not found", 404)), sent byte for byte to a foreign session's user.
_UNKNOWN_SESSION = {
    "jsonrpc": "2.0",
    "id": "server-error",
    "error": {"code": -32600, "message": "Session not found"},
}


class TenantAuthMiddleware:
    """Require ``Authorization: Bearer <token>`` on every HTTP request but the exempt paths.

    Rejected requests get ``401`` with ``WWW-Authenticate: Bearer`` and a JSON body
    ``{"error": "unauthorized", "detail": ...}``; a POST to an SSE session opened by another
    tenant gets ``403`` ``{"error": "forbidden", ...}``; a request naming a streamable-HTTP
    session opened by another tenant gets the SDK's own unknown-session ``404``; a robot's
    request past one of its shares gets ``429`` ``{"error": "too_many_requests", ...}``
    with ``Retry-After``. The wrapped app is never called for any of them. Accepted
    requests run with the tenant in the ASGI scope
    (:data:`~robot_mcp_memory.tenant.TENANT_SCOPE_KEY`) and in
    :data:`~robot_mcp_memory.tenant.current_tenant`, reset in ``finally``.
    Non-HTTP scopes (``lifespan``) pass through; a websocket without a valid token is
    closed with 1008.

    Args:
        sse_path: the path of the SSE stream (``GET``) whose sessions are bound.
        messages_path: the path prefix of the SSE message endpoint (``POST``).
        streamable_path: the streamable-HTTP endpoint whose sessions are bound, or None.
        shares: each robot's share; by default :class:`~._shares.ShareLimits`' defaults
            without a reserve check.
        sessions: the streamable-HTTP session book; by default one whose sessions never
            expire.

    ``evicted`` counts the sessions ended because their robot opened one past its share.
    Used from the event loop thread.
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
        streamable_path: str | None = "/mcp",
        shares: ConnectionShares | None = None,
        sessions: SessionBook | None = None,
    ) -> None:
        self.app = app
        self.resolve = resolve
        self.exempt_paths = exempt_paths
        self.realm = realm
        self.sse_path = sse_path
        self.messages_path = messages_path
        self.streamable_path = streamable_path
        self.shares = shares if shares is not None else ConnectionShares(ShareLimits())
        self.sessions = sessions if sessions is not None else SessionBook(idle_timeout_s=None)
        self.evicted = 0
        self._sse_sessions: dict[str, Tenant] = {}
        self._lock = threading.Lock()
        self._log_limit = RateLimiter()

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
                closing = await _drain(receive)
                await self._reject(send, detail, invalid=token is not None, headers=closing)
            return

        if scope["type"] == "websocket":  # served with ws="none": answered as plain HTTP
            await self._run(scope, receive, send, tenant)
            return

        if path.startswith(self.messages_path):
            opener = self._sse_session_tenant(scope, tenant)
            if opener is not None:
                self._note_mismatch(scope, tenant, opener, "sse")
                closing = await _drain(receive)
                await send_json(
                    send,
                    403,
                    {
                        "error": "forbidden",
                        "detail": "this SSE session was opened with another token; "
                        "post with the token that opened it",
                    },
                    extra_headers=closing,
                )
                return

        session_id: str | None = None
        if path == self.streamable_path:
            session_id = _first_header(scope.get("headers") or (), SESSION_HEADER)
            opener = self.sessions.owner(session_id) if session_id is not None else None
            if opener is not None and opener != tenant:
                self._note_mismatch(scope, tenant, opener, "streamable-http")
                closing = await _drain(receive)
                await send_json(send, 404, _UNKNOWN_SESSION, compact=True, extra_headers=closing)
                return

        robot = tenant.robot
        method = scope.get("method")
        stream = method == "GET" and path in (self.sse_path, self.streamable_path)
        if robot is not None:
            opens_session = path == self.streamable_path and method == "POST" and session_id is None
            refusal = self.shares.admit(
                robot,
                stream=stream,
                sessions=self.sessions.held(robot) if opens_session else None,
            )
            if refusal is not None:
                await self._refuse(scope, receive, send, refusal)
                return
        try:
            await self._run(scope, receive, send, tenant, session_id=session_id)
        finally:
            if robot is not None:
                self.shares.release(robot, stream=stream)

    async def _run(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        tenant: Tenant,
        *,
        session_id: str | None = None,
    ) -> None:
        """Call the app with ``tenant`` bound, watching the sessions it opens and ends."""
        scope[TENANT_SCOPE_KEY] = tenant
        reset = current_tenant.set(tenant)
        try:
            path = scope.get("path", "")
            if scope["type"] != "http":
                await self.app(scope, receive, send)
            elif path == self.sse_path and scope.get("method") == "GET":
                await self._serve_sse(scope, receive, send, tenant)
            elif path == self.streamable_path and session_id is not None:
                await self._serve_session(scope, receive, send, session_id)
            elif path == self.streamable_path and scope.get("method") == "POST":
                await self._open_session(scope, receive, send, tenant)
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
                        self._sse_sessions[session] = tenant
            await send(message)

        try:
            await self.app(scope, receive, watching_send)
        finally:
            if session is not None:
                with self._lock:
                    self._sse_sessions.pop(session, None)

    async def _open_session(
        self, scope: Scope, receive: Receive, send: Send, tenant: Tenant
    ) -> None:
        """A POST without a session id: bind the session its answer names to ``tenant``,
        then end the robot's sessions past its share."""
        opened: str | None = None

        async def watching_send(message: Message) -> None:
            nonlocal opened
            if message["type"] == "http.response.start" and message["status"] < 400:
                opened = _first_header(message.get("headers") or (), SESSION_HEADER, any_case=True)
                if opened:
                    self.sessions.bind(opened, tenant)
            await send(message)

        await self.app(scope, receive, watching_send)
        if opened and tenant.robot is not None:
            await self._evict_past_share(scope, tenant.robot, opened)

    async def _serve_session(
        self, scope: Scope, receive: Receive, send: Send, session_id: str
    ) -> None:
        """A request for a session its opener makes: count it in flight; forget the
        session once the SDK says it is gone (404) or a DELETE of it succeeded."""
        status: int | None = None

        async def watching_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        self.sessions.begin(session_id)
        try:
            await self.app(scope, receive, watching_send)
        finally:
            self.sessions.end(session_id)
            deleted = scope.get("method") == "DELETE" and status is not None and status < 300
            if status == 404 or deleted:
                self.sessions.forget(session_id)

    async def _evict_past_share(self, scope: Scope, robot: str, opened: str) -> None:
        """End ``robot``'s least recently used sessions until it holds its share, through
        the SDK's own DELETE (the session's streams close, its id then answers 404)."""
        keep = self.shares.limits.max_sessions
        while (victim := self.sessions.pick_victim(robot, keep=keep, spare=opened)) is not None:
            status = await self._delete_session(scope, victim)
            if status not in (200, 404):  # still live in the SDK: keep it bound, try later
                self.sessions.keep(victim)
                _log.warning(
                    "robot_session_eviction_failed", robot=robot, status=status, max_sessions=keep
                )
                return
            self.sessions.forget(victim)
            self.evicted += 1
            _log.info("robot_session_evicted", robot=robot, max_sessions=keep, status=status)

    async def _delete_session(self, scope: Scope, session_id: str) -> int | None:
        """DELETE ``session_id`` through the app, as its opener, with the Host and Origin of
        ``scope`` (a request the SDK's Host/Origin check has just accepted); the status."""
        headers = [
            (name, value)
            for name, value in scope.get("headers") or ()
            if name.lower() in (b"host", b"origin")
        ]
        headers.append((SESSION_HEADER, session_id.encode("latin-1")))
        delete: dict[str, Any] = {
            key: scope[key] for key in _REQUEST_SCOPE_KEYS if key in scope
        } | {"method": "DELETE", "query_string": b"", "headers": headers}
        status: int | None = None
        asked = False

        async def receive() -> Message:
            nonlocal asked
            if asked:
                return {"type": "http.disconnect"}
            asked = True
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]

        try:
            await self.app(delete, receive, send)
        except Exception:  # the SDK failed to end it: it stays bound, the caller says so
            return None
        return status

    def _sse_session_tenant(self, scope: Scope, tenant: Tenant) -> Tenant | None:
        """The tenant that opened an SSE session named in the query other than ``tenant``.

        Every ``session_id`` value is checked, normalised as :class:`uuid.UUID` reads it
        (the SDK's parser), so no spelling of an id slips past the binding.
        """
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        with self._lock:
            for raw in query.get("session_id") or []:
                opener = self._sse_sessions.get(_session_key(raw))
                if opener is not None and opener != tenant:
                    return opener
        return None

    def _note_mismatch(self, scope: Scope, tenant: Tenant, opener: Tenant, transport: str) -> None:
        dropped = self._log_limit.allow(("session_tenant_mismatch", tenant.name))
        if dropped is not None:
            _log.warning(
                "session_tenant_mismatch",
                transport=transport,
                method=scope.get("method"),
                path=scope.get("path"),
                tenant=tenant.name,
                session_tenant=opener.name,
                client=_client(scope),
                suppressed=dropped,
            )

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, refusal: Refusal) -> None:
        dropped = self._log_limit.allow(("robot_share_refused", refusal.share, refusal.robot))
        if dropped is not None:
            _log.warning(
                "robot_share_refused",
                robot=refusal.robot,
                share=refusal.share.value,
                limit=refusal.limit,
                method=scope.get("method"),
                path=scope.get("path"),
                client=_client(scope),
                suppressed=dropped,
            )
        closing = await _drain(receive)
        await send_json(
            send,
            429,
            {"error": "too_many_requests", "detail": refusal.detail},
            extra_headers=[(b"retry-after", str(refusal.retry_after_s).encode()), *closing],
        )

    async def _reject(
        self, send: Send, detail: str, *, invalid: bool, headers: list[tuple[bytes, bytes]]
    ) -> None:
        challenge = f'Bearer realm="{self.realm}"'
        if invalid:
            challenge += ', error="invalid_token"'
        await send_json(
            send,
            401,
            {"error": "unauthorized", "detail": detail},
            extra_headers=[(b"www-authenticate", challenge.encode()), *headers],
        )


# What a request's ASGI scope carries from the server (ASGI spec, HTTP connection scope),
# copied into the DELETE that ends an evicted session.
_REQUEST_SCOPE_KEYS = (
    "type",
    "asgi",
    "http_version",
    "scheme",
    "path",
    "raw_path",
    "root_path",
    "server",
    "client",
    "state",
    TENANT_SCOPE_KEY,
)

_DRAIN_LIMIT = 64 * 1024
_DRAIN_TIMEOUT_S = 1.0


async def _drain(receive: Receive) -> list[tuple[bytes, bytes]]:
    """Read (and drop) a refused request's body, up to 64 KiB and for at most 1 s; the
    headers the refusal must carry: ``Connection: close`` when the body was not all read.

    Answering before the body is read and then closing leaves unread bytes in the socket,
    which the kernel turns into a TCP reset that can destroy the answer on its way to the
    client. A body past the limit, or one that does not come, is not waited for: the
    refusal closes the connection, so it does not stay busy holding a slot.
    """
    received = 0
    with anyio.move_on_after(_DRAIN_TIMEOUT_S):
        while received <= _DRAIN_LIMIT:
            message = await receive()
            if message["type"] != "http.request":
                return []
            received += len(message.get("body", b""))
            if not message.get("more_body", False):
                return []
    return [(b"connection", b"close")]


def _session_key(raw: str) -> str:
    # As uuid.UUID(hex=...) normalises what it accepts: braces, urn prefix, dashes, case.
    return raw.replace("urn:", "").replace("uuid:", "").strip("{}").replace("-", "").lower()


def _first_header(
    headers: Iterable[tuple[bytes, bytes]], name: bytes, *, any_case: bool = False
) -> str | None:
    """The first header ``name``, decoded as latin-1, as Starlette's ``Headers.get`` reads a
    request (the name compared as the server lowercased it); None when absent."""
    for key, value in headers:
        if key == name or (any_case and key.lower() == name):
            return value.decode("latin-1")
    return None


_OWS = " \t"  # HTTP's optional whitespace: space and tab, nothing else


def _bearer_token(scope: Scope) -> str | None:
    """The token of the first ``Authorization: Bearer`` header, None when absent or not Bearer.

    Only ASCII spaces and tabs around the scheme and the token are ignored: any other byte
    (``\\xa0``, ``\\x85``) is part of the token, which then matches none.
    """
    headers: list[tuple[bytes, bytes]] = scope.get("headers") or []
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, credentials = value.decode("latin-1").strip(_OWS).partition(" ")
            credentials = credentials.strip(_OWS)
            if scheme.lower() == "bearer" and credentials:
                return credentials
            return None
    return None


def _client(scope: Scope) -> Any:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else None
