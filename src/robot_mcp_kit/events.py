"""EventPoster: sends signed TaskEvents to the brain, in order, at least once (kit spec §3.1, §4.3).

One poster per server. :meth:`EventPoster.post` puts the event on one bounded FIFO queue
and returns at once; one background worker per poster sends the queue head, retrying it
on the schedule of :class:`~robot_mcp_kit._retry.RetryPolicy` until a 2xx acknowledges it
or the 10-minute cap gives it up. One queue and one worker mean events leave in the order
they were posted, so each task's events arrive in ``seq`` order.

Contracts:

- ``post()`` never blocks on the network and never raises. When the queue is full the
  OLDEST waiting event is dropped, logged at ERROR and counted.
- The body bytes are produced once per event; each attempt signs them with a fresh
  timestamp, so a retry ten minutes later still passes the receiver's ±300 s check.
- Any non-2xx status, timeout, connection error or unreadable response is retried
  (0.5 s, 2 s, 8 s, then every 30 s). A ``Retry-After`` in seconds or as an HTTP date
  lengthens the next pause up to 30 s, never shortens it.
- One attempt lasts at most ``timeout_s`` (10 s) of real time, whatever the receiver
  does: connect, send, status line, headers and the little body read after them share
  that one deadline, so a receiver that trickles its answer a byte at a time cannot hold
  the queue (issue 9, finding 3; docs/decisions/0005-poster-attempt-deadline.md).
- A 2xx status is the acknowledgement. The body after it is read (and discarded) for at
  most 64 KiB and 1 s, so the connection can be reused; whatever the body then does
  (trickles, never ends, breaks), the event counts as delivered. A non-2xx answer whose
  head or body is trickled is a failed attempt like any other.
- ``aclose()`` delivers what is queued for up to ``close_grace_s``, then stops, closes
  the HTTP client and logs at WARNING how many events it dropped. The grace bounds the
  event loop's real time; retry pauses are also cut off once they would end past the
  grace on the poster's clock (the same thing under the system clock).

Configuration comes from the environment when not passed: ``RVC_CALLBACK_URL`` (unset or
empty: no-op mode, events are logged at DEBUG), ``RVC_EVENT_SECRET`` (required when a
URL is set; construction raises :class:`~robot_mcp_kit.ConfigurationError` otherwise) and
``RVC_OUTBOX`` (the durable outbox's file; unset or empty: none).

With a durable outbox (``outbox=path``, issue 14; ``docs/delivery.md``) each event is
also kept in a SQLite file before its first attempt, and settled there when acknowledged,
given up or dropped. ``aclose()`` then drops nothing: what is undelivered stays in the file
(counted as ``kept``), and the next poster on that file sends it first, in its original
order with its original ``event_id``, its 10-minute budget counted from when it was first
accepted. The size cap is ``queue_max``, as without an outbox. Without ``outbox`` nothing
of this runs and the poster behaves as before.

The poster is bound to the event loop of its first ``post()``; construct it anywhere
(at module import too), use it from one loop.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import os
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

import httpx

from robot_mcp_kit._exceptions import ConfigurationError
from robot_mcp_kit._log import get_logger
from robot_mcp_kit._outbox import ENV_OUTBOX, Outbox, OutboxRow
from robot_mcp_kit._retry import Clock, RetryPolicy, SystemClock
from robot_mcp_kit.models import TaskEvent
from robot_mcp_kit.signing import signed_headers, standard_headers

__all__ = ["ENV_CALLBACK_URL", "ENV_EVENT_SECRET", "ENV_OUTBOX", "EventPoster", "PosterStats"]

ENV_CALLBACK_URL: Final = "RVC_CALLBACK_URL"
ENV_EVENT_SECRET: Final = "RVC_EVENT_SECRET"  # noqa: S105 - the variable's name, not a secret

_log = get_logger("robot_mcp_kit.events")

_DRAIN_LIMIT = 64 * 1024
"""Bytes of a response body read (and discarded) so the connection can be reused."""

_DRAIN_TIMEOUT_S = 1.0
"""The most real time spent reading (and discarding) a response body after its status.

