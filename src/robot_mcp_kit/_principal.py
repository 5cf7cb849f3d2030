"""Who is calling: the :class:`Principal` of the MCP request being served.

A task belongs to the principal whose request started it, and the task tools answer
another principal's task as an unknown id (``docs/contract.md`` §13). The principal is
read from the access token the framework's authentication put in the request's context
(mcp's ``auth_context``, which mcp 1.x ``FastMCP``, mcp 2.x ``MCPServer`` and standalone
FastMCP all set); without authentication every caller is :data:`ANONYMOUS`.

Imports no MCP framework: the auth context is read only from a module the framework
already loaded.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["ANONYMOUS", "Principal", "current_principal"]

_AUTH_CONTEXT_MODULE = "mcp.server.auth.middleware.auth_context"


@dataclass(frozen=True, slots=True)
class Principal:
    """The identity behind a request: its access token's client, issuer and subject.

    The same three components mcp uses for session ownership (a verifier that supplies
    no issuer or subject leaves them None, and two tokens of one client are then one
    principal). :data:`ANONYMOUS` (all None) is every caller of a server without
    authentication.
    """

    client_id: str | None = None
    issuer: str | None = None
    subject: str | None = None

    @property
    def key(self) -> str:
        """The principal as one string: ``""`` for :data:`ANONYMOUS`, else the JSON array
        ``[client_id, issuer, subject]`` (what a task's owner is journalled as, and what a
        native task id is bound to)."""
        if self == ANONYMOUS:
            return ""
        return json.dumps([self.client_id, self.issuer, self.subject])


ANONYMOUS = Principal()
"""The one principal of a server without authentication (and of code outside a request)."""


def current_principal() -> Principal:
    """The principal of the MCP request this code runs in; :data:`ANONYMOUS` without one.

    Read from mcp's auth context (set by the framework's bearer authentication for the
    request, or for the session it belongs to); outside a request, or on a server without
    authentication, :data:`ANONYMOUS`. Never raises.
    """
    module = sys.modules.get(_AUTH_CONTEXT_MODULE)
    get_access_token = getattr(module, "get_access_token", None)
    if get_access_token is None:
        return ANONYMOUS
    try:
        token = get_access_token()
    except Exception:  # a framework's context we cannot read: no principal
        return ANONYMOUS
    if token is None:
        return ANONYMOUS
    client_id = getattr(token, "client_id", None)
    claims = getattr(token, "claims", None)
    issuer = claims.get("iss") if isinstance(claims, Mapping) else None
    subject = getattr(token, "subject", None)
    return Principal(
        None if client_id is None else str(client_id),
        None if issuer is None else str(issuer),
        None if subject is None else str(subject),
    )
