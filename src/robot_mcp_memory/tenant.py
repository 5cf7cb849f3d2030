"""Who a call acts as: the pure tenant type, the tenant of the running request, the token map.

``MEMORY_TOKEN`` authenticates the unscoped admin (:data:`ADMIN`);
``MEMORY_ROBOT_TOKENS="rap-1:tokA,rap-2:tokB"`` (parsed by :func:`parse_robot_tokens`)
issues one token per robot, each a scoped :class:`Tenant` confined to that robot's group
(the rules are :mod:`robot_mcp_memory._policy`). stdio is always unscoped; a server with
neither variable set is open.

Nothing here knows HTTP: :mod:`robot_mcp_memory.http._auth` resolves a request's bearer
token and stores the tenant in the request's ASGI scope under :data:`TENANT_SCOPE_KEY`
(and in :data:`current_tenant` while the app runs); :func:`tenant_of_request` reads it
back from whatever request object the MCP SDK hands a tool call, and :class:`TenantOfCall`
asks the server which request carried the running call.
"""

from __future__ import annotations

import hmac
import re
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

from robot_mcp_memory._exceptions import TokenMapError
from robot_mcp_memory._limits import ID_PATTERN

__all__ = [
    "ADMIN",
    "ASCII_WHITESPACE",
    "TENANT_SCOPE_KEY",
    "CallContexts",
    "Tenant",
    "TenantOfCall",
    "current_tenant",
    "parse_robot_tokens",
    "tenant_of_request",
]

ASCII_WHITESPACE = " \t\r\n\f\v"
"""What may surround a token in the environment: ASCII whitespace only. ``str.strip()``
would also remove Unicode spaces (``\xa0``, ``\x85``…), turning a mangled value into a
valid token."""

TENANT_SCOPE_KEY = "robot_mcp_memory.tenant"
"""The ASGI scope key under which the middleware stores the request's tenant."""


@dataclass(frozen=True)
class Tenant:
    """Who a request authenticated as.

    ``robot`` is None for an unscoped tenant (the ``MEMORY_TOKEN`` admin, stdio, an open
    server): it sees and may change everything. A scoped tenant (a robot token) acts as
    ``robot`` and is confined to that robot's group.
    """

    name: str
    robot: str | None = None

    @property
    def scoped(self) -> bool:
        """True when this tenant is confined to one robot's scope."""
        return self.robot is not None

    @classmethod
    def for_robot(cls, robot: str) -> Tenant:
        """The scoped tenant a robot token authenticates."""
        return cls(name=f"robot:{robot}", robot=robot)


ADMIN = Tenant(name="admin")
"""The tenant ``MEMORY_TOKEN`` authenticates: unscoped."""

current_tenant: ContextVar[Tenant | None] = ContextVar("robot_mcp_memory_tenant", default=None)
"""The tenant of the HTTP request being served; None outside one (stdio, in-process tests)."""


def parse_robot_tokens(text: str, *, admin_token: str | None = None) -> dict[str, str]:
    """Parse ``"rap-1:tokA,rap-2:tokB"`` into ``{token: robot}``.

    The grammar: comma-separated ``robot:token`` entries; ASCII whitespace (space, tab,
    CR, LF, FF, VT) around an entry, the robot or the token is ignored, any other space
    (``\xa0``, ``\x85``…) is part of it and refused; empty entries (a trailing comma) are
    skipped. A robot id is 1–64 letters, digits, ``.``, ``_`` or ``-`` starting with a
    letter or digit; a token is at least 16 visible ASCII characters without ``,``.

    Raises:
        TokenMapError: an entry without ``:``, a bad robot id, a short or non-ASCII token,
            a robot or a token given twice, or a robot token equal to ``admin_token``. The
            message names the entry by its position and robot, never by its token.
    """
    tokens: dict[str, str] = {}
    robots: set[str] = set()
    for position, raw in enumerate(text.split(","), start=1):
        entry = raw.strip(ASCII_WHITESPACE)
        if not entry:
            continue
        robot, sep, token = (part.strip(ASCII_WHITESPACE) for part in entry.partition(":"))
        where = f"entry {position}"
        if not sep:
            raise TokenMapError(f"{where} has no ':'; write robot:token, e.g. rap-1:<token>")
        if ID_PATTERN.fullmatch(robot) is None:
            raise TokenMapError(
                f"{where}: robot id {robot[:64]!r} is not 1-64 letters, digits, '.', '_' or "
                "'-' starting with a letter or digit"
            )
        where = f"{where} (robot {robot!r})"
        if _TOKEN.fullmatch(token) is None:
            raise TokenMapError(
                f"{where}: the token must be at least 16 visible ASCII characters "
                "without spaces or commas"
            )
        if robot in robots:
            raise TokenMapError(f"{where}: robot {robot!r} is given twice; one token per robot")
        if token in tokens:
            raise TokenMapError(
                f"{where}: this token is already robot {tokens[token]!r}'s; tokens must differ"
            )
        if admin_token is not None and hmac.compare_digest(token, admin_token):
            raise TokenMapError(
                f"{where}: the token equals MEMORY_TOKEN, which would make it the admin's; "
                "issue the robot its own token"
            )
        tokens[token] = robot
        robots.add(robot)
    return tokens


_TOKEN = re.compile(r"[!-+\--~]{16,}")  # visible ASCII (0x21-0x7e) except ',' (0x2c)


def tenant_of_request(request: Any) -> Tenant | None:
    """The tenant the middleware bound to ``request`` (a Starlette request), or None."""
    scope = getattr(request, "scope", None)
    if isinstance(scope, dict):
        tenant = scope.get(TENANT_SCOPE_KEY)
        if isinstance(tenant, Tenant):
            return tenant
    return None


class CallContexts(Protocol):
    """What hands out the running tool call's context: FastMCP's ``get_context()``, whose
    ``request_context.request`` is the request that carried the call (raising
    ``LookupError`` or ``ValueError`` outside one)."""

    def get_context(self) -> Any: ...


class TenantOfCall:
    """Who the running tool call acts as: the tenant bound to the HTTP request that
    carried it (:func:`tenant_of_request`), else :data:`current_tenant`; None (unscoped)
    for stdio and in-process calls. Never what a session remembers.

    Args:
        server: the MCP server whose calls are asked about.
    """

    def __init__(self, server: CallContexts) -> None:
        self._server = server

    def __call__(self) -> Tenant | None:
        try:
            request = self._server.get_context().request_context.request
        except (LookupError, ValueError):  # not inside a request (in-process callers)
            request = None
        return tenant_of_request(request) or current_tenant.get()