Within the attempt's ``timeout_s``: reading the body never extends an attempt."""


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
            outbox for the next start (always 0 without an outbox). Added in 0.2.0.
        recovered: events a poster found pending in its outbox file at start, from a
            previous process (always 0 without an outbox). Added in 0.2.0.
    """

    sent: int = 0
    retried: int = 0
    dropped: int = 0
    queued: int = 0
    given_up: int = 0
    posted: int = 0
    kept: int = 0
    recovered: int = 0


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


class EventPoster:
    """Posts :class:`~robot_mcp_kit.models.TaskEvent` s to ``RVC_CALLBACK_URL``, signed.

    Args:
        server_name: sent as ``X-RVC-Server``; the receiver looks the secret up by it.
        callback_url: the brain's events endpoint (http or https); defaults to
            ``$RVC_CALLBACK_URL``. Unset or empty: no-op mode.
        secret: the HMAC secret; defaults to ``$RVC_EVENT_SECRET``. Required with a URL.
            During a secret rotation, a list: ``X-RVC-Signature`` is made with the first
            (the new one), and ``webhook-signature`` carries one signature per secret
            (list added in 0.2.0).
        queue_max: the most events waiting to be sent; beyond it the oldest is dropped.
        close_grace_s: how long ``aclose()`` keeps delivering what is queued.
        retry: the retry schedule and give-up cap.
        clock: wall clock, monotonic clock and sleep; the system's by default.
        transport: the httpx transport to send through (tests pass a fake one).
        timeout_s: the deadline of one whole attempt, in real seconds: connecting,
            sending, and receiving the status line, the headers and the (at most
            64 KiB, 1 s) body read after them. An attempt that has no complete status
            and headers by then fails and is retried on the schedule; a 2xx status
            received in time is delivered whatever its body does. It is a wall-time
            bound on the event loop, not on ``clock`` (issue 9: it used to bound each
            network read, so a receiver trickling bytes held an attempt open forever).
        outbox: the durable outbox's SQLite file (see the module docstring); defaults to
            ``$RVC_OUTBOX``; ``False`` turns it off whatever the environment says. Used
            only with a callback URL. Added in 0.2.0.
        outbox_delivered_tail: settled events kept in the outbox file beyond the pending
            ones (replay, ``get_task_events`` after a restart). Added in 0.2.0.
        standard_webhooks: also send the Standard Webhooks headers ``webhook-id`` (the
            event_id), ``webhook-timestamp`` and ``webhook-signature`` (see
            :mod:`robot_mcp_kit.signing`); the ``X-RVC-*`` headers are unchanged. Added in
            0.2.0.

    Raises:
        ConfigurationError: a URL without a secret, a URL that is not http(s), an empty
            or unprintable server name, or a non-positive bound.
    """

    def __init__(
        self,
        server_name: str,
        callback_url: str | None = None,
        secret: str | Sequence[str] | None = None,
        *,
        queue_max: int = 10_000,
        close_grace_s: float = 5.0,
        retry: RetryPolicy | None = None,
        clock: Clock | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout_s: float = 10.0,
        outbox: str | os.PathLike[str] | Literal[False] | None = None,
        outbox_delivered_tail: int = 1_000,
        standard_webhooks: bool = False,
    ) -> None:
        if not server_name or not server_name.isprintable() or not server_name.isascii():
            raise ConfigurationError(
                f"EventPoster server_name must be non-empty printable ASCII (it is sent as "
                f"the X-RVC-Server header), got {server_name!r}."
            )
        if queue_max < 1:
            raise ConfigurationError(f"EventPoster queue_max must be >= 1, got {queue_max}.")
        if close_grace_s < 0:
            raise ConfigurationError(
                f"EventPoster close_grace_s must be >= 0, got {close_grace_s}."
            )
        if timeout_s <= 0:
            raise ConfigurationError(f"EventPoster timeout_s must be > 0, got {timeout_s}.")

        url = os.environ.get(ENV_CALLBACK_URL) if callback_url is None else callback_url
        url = (url or "").strip()
        self.server_name: Final = server_name
        self.callback_url: Final[str | None] = url or None
        self._secret = ""
        self._secrets: tuple[str, ...] = ()
        self.standard_webhooks: Final = standard_webhooks
        if self.callback_url is not None:
            _check_url(self.callback_url)
            key = os.environ.get(ENV_EVENT_SECRET) if secret is None else secret
            keys = (key,) if isinstance(key, str) or key is None else tuple(key)
            if not keys or not all(isinstance(k, str) and k for k in keys):
                raise ConfigurationError(
                    f"EventPoster for server {server_name!r} has a callback URL "
                    f"({self.callback_url}) but no secret: set {ENV_EVENT_SECRET} "
                    f"(or pass secret=) to the HMAC secret shared with the brain, or unset "
                    f"{ENV_CALLBACK_URL} to run without posting events."
                )
            self._secrets = keys  # type: ignore[assignment]
            self._secret = self._secrets[0]
        self._url = self.callback_url or ""

        self.queue_max: Final = queue_max
        self.close_grace_s: Final = close_grace_s
        self.retry: Final = retry if retry is not None else RetryPolicy()
        self.timeout_s: Final = timeout_s
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._transport = transport

        self._queue: deque[_Item] = deque()
        self._inflight: _Item | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wakeup: asyncio.Event | None = None
        self._idle: asyncio.Event | None = None
        self._worker: asyncio.Task[None] | None = None
        self._client: httpx.AsyncClient | None = None
        self._closed = False
        self._close_done: asyncio.Event | None = None
        self._close_deadline: float | None = None

        self._sent = 0
        self._retried = 0
        self._dropped = 0
        self._given_up = 0
        self._posted = 0
        self._kept = 0
        self._recovered = 0

        # The durable outbox (issue 14): None unless asked for and a URL is set.
        self.outbox: Outbox | None = None
        self._outbox_loaded = False
        self._accepted_n = 0  # items accepted so far (the outbox's numbering)
        self._durable_n = 0  # items whose rows are known committed
        self._settled_since_trim = 0
        path = os.environ.get(ENV_OUTBOX) if outbox is None else outbox
        if path is not False and path is not None and str(path).strip():
            if self.callback_url is None:
                _log.info(
                    "outbox_ignored",
                    server=server_name,
                    outbox=str(path),
                    reason="no-op mode (no callback URL)",
                )
            else:
                self.outbox = Outbox(path, delivered_tail=outbox_delivered_tail)

    # -- public API -------------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        """True when events are sent; False in no-op mode (no callback URL)."""
        return self.callback_url is not None

    @property
    def stats(self) -> PosterStats:
        """A snapshot of the counters."""
        return PosterStats(
            sent=self._sent,
            retried=self._retried,
            dropped=self._dropped,
            queued=len(self._queue) + (self._inflight is not None),
            given_up=self._given_up,
            posted=self._posted,
            kept=self._kept,
            recovered=self._recovered,
        )

    async def post(self, event: TaskEvent) -> None:
        """Queue ``event`` for delivery and return at once. Never raises.

        In no-op mode the event is logged at DEBUG. After :meth:`aclose` it is logged
        and counted as dropped. When the queue is full the oldest waiting event is
        dropped (ERROR log, counted).
        """
        try:
            self._post(event)
        except Exception:  # post() never raises into the caller, whatever happens
            self._dropped += 1
            _log.exception(
                "event_dropped",
                server=self.server_name,
                event_id=getattr(event, "event_id", "?"),
                task_id=getattr(event, "task_id", "?"),
                seq=getattr(event, "seq", "?"),
                reason="the poster failed to queue it",
            )

    async def start(self) -> None:
        """Start delivering now: bind to the running loop and start the worker. Idempotent.

        Only needed with a durable outbox, so that events a previous process left pending
        go out before the first ``post()``; without one it just starts the worker early.
        Never raises (a failure is logged). Added in 0.2.0.
        """
        if not self.enabled or self._closed:
            return
        try:
            wakeup, idle = self._ensure_worker()
        except Exception:
            _log.exception("poster_start_failed", server=self.server_name)
            return
        if self._queue:
            idle.clear()
            wakeup.set()

    async def flush(self) -> None:
        """Wait until every event posted so far is acknowledged or lost.

        Returns at once in no-op mode, after :meth:`aclose`, or when nothing was posted.
        """
        if self._closed or self._idle is None or self._loop is not asyncio.get_running_loop():
            return
        while self._queue or self._inflight is not None:
            if self._worker is None or self._worker.done():
                return
            await self._idle.wait()

    async def aclose(self) -> None:
        """Deliver what is queued for up to ``close_grace_s``, then stop. Idempotent.

        Whatever is still undelivered after the grace is dropped, counted and logged at
        WARNING; then the HTTP client is closed.
        """
        if self._closed:
            if self._close_done is not None and self._loop is asyncio.get_running_loop():
                await self._close_done.wait()
            return
        self._closed = True
        if not self.enabled:
            return
        same_loop = self._loop is asyncio.get_running_loop()
        self._close_done = asyncio.Event() if same_loop else None
        try:
            worker = self._worker
            if worker is not None and not worker.done() and same_loop:
                self._close_deadline = self._clock.monotonic() + self.close_grace_s
                if self._wakeup is not None:
                    self._wakeup.set()
                try:
                    async with asyncio.timeout(self.close_grace_s):
                        await asyncio.shield(worker)
                except TimeoutError:
                    pass
                finally:
                    if not worker.done():
                        worker.cancel()
                        await asyncio.wait([worker])
            client, self._client = self._client, None
            if client is not None and same_loop:
                await client.aclose()
        finally:
            self._drop_leftovers()
            outbox = self.outbox
            if outbox is not None:
                outbox.on_recovered_event = None
                try:
                    if same_loop:
                        await asyncio.to_thread(outbox.close)
                    else:
                        outbox.close()
                except Exception:
                    _log.exception(
                        "outbox_close_failed", server=self.server_name, outbox=str(outbox.path)
                    )
            if self._close_done is not None:
                self._close_done.set()
            if self._idle is not None and same_loop:
                self._idle.set()

    async def __aenter__(self) -> EventPoster:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        s = self.stats
        where = f"url={self.callback_url!r}" if self.enabled else "mode='no-op'"
        state = "closed" if self._closed else "open"
        return (
            f"EventPoster(server={self.server_name!r}, {where}, {state}, posted={s.posted}, "
            f"sent={s.sent}, retried={s.retried}, dropped={s.dropped}, "
            f"given_up={s.given_up}, queued={s.queued})"
        )

    # -- internals --------------------------------------------------------------------

    def _post(self, event: TaskEvent) -> None:
        if not self.enabled:
            if _log.is_enabled_for(logging.DEBUG):
                _log.debug(
                    "event_not_sent",
                    server=self.server_name,
                    reason=f"no-op mode ({ENV_CALLBACK_URL} unset)",
                    event_id=event.event_id,
                    task_id=event.task_id,
                    seq=event.seq,
                    type=event.type,
                    body=event.model_dump_json(),
                )
            return
        if self._closed:
            self._dropped += 1
            _log.warning(
                "event_dropped",
                server=self.server_name,
                event_id=event.event_id,
                task_id=event.task_id,
                seq=event.seq,
                reason="posted after the poster was closed",
            )
            return
        item = _Item(event.event_id, event.task_id, event.seq, event.model_dump_json().encode())
        wakeup, idle = self._ensure_worker()
        outbox = self.outbox
        if outbox is not None:
            self._accepted_n += 1
            item.n = self._accepted_n
            outbox.add(item.event_id, item.task_id, item.seq, item.body, self._clock.time())
        queue = self._queue
        if len(queue) >= self.queue_max:
            old = queue.popleft()
            self._dropped += 1
            if outbox is not None:
                outbox.mark(old.event_id, "dropped")
            _log.error(
                "event_dropped",
                server=self.server_name,
                event_id=old.event_id,
                task_id=old.task_id,
                seq=old.seq,
                reason="the queue is full",
                queue_max=self.queue_max,
                covered_by="the brain's reconciliation poll",
            )
        queue.append(item)
        self._posted += 1
        idle.clear()
        wakeup.set()

    def _ensure_worker(self) -> tuple[asyncio.Event, asyncio.Event]:
        """Bind to the running loop and start the worker if needed; return (wakeup, idle)."""
        loop = asyncio.get_running_loop()
        wakeup, idle = self._wakeup, self._idle
        if self._loop is not loop:
            if self._loop is not None:
                _log.warning(
                    "poster_loop_changed",
                    server=self.server_name,
                    reason="the old event loop stopped without aclose()",
                    queued=len(self._queue) + (self._inflight is not None),
                )
            self._loop = loop
            self._wakeup = wakeup = asyncio.Event()
            self._idle = idle = asyncio.Event()
            self._worker = None
            self._client = None
        if wakeup is None or idle is None:  # pragma: no cover - set together just above
            raise RuntimeError("EventPoster loop state is inconsistent")
        if self.outbox is not None and not self._outbox_loaded:
            self._load_outbox(self.outbox)
        if self._worker is None or self._worker.done():
            if self._inflight is not None:  # the last worker was cancelled mid-send: resend
                self._queue.appendleft(self._inflight)
                self._inflight = None
            self._worker = loop.create_task(
                self._run(wakeup, idle), name=f"EventPoster[{self.server_name}] worker"
            )
        return wakeup, idle

    def _load_outbox(self, outbox: Outbox) -> None:
        """Put the events a previous process left pending at the head of the queue (once)."""
        self._outbox_loaded = True
        try:
            rows = outbox.pending()
        except Exception:
            _log.exception("outbox_read_failed", server=self.server_name, outbox=str(outbox.path))
            rows = []
        if rows:
            self._recovered += len(rows)
            _log.warning(
                "outbox_recovered",
                server=self.server_name,
                outbox=str(outbox.path),
                events=len(rows),
                first_event_id=rows[0].event_id,
                first_task_id=rows[0].task_id,
                first_seq=rows[0].seq,
            )
        for row in reversed(rows):
            self._queue.appendleft(self._recovered_item(row))
        while len(self._queue) > self.queue_max:
            old = self._queue.popleft()
            self._dropped += 1
            outbox.mark(old.event_id, "dropped")
            _log.error(
                "event_dropped",
                server=self.server_name,
                event_id=old.event_id,
                task_id=old.task_id,
                seq=old.seq,
                reason="the outbox holds more than queue_max events",
                queue_max=self.queue_max,
            )
        self._posted += len(self._queue)
        try:
            outbox.trim(self.queue_max)
        except Exception:
            _log.exception("outbox_trim_failed", server=self.server_name, outbox=str(outbox.path))
        outbox.on_recovered_event = self._adopt

    def _recovered_item(self, row: OutboxRow) -> _Item:
        # Committed already: numbered 0, so no durability wait before its first attempt.
        return _Item(row.event_id, row.task_id, row.seq, row.body, 0, row.enqueued_at)

    def _adopt(self, row: OutboxRow) -> None:
        """Take an event written to the outbox by someone else (the manager's recovery)."""
        if self._closed:
            return
        queue = self._queue
        if len(queue) >= self.queue_max:
            old = queue.popleft()
            self._dropped += 1
            if self.outbox is not None:
                self.outbox.mark(old.event_id, "dropped")
        queue.append(self._recovered_item(row))
        self._posted += 1
        self._recovered += 1
        if self._wakeup is not None and self._idle is not None:
            self._idle.clear()
            self._wakeup.set()

    async def _make_durable(self, item: _Item) -> None:
        """With an outbox: wait until ``item``'s row is committed, before its first attempt.

        One flush covers every item accepted before it started, so a burst costs one wait.
        """
        outbox = self.outbox
        if outbox is None or item.n <= self._durable_n:
            return
        target = self._accepted_n
        try:
            await outbox.make_durable()
        except Exception:  # a closed or broken store must not stop delivery
            _log.exception(
                "outbox_flush_failed",
                server=self.server_name,
                outbox=str(outbox.path),
                then="sending anyway",
            )
        self._durable_n = max(self._durable_n, target)

    async def _settle(self, item: _Item, state: Literal["delivered", "given_up"]) -> None:
        outbox = self.outbox
        if outbox is None:
            return
        outbox.mark(item.event_id, state)
        self._settled_since_trim += 1
        if self._settled_since_trim >= max(100, outbox.delivered_tail):
            self._settled_since_trim = 0
            try:
                await asyncio.to_thread(outbox.trim, self.queue_max)
            except Exception:
                _log.exception(
                    "outbox_trim_failed", server=self.server_name, outbox=str(outbox.path)
                )

    async def _run(self, wakeup: asyncio.Event, idle: asyncio.Event) -> None:
        queue = self._queue
        while True:
            if not queue:
                idle.set()
                if self._closed:
                    return
                wakeup.clear()
                await wakeup.wait()
                continue
            item = queue.popleft()
            self._inflight = item
            try:
                await self._make_durable(item)
                outcome = await self._deliver(item)
            except _GraceExpired:
                return  # aclose() counts the in-flight event and the rest as dropped
            except Exception:  # a bug here must not kill the worker and strand the queue
                self._given_up += 1
                outcome = "given_up"
                _log.exception(
                    "event_given_up",
                    server=self.server_name,
                    event_id=item.event_id,
                    task_id=item.task_id,
                    seq=item.seq,
                    reason="unexpected error in the poster",
                )
            self._inflight = None
            await self._settle(item, outcome)

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

    def _drop_leftovers(self) -> None:
        left = list(self._queue)
        if self._inflight is not None:
            left.insert(0, self._inflight)
        self._queue.clear()
        self._inflight = None
        if left and self.outbox is not None:
            self._kept += len(left)
            _log.warning(
                "poster_closed",
                server=self.server_name,
                sent=self._sent,
                kept=len(left),
                outbox=str(self.outbox.path),
                first_event_id=left[0].event_id,
                first_task_id=left[0].task_id,
                first_seq=left[0].seq,
            )
            return
        if not left:
            _log.info("poster_closed", server=self.server_name, sent=self._sent, undelivered=0)
            return
        self._dropped += len(left)
        first = left[0]
        _log.warning(
            "poster_closed",
            server=self.server_name,
            sent=self._sent,
            dropped=len(left),
            grace_s=self.close_grace_s,
            first_event_id=first.event_id,
            first_task_id=first.task_id,
            first_seq=first.seq,
            covered_by="the brain's reconciliation poll",
        )


def _check_url(url: str) -> None:
    try:
        parsed = httpx.URL(url)
    except Exception as exc:
        raise ConfigurationError(
            f"{ENV_CALLBACK_URL} {url!r} is not a URL: {exc}. "
            "Expected e.g. http://127.0.0.1:8000/api/agent/events."
        ) from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ConfigurationError(
            f"{ENV_CALLBACK_URL} {url!r} must be an http:// or https:// URL with a host, "
            "e.g. http://127.0.0.1:8000/api/agent/events."
        )


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
