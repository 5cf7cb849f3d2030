"""Whether each server's MCP endpoint answers, and when to try one that did not again.

A server whose repair or reconciliation call fails is tried again after a pause that
doubles from ``first_backoff_s`` up to ``max_backoff_s``; meanwhile repairs and polls of
it wait. The log says it once per episode: ``server_unreachable`` (WARNING) when the first
call fails, ``server_reachable_again`` (INFO) with how long it lasted when one succeeds.
Nothing here raises: an unreachable server never stops the receiver.
"""

from __future__ import annotations

from dataclasses import dataclass

from robot_mcp_kit.log import get_logger

__all__ = ["ServerHealth", "ServerStatus"]

_log = get_logger("robot_mcp_kit.receiver")


@dataclass(frozen=True, slots=True)
class ServerStatus:
    """One server as the receiver sees it (:meth:`Receiver.status
    <robot_mcp_kit.receiver.Receiver.status>`).

    ``reachable`` is None until its MCP endpoint was called (or when it has none);
    ``failures`` counts the calls failed in a row; ``last_error`` is the last failure's
    code and class (never a message that could carry a secret); ``retry_in_s`` how long
    until it is tried again (0: now).
    """

    name: str
    mcp_url: str | None
    reachable: bool | None
    failures: int
    last_error: str | None
    retry_in_s: float
    unreachable_for_s: float

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready view."""
        return {
            "name": self.name,
            "mcp_url": self.mcp_url,
            "reachable": self.reachable,
            "failures": self.failures,
            "last_error": self.last_error,
            "retry_in_s": round(self.retry_in_s, 3),
            "unreachable_for_s": round(self.unreachable_for_s, 3),
        }


class ServerHealth:
    """One server's reachability and backoff. Times are the event loop's (``loop.time()``).

    Args:
        name: the server's name.
        first_backoff_s: the pause after the first failure.
        max_backoff_s: the longest pause.
    """

    def __init__(self, name: str, *, first_backoff_s: float = 1.0, max_backoff_s: float = 60.0):
        self.name = name
        self.first_backoff_s = first_backoff_s
        self.max_backoff_s = max_backoff_s
        self.reachable: bool | None = None
        self.failures = 0
        self.total_failures = 0
        self.last_error: str | None = None
        self.next_try_at = 0.0
        self.down_since: float | None = None

    def __repr__(self) -> str:
        return (
            f"<ServerHealth {self.name} reachable={self.reachable} failures={self.failures} "
            f"last_error={self.last_error!r}>"
        )

    def ready(self, now: float) -> bool:
        """True when a call may be made now (not in a backoff pause)."""
        return now >= self.next_try_at

    def wait_s(self, now: float) -> float:
        """Seconds until the next call may be made (0: now)."""
        return max(0.0, self.next_try_at - now)

    def failed(self, now: float, error: str) -> float:
        """Count a failed call; return the pause before the next one."""
        self.failures += 1
        self.total_failures += 1
        self.last_error = error
        pause = float(min(self.max_backoff_s, self.first_backoff_s * 2.0 ** (self.failures - 1)))
        self.next_try_at = now + pause
        if self.down_since is None:
            self.down_since = now
            _log.warning(
                "server_unreachable",
                server=self.name,
                error=error,
                retry_in_s=pause,
                then="logged again when a call succeeds (server_reachable_again)",
            )
        self.reachable = False
        return pause

    def succeeded(self, now: float) -> None:
        """Count a call that worked; end an unreachable episode."""
        if self.down_since is not None:
            _log.info(
                "server_reachable_again",
                server=self.name,
                failures=self.failures,
                seconds=round(now - self.down_since, 3),
            )
        self.reachable = True
        self.failures = 0
        self.next_try_at = 0.0
        self.down_since = None

    def status(self, now: float, mcp_url: str | None) -> ServerStatus:
        """A snapshot for :meth:`Receiver.status <robot_mcp_kit.receiver.Receiver.status>`."""
        return ServerStatus(
            name=self.name,
            mcp_url=mcp_url,
            reachable=self.reachable,
            failures=self.failures,
            last_error=self.last_error,
            retry_in_s=self.wait_s(now),
            unreachable_for_s=0.0 if self.down_since is None else now - self.down_since,
        )
