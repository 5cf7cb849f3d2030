"""Delivering one queued event: its attempts, each signed afresh, under one deadline.

Each attempt signs the event's body bytes with a fresh timestamp (``X-RVC-*`` headers, and
the Standard Webhooks ones when asked), sends them within ``timeout_s`` of real time,
reads at most a little of the answer's body, and on failure waits the retry policy's
pause (lengthened by a ``Retry-After``) before the next attempt, until a 2xx, the cap, or
the caller's stop time.

With telemetry on (:mod:`robot_mcp_kit.telemetry`) each attempt is a CLIENT span ``POST``
in the trace the event was posted in (``QueuedEvent.trace``), and its request carries that
span's ``traceparent`` (and ``tracestate``), so the receiver can link the event to the tool
call that started its task.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import httpx

from robot_mcp_kit._backlog import QueuedEvent
from robot_mcp_kit._retry import Clock, RetryPolicy
from robot_mcp_kit.log import get_logger
from robot_mcp_kit.signing import signed_headers, standard_headers
from robot_mcp_kit.telemetry import client_span, record, set_attributes

__all__ = ["Delivery", "DeliveryResult", "Outcome"]

_log = get_logger("robot_mcp_kit.events")

_DRAIN_LIMIT = 64 * 1024
"""Bytes of a response body read (and discarded) so the connection can be reused."""

_DRAIN_TIMEOUT_S = 1.0
"""The most real time spent reading (and discarding) a response body after its status.

Within the attempt's ``timeout_s``: reading the body never extends an attempt."""

_REFUSALS = {
    400: "the receiver cannot read this event: compare its version with docs/contract.md",
    401: (
        "the receiver does not accept the signature: check that RVC_EVENT_SECRET is the "
        "brain's secret for this server (during a rotation pass both, the newest first)"
    ),
    404: "nothing takes events at this URL: check RVC_CALLBACK_URL",
    413: (
        "the receiver's body limit is below this event's size: raise the receiver's limit "
        "or lower TaskManager(max_payload_bytes=...)"
    ),
}
_REFUSALS[403] = _REFUSALS[401]
_REFUSALS[405] = _REFUSALS[410] = _REFUSALS[404]
_REFUSALS[415] = _REFUSALS[422] = _REFUSALS[400]
"""Statuses that say the receiver refuses this request as it is, and what usually fixes it.

Refused events are still retried on the schedule (the contract retries every non-2xx);
the first refusal of an event is logged at ERROR with the fix, so an operator can act
while the retries last."""

Outcome = Literal["delivered", "given_up", "grace_expired"]
"""How one delivery ended: acknowledged (2xx), the retry cap reached, or the next pause
would end past the caller's stop time (the event is neither delivered nor given up)."""


@dataclass(frozen=True, slots=True)
class DeliveryResult:
    """How one event's delivery ended."""

    outcome: Outcome
    attempts: int
    """Attempts made (the first included)."""
    last_failure: str = ""
    """Why the last failed attempt failed (empty when the last attempt delivered)."""


