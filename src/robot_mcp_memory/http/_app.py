"""Serving the memory server: the HTTP app (/healthz + the bearer gate) and the run loop.

The HTTP transports use FastMCP's own Starlette apps (``sse_app()`` /
``streamable_http_app()``) so its Host/Origin (DNS-rebinding) checks and, for streamable
HTTP, the session manager's lifespan stay exactly as FastMCP wires them; this module adds
the ``GET /healthz`` route to that app, puts :class:`JsonRpcBodyGuard` in front of the
message endpoint (malformed JSON-RPC is a 400 with a JSON-RPC error, never the SDK's 500)
and wraps it all in :class:`TenantAuthMiddleware` when a token is set. Uvicorn is
started here rather than through ``FastMCP.run`` so that wrapping is possible, uvicorn logs
through our structlog pipeline, and connections are limited (:mod:`._limits`: header
timeout, connection cap, file-descriptor budget; docs/decisions/0006-http-limits.md). The
middleware gives each robot token its share of the server and keeps slots for the admin
(:mod:`._shares`, docs/decisions/0020-fair-share-http.md).

The store is opened by :func:`serve` *before* anything listens, so a corrupt ``index.db``
surfaces as an exception the entry point turns into one line and exit code 2.
"""

from __future__ import annotations

import time

import anyio
import anyio.to_thread
import uvicorn
from mcp.server.fastmcp import FastMCP
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from robot_mcp_kit.log import get_logger
from robot_mcp_memory.backends import Storage, open_storage
from robot_mcp_memory.http._auth import (
    TenantAuthMiddleware,
    TokenAuth,
)
from robot_mcp_memory.http._jsonrpc_guard import JsonRpcBodyGuard
from robot_mcp_memory.http._limits import (
    ACCEPT_BACKLOG,
    ensure_fd_limit,
    limited_h11_protocol,
)
from robot_mcp_memory.http._sessions import SessionBook
from robot_mcp_memory.server import build_server
from robot_mcp_memory.services import StoreHolder
from robot_mcp_memory.settings import (
    Settings,
    Transport,
)
from robot_mcp_memory.shares import ConnectionShares, ShareLimits

__all__ = ["HEALTHZ_PATH", "build_http_app", "serve", "share_limits"]

HEALTHZ_PATH = "/healthz"
HEALTH_PING_INTERVAL_S = 1.0
"""At most one database question per this many seconds, however often /healthz is asked."""
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})

_log = get_logger("robot_mcp_memory.app")


def build_http_app(settings: Settings, mcp: FastMCP, holder: StoreHolder) -> ASGIApp:
    """The ASGI app of an HTTP transport: FastMCP's app + /healthz, gated when a token is set.

    ``GET /healthz`` needs no token and answers ``{"status": "ok"}`` while the store is
    open, 503 ``{"status": "unavailable"}`` otherwise. It says nothing countable (anyone who
    reaches the port may ask, whatever ``Host`` they name); the document count is in the
    ``memory_server_starting`` log line (decision 0006). On PostgreSQL it also asks the
    database (``SELECT 1``, in a worker thread) and answers 503 ``{"status": "unavailable",
    "database": "unreachable"}`` when it does not answer; at most one such question per
    :data:`HEALTH_PING_INTERVAL_S`, so a flood of health checks is not a flood of queries.

    With robot tokens, each robot gets the shares of :func:`share_limits`, and robots
    together leave ``MEMORY_ADMIN_RESERVE`` of ``MEMORY_MAX_CONNECTIONS`` to the admin
    (decision 0020).
    """

    last_ping: list[float | bool] = [float("-inf"), True]  # [monotonic time, answer]

    async def healthz(_: Request) -> Response:
        memory = holder.memory
        if holder.store is None or memory is None:
            return JSONResponse({"status": "unavailable"}, status_code=503)
        if memory.ping is not None:
            now = time.monotonic()
            if now - float(last_ping[0]) >= HEALTH_PING_INTERVAL_S:
                last_ping[0] = now
                last_ping[1] = await anyio.to_thread.run_sync(memory.ping)
            if not last_ping[1]:
                return JSONResponse(
                    {"status": "unavailable", "database": "unreachable"}, status_code=503
                )
        return JSONResponse({"status": "ok"})

    if settings.transport is Transport.SSE:
        starlette_app = mcp.sse_app()
        message_path = mcp.settings.message_path
    elif settings.transport is Transport.STREAMABLE_HTTP:
        starlette_app = mcp.streamable_http_app()  # its lifespan runs the session manager
        message_path = mcp.settings.streamable_http_path
    else:
        raise ValueError(f"build_http_app: {settings.transport.value!r} is not an HTTP transport")
    starlette_app.router.routes.append(
        Route(HEALTHZ_PATH, healthz, methods=["GET"], include_in_schema=False)
    )

    app: ASGIApp = JsonRpcBodyGuard(
        starlette_app, paths=[message_path], max_body_bytes=mcp.settings.max_request_body_size
    )

    robot_tokens = settings.robot_token_map
    if settings.token is not None or robot_tokens:
        admin = settings.token.get_secret_value() if settings.token is not None else None
        streamable = settings.transport is Transport.STREAMABLE_HTTP
        app = TenantAuthMiddleware(
            app,
            TokenAuth.from_settings(admin, robot_tokens),
            exempt_paths=frozenset({HEALTHZ_PATH}),
            sse_path=mcp.settings.sse_path,
            messages_path=mcp.settings.message_path,
            streamable_path=mcp.settings.streamable_http_path if streamable else None,
            shares=ConnectionShares(
                share_limits(settings), max_connections=settings.max_connections
            ),
            # Sessions the SDK ends for idleness are forgotten after its own timeout (absent
            # from older mcp 1.x settings: there sessions never expire).
            sessions=SessionBook(
                idle_timeout_s=getattr(mcp.settings, "session_idle_timeout", None)
            ),
        )
    return app


