"""The :class:`EventPoster`: one bounded FIFO queue and one worker per poster.

The contracts are in :mod:`robot_mcp_kit.events`.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import deque
from collections.abc import Sequence
from typing import Final, Literal

import httpx

from robot_mcp_kit._attempt import PosterAttempts, _GraceExpired, _Item
from robot_mcp_kit._exceptions import ConfigurationError
from robot_mcp_kit._outbox import ENV_OUTBOX, Outbox
from robot_mcp_kit._poster_close import PosterClosing
from robot_mcp_kit._poster_outbox import PosterOutbox
from robot_mcp_kit._poster_stats import PosterStats
from robot_mcp_kit._retry import Clock, RetryPolicy, SystemClock
from robot_mcp_kit.log import get_logger
from robot_mcp_kit.models import TaskEvent

__all__ = ["ENV_CALLBACK_URL", "ENV_EVENT_SECRET", "EventPoster"]

ENV_CALLBACK_URL: Final = "RVC_CALLBACK_URL"
ENV_EVENT_SECRET: Final = "RVC_EVENT_SECRET"  # noqa: S105 - the variable's name, not a secret

_log = get_logger("robot_mcp_kit.events")


class EventPoster(PosterClosing, PosterAttempts, PosterOutbox):
    """Posts :class:`~robot_mcp_kit.models.TaskEvent` s to ``RVC_CALLBACK_URL``, signed.

    Args:
        server_name: sent as ``X-RVC-Server``; the receiver looks the secret up by it.
        callback_url: the brain's events endpoint (http or https); defaults to
            ``$RVC_CALLBACK_URL``. Unset or empty: no-op mode.
        secret: the HMAC secret; defaults to ``$RVC_EVENT_SECRET``. Required with a URL.
            During a secret rotation, a list: ``X-RVC-Signature`` is made with the first
            (the new one), and ``webhook-signature`` carries one signature per secret.
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
        outbox: the durable outbox's SQLite file (see :mod:`robot_mcp_kit.events`); defaults to
            ``$RVC_OUTBOX``; ``False`` turns it off whatever the environment says. Used
            only with a callback URL.
        outbox_delivered_tail: settled events kept in the outbox file beyond the pending
            ones (replay, ``get_task_events`` after a restart).
        standard_webhooks: also send the Standard Webhooks headers ``webhook-id`` (the
            event_id), ``webhook-timestamp`` and ``webhook-signature`` (see
            :mod:`robot_mcp_kit.signing`); the ``X-RVC-*`` headers are unchanged.

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
        Never raises (a failure is logged).
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
            self._drop_oldest(outbox, "the queue is full")
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