class Delivery:
    """Sends one event at a time to a receiver, signed, with retries; owns its HTTP client.

    Args:
        server_name: sent as ``X-RVC-Server``; named in every log line.
        url: the receiver's URL.
        secrets: the HMAC secrets, the newest first (``X-RVC-Signature`` uses it).
        retry: the retry schedule and give-up cap.
        clock: wall clock (signing), monotonic clock (cap, stop time) and sleep.
        timeout_s: the real-time deadline of one whole attempt.
        standard_webhooks: also send the Standard Webhooks headers.
        transport: the httpx transport (tests pass ``httpx.MockTransport``).

    The client is made on first use on the running loop; :meth:`reset` forgets it (for a
    new loop) and :meth:`aclose` closes it. Deliveries of different events may run at
    once (the poster runs one per task lane); they share the client.
    """

    def __init__(
        self,
        server_name: str,
        url: str,
        secrets: Sequence[str],
        *,
        retry: RetryPolicy,
        clock: Clock,
        timeout_s: float,
        standard_webhooks: bool = False,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.server_name = server_name
        self.url = url
        self.retry = retry
        self.timeout_s = timeout_s
        self.standard_webhooks = standard_webhooks
        self._secrets = tuple(secrets)
        self._clock = clock
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._url = httpx.URL(url)
        self.sent = 0
        """Events acknowledged with a 2xx."""
        self.retried = 0
        """Attempts beyond the first, over all events."""
        self.given_up = 0
        """Events given up at the retry cap."""
        self.refused = 0
        """Events a receiver refused at least once with a status in :data:`_REFUSALS`."""

    def __repr__(self) -> str:
        return f"<Delivery {self.url!r} sent={self.sent} retried={self.retried}>"

    async def deliver(
        self,
        item: QueuedEvent,
        stop_at: Callable[[], float | None] | None = None,
        slots: asyncio.Semaphore | None = None,
    ) -> DeliveryResult:
        """Attempt ``item`` until a 2xx, the retry cap, or ``stop_at``.

        ``stop_at`` returns the monotonic time (on the clock) past which no pause may end,
        or None for no limit; it is asked before every pause, so a stop time set while a
        delivery runs still applies. Each attempt holds one of ``slots`` (when given) while
        it is under way, never during a pause. Never raises on a receiver's behaviour.
        """
        clock = self._clock
        client = self._client or self._make_client()
        started = first_attempt = clock.monotonic()
        if item.enqueued_at is not None:
            # Recovered from the outbox: the 10-minute budget began when it was accepted.
            started -= max(0.0, clock.time() - item.enqueued_at)
        attempt = 0
        refused = False
        server = {"robot_mcp.server": self.server_name}
        while True:
            attempt += 1
            attributes = functools.partial(self._span_attributes, item, attempt)
            with client_span("POST", item.trace, attributes) as (attempt_span, trace):
                if slots is None:
                    delivered, status, problem, retry_after = await self._attempt(
                        client, item, trace
                    )
                else:
                    async with slots:
                        delivered, status, problem, retry_after = await self._attempt(
                            client, item, trace
                        )
                first_refusal = status in _REFUSALS and not refused
                refused = refused or first_refusal
                result, delay = self._decide(
                    item,
                    attempt,
                    delivered,
                    status,
                    problem,
                    retry_after,
                    started,
                    stop_at,
                    first_refusal,
                )
                if attempt_span is not None:
                    _describe_attempt(attempt_span, status, problem, result, delay)
            if result is not None:
                if result.outcome != "grace_expired":
                    record(
                        "robot_mcp.poster.delivery.duration",
                        clock.monotonic() - first_attempt,
                        {**server, "robot_mcp.delivery.outcome": result.outcome},
                    )
                return result
            assert delay is not None
            self.retried += 1
            await clock.sleep(delay)

    def _span_attributes(self, item: QueuedEvent, attempt: int) -> dict[str, object]:
        url = self._url
        # Few attributes: each costs the exporter's encoding once per attempt. The server's
        # name is the resource's (OTEL_SERVICE_NAME), the URL the brain's, one per poster.
        return {
            "http.request.method": "POST",
            "server.address": url.host,
            "server.port": url.port,
            "robot_mcp.task.id": item.task_id,
            "robot_mcp.event.id": item.event_id,
            "robot_mcp.event.seq": item.seq,
            "robot_mcp.delivery.attempt": attempt,
        }

    def _decide(
        self,
        item: QueuedEvent,
        attempt: int,
        delivered: bool,
        status: int,
        problem: str,
        retry_after: float | None,
        started: float,
        stop_at: Callable[[], float | None] | None,
        first_refusal: bool,
    ) -> tuple[DeliveryResult | None, float | None]:
        """After one attempt: ``(result, None)`` when the delivery ends, else
        ``(None, the pause before the next attempt)``; counts and logs."""
        clock, policy = self._clock, self.retry
        if delivered:
            self.sent += 1
            _log.debug(
                "event_delivered",
                server=self.server_name,
                event_id=item.event_id,
                task_id=item.task_id,
                seq=item.seq,
                attempt=attempt,
                status=status,
            )
            return DeliveryResult("delivered", attempt), None
        if first_refusal:
            self.refused += 1
            _log.error(
                "event_refused",
                server=self.server_name,
                event_id=item.event_id,
                task_id=item.task_id,
                seq=item.seq,
                status=status,
                size=len(item.body),
                fix=_REFUSALS[status],
                then="retried on the schedule; this task's later events wait, others do not",
            )
        elapsed = clock.monotonic() - started
        delay = policy.next_delay(attempt, elapsed, retry_after)
        if delay is None:
            self.given_up += 1
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
            return DeliveryResult("given_up", attempt, problem), None
        deadline = stop_at() if stop_at is not None else None
        if deadline is not None and clock.monotonic() + delay > deadline:
            return DeliveryResult("grace_expired", attempt, problem), None
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
        return None, delay

    async def _attempt(
        self, client: httpx.AsyncClient, item: QueuedEvent, trace: dict[str, str]
    ) -> tuple[bool, int, str, float | None]:
        """One signed attempt: (delivered, status, failure, Retry-After seconds).

        ``trace`` holds the ``traceparent`` / ``tracestate`` headers to send (or nothing).
        """
        now = int(self._clock.time())
        headers = signed_headers(self.server_name, self._secrets[0], item.body, now)
        headers.update(trace)
        if self.standard_webhooks:
            headers.update(standard_headers(item.event_id, self._secrets, item.body, now))
        retry_after: float | None = None
        delivered = False
        status = 0
        problem = ""
        try:
            # One deadline for the whole attempt (stamina's habit): httpx's timeout bounds
            # each read, and a receiver trickling a byte per second would never trip it.
            async with asyncio.timeout(self.timeout_s):
                request = client.build_request("POST", self.url, content=item.body, headers=headers)
                response = await client.send(request, stream=True)
                try:
                    status = response.status_code
                    if 200 <= status < 300:
                        delivered = True  # the status is the acknowledgement
                    else:
                        retry_after = _retry_after_s(
                            response.headers.get("Retry-After"), self._clock
                        )
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
        return delivered, status, problem, retry_after

    def reset(self) -> None:
        """Forget the HTTP client without closing it (its event loop is gone)."""
        self._client = None

    async def aclose(self) -> None:
        """Close the HTTP client, if one was made. Idempotent."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    def _make_client(self) -> httpx.AsyncClient:
        # trust_env=False: the callback is a direct (usually loopback) endpoint; an
        # ambient HTTP_PROXY in a service's environment must not reroute signed events.
        self._client = httpx.AsyncClient(
            transport=self._transport, timeout=self.timeout_s, trust_env=False
        )
        return self._client


def _describe_attempt(
    attempt_span: object,
    status: int,
    problem: str,
    result: DeliveryResult | None,
    delay: float | None,
) -> None:
    """The outcome attributes of one attempt's CLIENT span."""
    attributes: dict[str, object] = {
        "robot_mcp.delivery.outcome": "retry" if result is None else result.outcome
    }
    if status:
        attributes["http.response.status_code"] = status
    if problem:
        # The status, or the exception's class: never the exception's text.
        attributes["error.type"] = str(status) if status else problem.split(":", 1)[0]
    if delay is not None:
        attributes["robot_mcp.delivery.retry_delay_s"] = delay
    set_attributes(attempt_span, **attributes)


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
