"""The counters of one :class:`~robot_mcp_kit.events.EventPoster`."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PosterStats"]


@dataclass(frozen=True)
class PosterStats:
    """Counters of one poster, read through :attr:`EventPoster.stats`.

    Attributes:
        posted: events accepted by ``post()`` onto the queue.
        sent: events a receiver acknowledged with a 2xx.
        retried: attempts beyond the first, over all events.
        dropped: events lost without exhausting their retries: pushed out of a full
            queue, posted after ``aclose()``, unserializable, or still undelivered when
            the close grace ran out.
        queued: events accepted and not yet acknowledged or lost (waiting + in flight).
        given_up: events lost after the retry cap (10 minutes of failed attempts).
        kept: events still undelivered when ``aclose()`` ended, left in the durable
            outbox for the next start (always 0 without an outbox).
        recovered: events a poster found pending in its outbox file at start, from a
            previous process (always 0 without an outbox).
    """

    sent: int = 0
    retried: int = 0
    dropped: int = 0
    queued: int = 0
    given_up: int = 0
    posted: int = 0
    kept: int = 0
    recovered: int = 0
