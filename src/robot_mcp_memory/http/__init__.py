"""The HTTP side of the memory server: the ASGI app, auth, and the connection guards.

:func:`serve` runs the server on ``settings.transport``; :func:`build_http_app` wraps the
MCP app in the tenant middleware (:mod:`.auth`) and the JSON-RPC body guard, beside
``/healthz``. Starlette is imported here and nowhere below.
"""

from __future__ import annotations

from robot_mcp_memory.http._app import HEALTHZ_PATH, build_http_app, serve
from robot_mcp_memory.http._limits import ACCEPT_BACKLOG, FD_RESERVE

__all__ = ["ACCEPT_BACKLOG", "FD_RESERVE", "HEALTHZ_PATH", "build_http_app", "serve"]