def share_limits(settings: Settings) -> ShareLimits:
    """Each robot's share and the admin's reserve, from ``MEMORY_ROBOT_*`` and
    ``MEMORY_ADMIN_RESERVE``."""
    return ShareLimits(
        max_streams=settings.robot_max_streams,
        max_requests=settings.robot_max_requests,
        max_sessions=settings.robot_max_sessions,
        admin_reserve=settings.admin_reserve_slots,
    )


def serve(settings: Settings) -> None:
    """Open the store, serve ``settings.transport`` until stopped, then close the store.

    Blocks. Holds the storage's lock while it runs (:meth:`Storage.lock
    <robot_mcp_memory.backends.Storage.lock>`): a data directory's ``memory.lock``, which
    ``restore`` and ``load`` respect and a second server is refused
    (:class:`~robot_mcp_memory.StoreInUse`); a database that replicas share holds nothing
    and creates nothing in ``MEMORY_DATA_DIR``. Store errors (``StoreUnreadable``,
    ``SchemaTooNew``…) are raised before anything listens; closing flushes queued hot
    writes.
    """
    fd_raised = ensure_fd_limit(settings.max_connections) if settings.is_http else None
    storage = open_storage(settings)
    with storage.lock(
        "One server serves one MEMORY_DATA_DIR: stop the other one, or give this one its "
        "own directory."
    ):
        _serve_locked(settings, storage, fd_raised)


def _serve_locked(settings: Settings, storage: Storage, fd_raised: tuple[int, int] | None) -> None:
    holder = StoreHolder.for_settings(settings)
    store = holder.acquire()
    try:
        _log.info(
            "memory_server_starting",
            transport=settings.transport.value,
            host=settings.host if settings.is_http else None,
            port=settings.port if settings.is_http else None,
            **storage.log_fields(),
            robot_id=settings.robot_id,
            auth="bearer" if settings.token is not None else "none",
            robot_tokens=len(settings.robot_token_map),
            documents=store.count(),
        )
        if settings.is_http:
            shares = share_limits(settings)
            _log.info(
                "http_limits",
                max_connections=settings.max_connections,
                header_timeout_s=settings.header_timeout_s,
                fd_soft_limit_raised=list(fd_raised) if fd_raised else None,
                robot_max_streams=shares.max_streams,
                robot_max_requests=shares.max_requests,
                robot_max_sessions=shares.max_sessions,
                admin_reserve=shares.admin_reserve,
            )
            room_warning = shares.room_warning(settings.max_connections)
            if room_warning is not None and settings.robot_token_map:
                _log.warning("robot_share_exceeds_room", detail=room_warning)
        if settings.is_http and settings.token is None and settings.host not in _LOOPBACK:
            _log.warning(
                "serving_without_auth",
                host=settings.host,
                detail="MEMORY_TOKEN is unset and the server binds a non-loopback address",
            )
        mcp = build_server(settings, holder=holder)
        if settings.transport is Transport.STDIO:
            anyio.run(mcp.run_stdio_async)
        else:
            config = uvicorn.Config(
                build_http_app(settings, mcp, holder),
                host=settings.host,
                port=settings.port,
                log_config=None,  # keep our structlog handler on the root logger
                lifespan="on",
                timeout_graceful_shutdown=5,  # open SSE streams must not block a SIGTERM
                server_header=False,
                # Header timeout + connection cap; not uvicorn's limit_concurrency, which
                # counts half-open connections and would 503 real requests (0006).
                http=limited_h11_protocol(settings.max_connections, settings.header_timeout_s),
                ws="none",  # no websocket routes; an upgrade is answered as plain HTTP
                backlog=ACCEPT_BACKLOG,  # also the size of one accept batch: in the fd budget
            )
            uvicorn.Server(config).run()
    finally:
        holder.release()
        _log.info("memory_server_stopped")
