"""Who opened each streamable-HTTP session, and which sessions each robot holds.

How the MCP SDK (1.28-1.30) keeps sessions, as this module mirrors it from outside: its
``StreamableHTTPSessionManager`` opens a session for a ``POST`` without an ``mcp-session-id``
header that it answers with a status below 400, and names it in that answer's
``mcp-session-id`` header (``uuid4().hex``). It then serves every request whose header
equals that id exactly — Starlette's first ``mcp-session-id`` header, decoded as latin-1,
compared as a string — and answers any other id ``404``. A session ends when its client
DELETEs it, when no request has been in flight for the manager's ``session_idle_timeout``
(FastMCP's default: 30 minutes; unset, never), or when its server task ends; its id then
answers 404.

:class:`SessionBook` is fed by the tenant middleware, which sees every request and every
answer: :meth:`~SessionBook.bind` when an answer names a new session, :meth:`~SessionBook.begin`
/ :meth:`~SessionBook.end` around each request for it, :meth:`~SessionBook.forget` when the SDK
answered 404 for it or a DELETE of it succeeded. A session the SDK ended on its own (idle)
is forgotten here once it has been idle for the SDK's timeout plus :data:`IDLE_GRACE_S`:
this book's clock starts after the SDK's for the same request, so the SDK has always let the
session go first, and an id is never unbound while the SDK would still serve it.

Used from the event loop thread only.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from robot_mcp_memory.shares import SessionsHeld
from robot_mcp_memory.tenant import Tenant

__all__ = ["IDLE_GRACE_S", "PRUNE_INTERVAL_S", "SessionBook"]

IDLE_GRACE_S = 60.0
"""Seconds past the SDK's idle timeout before an idle session is forgotten here."""

PRUNE_INTERVAL_S = 10.0
"""At most one sweep for sessions the SDK let go idle per this many seconds."""


class _Session:
    """One session: its opener, requests in flight, when it was last used."""

    def __init__(self, owner: Tenant, now: float) -> None:
        self.owner = owner
        self.in_flight = 0
        self.last_used = now
        self.evicting = False  # being ended by the server; no longer counted as held


class SessionBook:
    """The opener of every live streamable-HTTP session; per robot, its sessions, least
    recently used first.

    Args:
        idle_timeout_s: the SDK's ``session_idle_timeout``; None when sessions never expire
            there (then they are forgotten here only on 404, DELETE or eviction).
        clock: monotonic seconds; a test passes a fake.

    Counters (``bound``, ``forgotten``, ``expired``) are totals since start.
    Not thread-safe: used from the event loop thread only.
    """

    def __init__(
        self,
        *,
        idle_timeout_s: float | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.idle_timeout_s = idle_timeout_s
        self._clock = clock
        self._sessions: OrderedDict[str, _Session] = OrderedDict()  # least recently used first
        self._by_robot: dict[str, OrderedDict[str, None]] = {}
        self._next_prune = clock() + PRUNE_INTERVAL_S
        self.bound = 0
        self.forgotten = 0
        self.expired = 0

    def bind(self, session_id: str, owner: Tenant) -> None:
        """``session_id`` was just opened by ``owner``."""
        self._prune()
        self._drop(session_id)
        self._sessions[session_id] = _Session(owner, self._clock())
        if owner.robot is not None:
            self._by_robot.setdefault(owner.robot, OrderedDict())[session_id] = None
        self.bound += 1

    def owner(self, session_id: str) -> Tenant | None:
        """The tenant that opened ``session_id``; None for an id this book does not know."""
        self._prune()
        entry = self._sessions.get(session_id)
        return entry.owner if entry is not None else None

    def begin(self, session_id: str) -> None:
        """A request for ``session_id`` is being served (no-op for an unknown id)."""
        entry = self._sessions.get(session_id)
        if entry is not None:
            entry.in_flight += 1
            self._touch(session_id, entry)

    def end(self, session_id: str) -> None:
        """A request :meth:`begin` counted has been answered (no-op for an unknown id)."""
        entry = self._sessions.get(session_id)
        if entry is not None:
            entry.in_flight = max(0, entry.in_flight - 1)
            self._touch(session_id, entry)

    def forget(self, session_id: str) -> None:
        """``session_id`` has ended in the SDK (DELETE answered, 404 answered, evicted)."""
        if self._drop(session_id):
            self.forgotten += 1

    def held(self, robot: str) -> SessionsHeld:
        """How many sessions ``robot`` holds (those being evicted aside) and how many are idle."""
        held = idle = 0
        for session_id in self._by_robot.get(robot, ()):
            entry = self._sessions[session_id]
            if not entry.evicting:
                held += 1
                idle += entry.in_flight == 0
        return SessionsHeld(held, idle)

    def pick_victim(self, robot: str, *, keep: int, spare: str) -> str | None:
        """The session to end so that ``robot`` holds at most ``keep``, or None when it does.

        The least recently used idle session, else the least recently used one; never
        ``spare`` (the session just opened). The one picked is marked as being evicted (no
        longer counted nor picked again) but stays bound to its opener until
        :meth:`forget`, so nobody else can use its id while the SDK still serves it.
        """
        if self.held(robot).held <= keep:
            return None
        candidates = [
            session_id
            for session_id in self._by_robot.get(robot, ())
            if session_id != spare and not self._sessions[session_id].evicting
        ]
        if not candidates:
            return None
        idle = [s for s in candidates if self._sessions[s].in_flight == 0]
        victim = (idle or candidates)[0]
        self._sessions[victim].evicting = True
        return victim

    def keep(self, session_id: str) -> None:
        """A session :meth:`pick_victim` picked could not be ended: count it as held again."""
        entry = self._sessions.get(session_id)
        if entry is not None:
            entry.evicting = False

    def __len__(self) -> int:
        return len(self._sessions)

    def __repr__(self) -> str:
        return (
            f"SessionBook(sessions={len(self._sessions)}, robots={len(self._by_robot)}, "
            f"bound={self.bound}, forgotten={self.forgotten}, expired={self.expired})"
        )

    def _touch(self, session_id: str, entry: _Session) -> None:
        entry.last_used = self._clock()
        self._sessions.move_to_end(session_id)
        robot = entry.owner.robot
        if robot is not None:
            self._by_robot[robot].move_to_end(session_id)

    def _drop(self, session_id: str) -> bool:
        entry = self._sessions.pop(session_id, None)
        if entry is None:
            return False
        robot = entry.owner.robot
        if robot is not None:
            mine = self._by_robot[robot]
            mine.pop(session_id, None)
            if not mine:
                del self._by_robot[robot]
        return True

    def _prune(self) -> None:
        """Forget the sessions the SDK has already ended for idleness (one sweep per
        :data:`PRUNE_INTERVAL_S`)."""
        if self.idle_timeout_s is None:
            return
        now = self._clock()
        if now < self._next_prune:
            return
        self._next_prune = now + PRUNE_INTERVAL_S
        cutoff = now - self.idle_timeout_s - IDLE_GRACE_S
        stale: list[str] = []
        for session_id, entry in self._sessions.items():  # least recently used first
            if entry.last_used > cutoff:
                break
            if entry.in_flight == 0 and not entry.evicting:
                stale.append(session_id)
        for session_id in stale:
            self._drop(session_id)
        self.expired += len(stale)
