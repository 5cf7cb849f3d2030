"""A robot's share of the server: of its connections (HTTP) and of its calls (the tools).

One robot token must not be able to take the server from the rest of the fleet. Its
share has two parts, counted where they are spent:

- **connections** (:class:`ConnectionShares`, used by the HTTP middleware): long-lived
  streams, requests in progress and streamable-HTTP sessions per robot, and the
  connection slots every robot leaves to the admin (:class:`ShareLimits`); a request past
  them is a :class:`Refusal` (``429`` with ``Retry-After``), decision 0020;
- **calls** (:class:`CallShares`, used by the tool runner): per robot and :class:`Lane`,
  calls running at once, calls waiting and the fraction of time they may run; a call past
  them is :class:`~robot_mcp_memory.Busy` (answered ``busy``), decision 0021.

Pure: no ASGI, no MCP. Used from the event loop's thread only.
"""

from __future__ import annotations

from robot_mcp_memory.shares._calls import CallShares, Lane
from robot_mcp_memory.shares._connections import (
    RETRY_AFTER_S,
    ConnectionShares,
    Refusal,
    SessionsHeld,
    Share,
    ShareLimits,
)

__all__ = [
    "RETRY_AFTER_S",
    "CallShares",
    "ConnectionShares",
    "Lane",
    "Refusal",
    "SessionsHeld",
    "Share",
    "ShareLimits",
]
