"""Each robot's share of the HTTP transports, and the connections kept for the admin.

One robot token must not be able to take the server from the rest of the fleet (decision 0020):
holding SSE streams until ``MEMORY_MAX_CONNECTIONS`` is reached left every other robot
with ``503``. :class:`ConnectionShares` counts, per robot, what it holds *now* and refuses what
would go past its share:

- **streams**: long-lived ``GET`` streams (``/sse``, and ``/mcp`` on streamable HTTP), at
  most ``max_streams``;
- **requests**: requests in progress, streams included, at most ``max_requests``;
- **sessions**: streamable-HTTP sessions, at most ``max_sessions``; a robot at its share
  that opens another has its least recently used idle session ended for it (a brain that
  crashed without ``DELETE`` is not locked out); only when every one of them is busy is
  the new one refused;
- **reserve**: robots together have at most ``max_connections - admin_reserve`` requests
  in progress, so the last ``admin_reserve`` connection slots are never busy with a robot's
  request and the admin always finds one. (Counted from the robots' admitted requests, not
  from the connection tracker's busy connections: those include heads that arrived in the
  same burst and refusals still being answered, so a burst would refuse itself.)

A refusal is a :class:`Refusal`: ``429`` with ``Retry-After`` and a sentence naming the
share, the robot and the environment variable. The admin and unscoped callers have no
share. Used from the event loop thread only.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

from robot_mcp_kit.telemetry import observe
from robot_mcp_memory.settings import (
    DEFAULT_ADMIN_RESERVE,
    DEFAULT_ROBOT_MAX_REQUESTS,
    DEFAULT_ROBOT_MAX_SESSIONS,
    DEFAULT_ROBOT_MAX_STREAMS,
)

__all__ = [
    "RETRY_AFTER_S",
    "ConnectionShares",
    "Refusal",
    "SessionsHeld",
    "Share",
    "ShareLimits",
]


class SessionsHeld(NamedTuple):
    """A robot's streamable-HTTP sessions: how many it holds, and how many are idle."""

    held: int
    idle: int  # no request in flight: no open GET stream, no call being answered


class Share(StrEnum):
    """What a robot ran out of."""

    STREAMS = "streams"  # long-lived GET streams (MEMORY_ROBOT_MAX_STREAMS)
    REQUESTS = "requests"  # requests in progress, streams included (MEMORY_ROBOT_MAX_REQUESTS)
    SESSIONS = "sessions"  # streamable-HTTP sessions, all busy (MEMORY_ROBOT_MAX_SESSIONS)
    RESERVE = "reserve"  # the robots' connection slots are all busy (MEMORY_ADMIN_RESERVE)


RETRY_AFTER_S: dict[Share, int] = {
    Share.STREAMS: 5,  # a stream lasts a session: the robot should end one, not hammer
    Share.REQUESTS: 1,  # a call lasts a moment
    Share.SESSIONS: 5,
    Share.RESERVE: 2,
}
"""The ``Retry-After`` seconds of each refusal."""


@dataclass(frozen=True)
class ShareLimits:
    """The per-robot shares and the admin's reserve of connection slots.

    Raises:
        ValueError: a share below 1, a negative reserve, or more streams than requests
            (a stream is a request in progress).
    """

    max_streams: int = DEFAULT_ROBOT_MAX_STREAMS
    max_requests: int = DEFAULT_ROBOT_MAX_REQUESTS
    max_sessions: int = DEFAULT_ROBOT_MAX_SESSIONS
    admin_reserve: int = DEFAULT_ADMIN_RESERVE

    def __post_init__(self) -> None:
        if min(self.max_streams, self.max_requests, self.max_sessions) < 1:
            raise ValueError("ShareLimits: every per-robot share must be at least 1")
        if self.admin_reserve < 0:
            raise ValueError("ShareLimits: admin_reserve must not be negative")
        if self.max_streams > self.max_requests:
            raise ValueError("ShareLimits: max_streams must not exceed max_requests")

    def room_warning(self, max_connections: int) -> str | None:
        """One line when one robot's request share exceeds the slots robots share
        (the cap minus the reserve); None when it fits."""
        room = max_connections - self.admin_reserve
        if self.max_requests <= room:
            return None
        return (
            f"MEMORY_ROBOT_MAX_REQUESTS={self.max_requests} is more than the {room} connection "
            f"slots robots share (MEMORY_MAX_CONNECTIONS={max_connections} minus "
            f"MEMORY_ADMIN_RESERVE={self.admin_reserve}): one robot can keep every other robot "
            "out; lower MEMORY_ROBOT_MAX_REQUESTS or raise MEMORY_MAX_CONNECTIONS"
        )


@dataclass(frozen=True)
class Refusal:
    """A request past ``robot``'s ``share``: answer ``429``, ``Retry-After: retry_after_s``."""

    share: Share
    robot: str
    limit: int
    detail: str  # one sentence: the share, the robot, the environment variable
    retry_after_s: int


