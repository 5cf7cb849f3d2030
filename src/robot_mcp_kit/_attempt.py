"""Delivering one queued event: its attempts, each signed afresh, under one deadline.

Each attempt signs the event's body bytes with a fresh timestamp (``X-RVC-*`` headers, and
the Standard Webhooks ones when asked), sends them within ``timeout_s`` of real time,
reads at most a little of the answer's body, and on failure waits the retry policy's
pause (lengthened by a ``Retry-After``) before the next attempt, until a 2xx or the cap.
:class:`PosterAttempts` is a base of :class:`~robot_mcp_kit.events.EventPoster`, whose
``__init__`` sets the attributes declared here.
"""

from __future__ import annotations

import asyncio
import email.utils
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import httpx

from robot_mcp_kit._retry import Clock, RetryPolicy
from robot_mcp_kit.log import get_logger
from robot_mcp_kit.signing import signed_headers, standard_headers

__all__ = ["PosterAttempts"]

_log = get_logger("robot_mcp_kit.events")

_DRAIN_LIMIT = 64 * 1024
"""Bytes of a response body read (and discarded) so the connection can be reused."""

_DRAIN_TIMEOUT_S = 1.0
"""The most real time spent reading (and discarding) a response body after its status.

Within the attempt's ``timeout_s``: reading the body never extends an attempt."""


@dataclass(slots=True)
class _Item:
    """One event on the queue: its body bytes and the facts its log lines name."""

    event_id: str
    task_id: str
    seq: int
    body: bytes
    n: int = 0
    """Outbox only: the item's number in acceptance order (durability watermark)."""
    enqueued_at: float | None = None
    """Outbox only, recovered items: wall time first accepted (the budget starts there)."""


class _GraceExpired(Exception):
    """The close grace ran out while an event was waiting for its next attempt."""


class PosterAttempts:
    """The delivery of one event, for an :class:`~robot_mcp_kit.events.EventPoster`."""

    if TYPE_CHECKING:

        @property
        def server_name(self) -> str: ...

        @property
        def standard_webhooks(self) -> bool: ...

        @property
        def retry(self) -> RetryPolicy: ...

        @property
        def timeout_s(self) -> float: ...

    _secret: str
    _secrets: Sequence[str]
    _url: str
    _clock: Clock
    _transport: httpx.AsyncBaseTransport | None
    _client: httpx.AsyncClient | None
    _close_deadline: float | None
    _sent: int
    _retried: int
    _given_up: int

    async def _deliver(self, item: _Item) -> Literal["delivered", "given_up"]:
        clock, policy = self._clock, self.retry
        client = self._client or self._make_client()
        url = self._url
        started = clock.monotonic()
        if item.enqueued_at is not None:
            # Recovered from the outbox: the 10-minute budget began when it was accepted.
            started -= max(0.0, clock.time() - item.enqueued_at)
        attempt = 0
        while True:
            attempt += 1
            now = int(clock.time())
            headers = signed_headers(self.server_name, self._secret, item.body, now)
            if self.standard_webhooks:
                headers.update(standard_headers(item.event_id, self._secrets, item.body, now))
            retry_after: float | None = None
            delivered = False
            status = 0
            problem = ""
            try:
                # One deadline for the whole attempt (stamina's habit): httpx's timeout
                # bounds each read, and a receiver trickling a byte per second would
                # never trip it (issue 9, finding 3).
                async with asyncio.timeout(self.timeout_s):
                    request = client.build_request("POST", url, content=item.body, headers=headers)
                    response = await client.send(request, stream=True)
                    try:
                        status = response.status_code
                        if 200 <= status < 300:
                            delivered = True  # the status is the acknowledgement
                        else:
                            retry_after = _retry_after_s(response.headers.get("Retry-After"), clock)
                            problem = f"status {status}"
                        await _drain(response)
                    finally:
                        await response.aclose()
            except TimeoutError:  # the attempt's own deadline (httpx raises its own types)
                if not delivered and not problem:
                    problem = f"no complete answer within the {self.timeout_s:g} s attempt deadline"
            except Exception as exc:  # resets, garbage: all retried
                if not delivered:
                    problem = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            if delivered:
                self._sent += 1
                _log.debug(
                    "event_delivered",
                    server=self.server_name,
                    event_id=item.event_id,
                    task_id=item.task_id,
                    seq=item.seq,
                    attempt=attempt,
                    status=status,
                )
                return "delivered"
            elapsed = clock.monotonic() - started
            delay = policy.next_delay(attempt, elapsed, retry_after)
            if delay is None:
                self._given_up += 1
                _log.error(
                    "event_given_up",
                    server=self.server_name,
                    event_id=item.event_id,
                    task_id=item.task_id,
                    seq=item.seq,
                    attempts=attempt,
                    elapsed_s=round(elapsed, 1),
                    cap_s=policy.give_up_after_s,
                    last_failure=problem,
                    covered_by="the brain's reconciliation poll",
                )
                return "given_up"
            if self._close_deadline is not None and (
                clock.monotonic() + delay > self._close_deadline
            ):
                raise _GraceExpired
            _log.warning(
                "poster_retry",
                server=self.server_name,
                event_id=item.event_id,
                task_id=item.task_id,
                seq=item.seq,
                attempt=attempt,
                failure=problem,
                retry_in_s=delay,
            )
            self._retried += 1
            await clock.sleep(delay)

    def _make_client(self) -> httpx.AsyncClient:
        # trust_env=False: the callback is a direct (usually loopback) endpoint; an
        # ambient HTTP_PROXY in a service's environment must not reroute signed events.
        self._client = httpx.AsyncClient(
            transport=self._transport, timeout=self.timeout_s, trust_env=False
        )
        return self._client


async def _drain(response: httpx.Response) -> None:
    """Read (and discard) a little of the body so the kept-alive connection is reusable.

    At most :data:`_DRAIN_LIMIT` bytes for at most :data:`_DRAIN_TIMEOUT_S` seconds; never
    raises (the status already decided the outcome). A body left unread makes
    ``response.aclose()`` close the connection instead of reusing it.
    """
    seen = 0
    try:
        async with asyncio.timeout(_DRAIN_TIMEOUT_S):
            async for chunk in response.aiter_raw():
                seen += len(chunk)
                if seen > _DRAIN_LIMIT:
                    break
    except Exception as exc:  # the status already decided the outcome
        _log.debug("response_body_unreadable", status=response.status_code, error=repr(exc))


def _retry_after_s(value: str | None, clock: Clock) -> float | None:
    """Parse a ``Retry-After`` (delta seconds or an HTTP date) into seconds, or None."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        seconds = when.timestamp() - clock.time()
    if seconds != seconds or seconds < 0:  # NaN or in the past
        return None
    return seconds
