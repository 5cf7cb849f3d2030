"""Connection limits of the HTTP transports: a header timeout, a connection cap, an fd budget.

Uvicorn times out idle keep-alive connections but not a connection that is still sending its
request head, so a client that sends half its headers holds a socket forever; a few hundred
of them exhaust the process's file descriptors and then nothing, ``/healthz`` included, is
accepted any more. :func:`limited_h11_protocol` builds uvicorn's h11 protocol with
two additions, configured through ``uvicorn.Config(http=...)``:

- **Header timeout.** A timer is armed when a connection opens, and again when bytes of a
  next request arrive on a kept-alive connection; it is cancelled once h11 has parsed a
  complete request head. When it fires the connection is closed (with ``408`` if part of a
  request had arrived). The deadline counts from the first byte, so trickling one byte a
  second does not extend it.
- **Connection cap.** At most ``max_connections`` connections are open. A connection that
  arrives at the cap sheds the connection that has waited longest *without a request in
  progress* (a half-sent head or an idle keep-alive connection); only when every open
  connection is serving a request (SSE streams included) is the new one refused: ``503``
  and closed at once. Uvicorn's own ``limit_concurrency`` is not used: it counts half-open
  connections too and answers ``503`` to every real request while they are held, which
  is what a slow-loris client wants.

:func:`ensure_fd_limit` makes sure the soft ``RLIMIT_NOFILE`` covers the cap plus what
asyncio may accept in one batch (:data:`ACCEPT_BACKLOG`) plus the process's own files
(:data:`FD_RESERVE`), raising the soft limit up to the hard one when needed and refusing
to start when the hard limit is too low.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from robot_mcp_kit.log import get_logger
from robot_mcp_memory._exceptions import SettingsError
from robot_mcp_memory.logs import RateLimiter

__all__ = [
    "ACCEPT_BACKLOG",
    "FD_RESERVE",
    "ConnectionTracker",
    "LimitedH11Protocol",
    "ensure_fd_limit",
    "fd_budget",
    "limited_h11_protocol",
]

ACCEPT_BACKLOG = 128
"""The listen backlog; asyncio also accepts up to this many connections in one batch."""

FD_RESERVE = 64
"""File descriptors kept for everything but client connections (SQLite, stdio, the loop)."""

_REPLY_408 = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
_REPLY_503 = b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"

_log = get_logger("robot_mcp_memory.http")


class ConnectionTracker:
    """The open connections of one server, and which of them are waiting for a request.

    ``waiting`` is ordered oldest first: the connection shed at the cap is its first entry.
    Counters (``timed_out``, ``shed``, ``refused``) are totals since start, for tests and logs.
    Used from the event loop thread only.
    """

    def __init__(self, max_connections: int, *, log_interval_s: float | None = None) -> None:
        self.max_connections = max_connections
        self.open: set[LimitedH11Protocol] = set()
        self.waiting: dict[LimitedH11Protocol, None] = {}
        self.timed_out = 0
        self.shed = 0
        self.refused = 0
        self._log_limit = RateLimiter() if log_interval_s is None else RateLimiter(log_interval_s)

    def admit(self, conn: LimitedH11Protocol) -> bool:
        """Make room for ``conn`` (shedding the longest-waiting connection at the cap) and
        register it; False when every slot is serving a request."""
        if len(self.open) >= self.max_connections:
            oldest = next(iter(self.waiting), None)
            if oldest is None:
                self.refused += 1
                self._note("http_connection_refused", detail="every connection is busy")
                return False
            self.shed += 1
            self._note("http_connection_shed", detail="connection cap reached")
            oldest.drop(None)
            self.forget(oldest)
        self.open.add(conn)
        return True

    def forget(self, conn: LimitedH11Protocol) -> None:
        """``conn`` is gone."""
        self.open.discard(conn)
        self.waiting.pop(conn, None)

    def set_waiting(self, conn: LimitedH11Protocol, waiting: bool) -> None:
        """Mark ``conn`` as waiting for a request (sheddable) or serving one."""
        if not waiting:
            self.waiting.pop(conn, None)
        elif conn not in self.waiting and conn in self.open:
            self.waiting[conn] = None

    def note_timeout(self) -> None:
        """A connection did not complete its request head in time."""
        self.timed_out += 1
        self._note("http_header_timeout", detail="request head not complete in time")

    def _note(self, event: str, *, detail: str) -> None:
        # One line per kind per interval: these happen once per attacking connection.
        dropped = self._log_limit.allow(event)
        if dropped is not None:
            _log.warning(
                event,
                detail=detail,
                suppressed=dropped,
                open=len(self.open),
                max_connections=self.max_connections,
            )


class LimitedH11Protocol(H11Protocol):
    """Uvicorn's h11 protocol with a header timeout and a connection cap.

    Do not use directly: :func:`limited_h11_protocol` makes a subclass bound to one
    :class:`ConnectionTracker` and timeout.
    """

    tracker: ClassVar[ConnectionTracker]
    header_timeout_s: ClassVar[float]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None
        self._admitted = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if not self.tracker.admit(self):
            transport.write(_REPLY_503)
            transport.close()
            return
        self._admitted = True
        super().connection_made(transport)
        self.tracker.set_waiting(self, True)
        self._arm_header_timer()

    def data_received(self, data: bytes) -> None:
        if not self._admitted:
            return
        super().data_received(data)
        self._follow_request_state()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow_request_state(arm=False)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._admitted:
            return
        self._cancel_header_timer()
        self.tracker.forget(self)
        super().connection_lost(exc)

    def drop(self, reply: bytes | None) -> None:
        """Close this connection now, after ``reply`` if the socket can take it at once.

        Aborts instead of closing when bytes are still queued (a client that does not read
        must not keep the descriptor open).
        """
        self._cancel_header_timer()
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if reply is not None and transport.get_write_buffer_size() == 0:
            transport.write(reply)
        if transport.get_write_buffer_size() > 0:
            transport.abort()
        else:
            transport.close()

    def _awaiting_request(self) -> bool:
        """True while no request is in progress: no head yet, or idle between requests."""
        return self.conn.their_state is h11.IDLE and (
            self.cycle is None or self.cycle.response_complete
        )

    def _follow_request_state(self, *, arm: bool = True) -> None:
        if self.transport is None or self.transport.is_closing():
            self._cancel_header_timer()
            return
        if self._awaiting_request():
            self.tracker.set_waiting(self, True)
            # Bytes of a next request on a kept-alive connection: uvicorn has just cancelled
            # its keep-alive timer, so the head is on our clock now.
            if arm and self._header_timer is None and self._partial_head():
                self._arm_header_timer()
        else:
            self.tracker.set_waiting(self, False)
            self._cancel_header_timer()

    def _partial_head(self) -> bool:
        return bool(self.conn.trailing_data[0])

    def _arm_header_timer(self) -> None:
        self._cancel_header_timer()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._header_timeout)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_timeout(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or not self._awaiting_request():
            return
        self.tracker.note_timeout()
        self.drop(_REPLY_408 if self._partial_head() else None)


def limited_h11_protocol(max_connections: int, header_timeout_s: float) -> type[LimitedH11Protocol]:
    """A :class:`LimitedH11Protocol` subclass with its own tracker, for one uvicorn server.

    The tracker is reachable as ``cls.tracker``.
    """
    if max_connections < 1:
        raise ValueError("max_connections must be at least 1")
    if not header_timeout_s > 0:
        raise ValueError("header_timeout_s must be positive")
    tracker = ConnectionTracker(max_connections)
    timeout_s = header_timeout_s

    class BoundLimitedH11Protocol(LimitedH11Protocol):
        pass

    BoundLimitedH11Protocol.tracker = tracker
    BoundLimitedH11Protocol.header_timeout_s = timeout_s
    return BoundLimitedH11Protocol


def fd_budget(max_connections: int) -> int:
    """File descriptors the server needs for ``max_connections``: cap + backlog + reserve."""
    return max_connections + ACCEPT_BACKLOG + FD_RESERVE


def ensure_fd_limit(max_connections: int) -> tuple[int, int] | None:
    """Make the soft ``RLIMIT_NOFILE`` at least :func:`fd_budget` (``max_connections``).

    Returns ``(old_soft, new_soft)`` when the soft limit was raised, None when it was
    already enough (or the platform has no such limit).

    Raises:
        SettingsError: the hard limit is below the budget (one line: what is needed, what
            the limit is, what to change).
    """
    if sys.platform == "win32":  # pragma: no cover - no RLIMIT_NOFILE there
        return None
    import resource

    need = fd_budget(max_connections)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return None
    if hard != resource.RLIM_INFINITY and hard < need:
        raise SettingsError(
            "MEMORY_MAX_CONNECTIONS",
            f"MEMORY_MAX_CONNECTIONS={max_connections} needs {need} file descriptors "
            f"({max_connections} connections + {ACCEPT_BACKLOG} accept backlog + "
            f"{FD_RESERVE} reserve) but the hard limit is {hard}: raise it (systemd "
            "LimitNOFILE=, docker run --ulimit nofile=) or lower MEMORY_MAX_CONNECTIONS",
        )
    resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    return soft, need