class ConnectionShares:
    """What each robot holds now (streams, requests in progress), against its shares.

    :meth:`admit` either counts a request and returns None, or returns the
    :class:`Refusal` and counts nothing; every admitted request is given back with
    :meth:`release`. ``refused`` counts refusals per :class:`Share` since start.

    Args:
        limits: the shares and the reserve.
        max_connections: the server's connection cap (``MEMORY_MAX_CONNECTIONS``); robots
            together have at most ``max_connections - limits.admin_reserve`` requests in
            progress. None leaves the reserve unchecked.
    """

    def __init__(self, limits: ShareLimits, *, max_connections: int | None = None) -> None:
        self.limits = limits
        self.max_connections = max_connections
        self._streams: dict[str, int] = {}
        self._requests: dict[str, int] = {}
        self._total = 0  # every robot's requests in progress
        self.refused: Counter[Share] = Counter()
        observe("robot_mcp.memory.connections", self, _connections)

    def admit(
        self, robot: str, *, stream: bool = False, sessions: SessionsHeld | None = None
    ) -> Refusal | None:
        """Count a request of ``robot``, or say which share it would exceed.

        Args:
            stream: the request opens a long-lived stream.
            sessions: for a request that opens a streamable-HTTP session, what the robot
                holds already; refused only when it is at its share and none is idle.
        """
        refusal = self._check(robot, stream=stream, sessions=sessions)
        if refusal is not None:
            self.refused[refusal.share] += 1
            return refusal
        self._requests[robot] = self._requests.get(robot, 0) + 1
        self._total += 1
        if stream:
            self._streams[robot] = self._streams.get(robot, 0) + 1
        return None

    def release(self, robot: str, *, stream: bool = False) -> None:
        """An admitted request of ``robot`` has ended (answered, cancelled or disconnected)."""
        if _decrement(self._requests, robot):
            self._total -= 1
        if stream:
            _decrement(self._streams, robot)

    def streams(self, robot: str) -> int:
        """Long-lived streams ``robot`` holds now."""
        return self._streams.get(robot, 0)

    def requests(self, robot: str) -> int:
        """Requests of ``robot`` in progress now, streams included."""
        return self._requests.get(robot, 0)

    @property
    def total(self) -> int:
        """Every robot's requests in progress now."""
        return self._total

    def __repr__(self) -> str:
        return (
            f"ConnectionShares(robots={len(self._requests)}, requests={self._total}, "
            f"streams={sum(self._streams.values())}, refused={dict(self.refused)})"
        )

    def _check(self, robot: str, *, stream: bool, sessions: SessionsHeld | None) -> Refusal | None:
        limits = self.limits
        if stream and self.streams(robot) >= limits.max_streams:
            return _refusal(
                Share.STREAMS,
                robot,
                limits.max_streams,
                f"robot {robot!r} already holds {self.streams(robot)} open streams, its share "
                f"(MEMORY_ROBOT_MAX_STREAMS={limits.max_streams}); end one of its sessions "
                "before opening another stream",
            )
        if self.requests(robot) >= limits.max_requests:
            return _refusal(
                Share.REQUESTS,
                robot,
                limits.max_requests,
                f"robot {robot!r} already has {self.requests(robot)} requests in progress, its "
                f"share (MEMORY_ROBOT_MAX_REQUESTS={limits.max_requests}, open streams "
                "included); retry once one has been answered",
            )
        if sessions is not None and sessions.held >= limits.max_sessions and not sessions.idle:
            return _refusal(
                Share.SESSIONS,
                robot,
                limits.max_sessions,
                f"robot {robot!r} already holds {sessions.held} streamable-HTTP sessions, all "
                f"busy, its share (MEMORY_ROBOT_MAX_SESSIONS={limits.max_sessions}); end one "
                "with DELETE, or retry once one is idle",
            )
        cap = self.max_connections
        if cap is not None and self._total >= cap - limits.admin_reserve:
            room = cap - limits.admin_reserve
            return _refusal(
                Share.RESERVE,
                robot,
                room,
                f"robots have {self._total} requests in progress, every connection slot they "
                f"share (MEMORY_MAX_CONNECTIONS={cap} minus MEMORY_ADMIN_RESERVE="
                f"{limits.admin_reserve} kept for the admin); robot {robot!r} should retry "
                "shortly",
            )
        return None


def _connections(shares: ConnectionShares) -> list[tuple[float, dict[str, str]]]:
    """``robot_mcp.memory.connections``: the long-lived MCP streams each robot holds now.

    Read on the exporter's thread: a copy of the dict (a change during the copy fails this
    one collection, which the telemetry module skips)."""
    return [(n, {"robot_mcp.robot": robot}) for robot, n in dict(shares._streams).items()]


def _refusal(share: Share, robot: str, limit: int, detail: str) -> Refusal:
    return Refusal(share, robot, limit, detail, RETRY_AFTER_S[share])


def _decrement(counts: dict[str, int], robot: str) -> bool:
    """One less for ``robot``; False when it had none."""
    held = counts.get(robot, 0)
    if held > 1:
        counts[robot] = held - 1
    else:
        counts.pop(robot, None)
    return held > 0
