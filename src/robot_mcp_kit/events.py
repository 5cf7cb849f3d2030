"""EventPoster: HTTP + HMAC + retry (kit spec §4.3). SKELETON — being implemented."""

from __future__ import annotations

from dataclasses import dataclass

from robot_mcp_kit.models import TaskEvent

__all__ = ["EventPoster", "PosterStats"]


@dataclass(frozen=True)
class PosterStats:
    """Counters of one poster."""

    sent: int = 0
    retried: int = 0
    dropped: int = 0
    queued: int = 0


class EventPoster:
    """Sends TaskEvents to the brain."""

    def __init__(
        self, server_name: str, callback_url: str | None = None, secret: str | None = None
    ) -> None:
        self.server_name = server_name

    async def post(self, event: TaskEvent) -> None:
        raise NotImplementedError

    async def aclose(self) -> None:
        raise NotImplementedError
