"""The brain's receiver: signed, at-least-once webhooks in; exactly-once, in-order updates out.

:class:`Receiver` composes the parts, each in its module: the pure verdict
(:func:`~robot_mcp_kit.receiver.check_post`), the tasks over the file
(:class:`~robot_mcp_kit.receiver._state.ReceiverState`), the lanes that hand updates to the
handler, the gap repairs, the reconciliation polls and the servers' MCP links. It fixes
their order: open the file at construction, load and start in :meth:`Receiver.start`,
stop in reverse in :meth:`Receiver.aclose`.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

from robot_mcp_kit._exceptions import ConfigurationError
from robot_mcp_kit.log import get_logger
from robot_mcp_kit.models import TaskEvent, TaskInfo
from robot_mcp_kit.receiver._config import ServerConfig, server_map
from robot_mcp_kit.receiver._exceptions import ReceiverClosed, ServerCallFailed
from robot_mcp_kit.receiver._health import ServerStatus
from robot_mcp_kit.receiver._lanes import Lanes
from robot_mcp_kit.receiver._links import ServerLink
from robot_mcp_kit.receiver._reconcile import Listed, Reconciler
from robot_mcp_kit.receiver._repair import Repairs
from robot_mcp_kit.receiver._state import Ingested, ReceiverState, TaskRecord
from robot_mcp_kit.receiver._stats import Counters, ReceiverStats
from robot_mcp_kit.receiver._store import ReceiverStore
from robot_mcp_kit.receiver._tools import EventsPage, SessionFactory
from robot_mcp_kit.receiver._updates import Handler, TaskUpdate, UpdateSource
from robot_mcp_kit.receiver._verdict import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_JSON_DEPTH,
    KNOWN_EVENT_TYPES,
    Headers,
    PostHeaders,
    Verdict,
    check_post,
    read_headers,
)
from robot_mcp_kit.signing import DEFAULT_MAX_SKEW_S, Secrets
from robot_mcp_kit.telemetry import continued_span, observe, set_attributes

if TYPE_CHECKING:
    from robot_mcp_kit.receiver._asgi import ReceiverApp

__all__ = ["Receipt", "Receiver", "ReceiverStatus"]

_log = get_logger("robot_mcp_kit.receiver")

_PRUNE_EVERY = 1_000
"""Stored events between two prunes."""


@dataclass(frozen=True, slots=True)
class Receipt:
    """The answer to one POST, and what the receiver made of it.

    ``status`` and ``body`` are the HTTP answer (``body`` a JSON object); ``verdict`` the
    decision of :func:`~robot_mcp_kit.receiver.check_post`; ``ingested`` what the stored
    state made of an acknowledged event (None for a refusal or a 503).
    """

    status: int
    body: dict[str, Any]
    verdict: Verdict
    ingested: Ingested | None = None


@dataclass(frozen=True, slots=True)
class ReceiverStatus:
    """The receiver at a glance: its servers, its counters, its tasks."""

    servers: tuple[ServerStatus, ...]
    stats: ReceiverStats
    running_tasks: int
    repairs: int
    started: bool
    closed: bool

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view."""
        return {
            "servers": [s.to_dict() for s in self.servers],
            "stats": self.stats.to_dict(),
            "running_tasks": self.running_tasks,
            "repairs": self.repairs,
            "started": self.started,
            "closed": self.closed,
        }


def _positive(name: str, value: float | None, *, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigurationError(f"{name} must be a positive number, got {value!r}.")


class Receiver:
    """Receive the servers' signed events; hand each task's updates to ``handler`` once,
    in ``seq`` order; repair gaps; reconcile with the servers.

    **What a POST gets.** Every accept/refuse decision of contract §4 (:func:`check_post`).
    A new event is written to the state file, committed, and only then acknowledged 2xx:
    an acknowledged event is never lost, even if the process is killed right after. A
    duplicate (the same ``event_id`` from the same server) is acknowledged and changes
    nothing. An event of a type this kit does not know is acknowledged and passed over.
    When the file cannot be written the answer is 503: the poster sends it again.

    **What the handler gets, and "once".** Each task's events, one at a time, in ``seq``
    order, starting at seq 1; an event that arrives ahead of a gap waits for the hole to
    be filled. After the handler returns, the task's cursor is committed before its next
    update: a duplicate post, a retry, a replay after a server restart or an event fetched
    twice never reaches the handler a second time. Two cases hand an update over again,
    with ``update.redelivered`` set: the handler raised (it is called again after a
    backoff, the task's later updates waiting), or the process stopped after the handler
    began and before its cursor was committed (killed, or stopped past ``close_grace_s``;
    the next start hands it over first). So the handler's contract: return only once the
    update's effect is done; make effects that must happen once idempotent on
    ``update.key`` (store the key with the effect, in one transaction, under a unique
    constraint). ``redelivered`` False means the update was never handed over before.

    **Gaps.** A hole in a task's seqs is repaired after ``repair_wait_s`` through the
    server's ``get_task_events`` (MCP over SSE or streamable HTTP), the events handed over
    in place. What the server no longer retains becomes one GAP update; a task it no
    longer knows is handed over as far as it goes, then LOST; a hole nothing fills within
    ``gap_timeout_s`` becomes a GAP update (the task's later events go on).

    **Reconciliation.** At start and every ``reconcile_every_s``, each server with an MCP
    URL is asked ``list_tasks``: a task held as running that the server reports finished
    gets its missing events, or a STATE update when no event says how it ended (a cancel);
    one the server no longer knows becomes LOST; one the receiver never heard of is
    adopted (``adopt_unknown_tasks``). A server that cannot be reached is retried with
    backoff and reported (:meth:`status`, a ``server_unreachable`` WARNING), never
    stopping the receiver.

    Args:
        servers: the servers it accepts (:class:`ServerConfig` s, or a mapping of them by
            name); see :func:`servers_from_env` and :func:`load_servers`.
        handler: ``async def handler(update: TaskUpdate) -> None``.
        state: the SQLite file of the receiver's state (created if missing). One process
            per file.
        repair_wait_s: how long a hole may stay before its server is asked.
        gap_timeout_s: how long a hole may stay before it is given up (GAP).
        reconcile_every_s: the interval of the reconciliation polls (None: at start and
            on :meth:`reconcile` only).
        reconcile_on_start: poll every server when the receiver starts.
        adopt_unknown_tasks: take on tasks a server lists that the receiver never heard of.
        max_concurrent_handlers: handler calls at once, over all tasks.
        handler_retry_first_s, handler_retry_max_s: the pause after a handler failure,
            doubling.
        give_up_after: pass over an update after its handler raised this many times (an
            ERROR ``handler_gave_up``); None: never.
        retain_events: delivered events kept in the file (plus every waiting one).
        retain_tasks_s: how long a finished task is kept after it was last touched.
        max_skew_s, max_body_bytes, max_json_depth: the bounds of :func:`check_post`.
        connect_timeout_s, call_timeout_s: the bounds of each MCP session and call.
        max_backoff_s: the longest pause between tries of an unreachable server.
        close_grace_s: how long :meth:`aclose` lets running handler calls finish.
        clock: unix seconds (``time.time``); judges timestamps and dates the rows.
        on_listed: called with each server's ``list_tasks`` answer (a hook for tools
            that show every task's state).
        session_factory: opens the MCP session to a server yourself, e.g. with your own
            auth: called with the :class:`ServerConfig`, it returns an async context
            manager yielding an initialized ``mcp.ClientSession``. None: the MCP client
            over the server's ``mcp_url`` (SSE or streamable HTTP) with its token.

    Raises:
        ConfigurationError: a bad option or server list.
        robot_mcp_kit.store.StoreError: the state file cannot be opened.

    Use on one event loop. ``repr()`` shows its counters.
    """

    def __init__(
        self,
        servers: Iterable[ServerConfig] | Mapping[str, ServerConfig],
        handler: Handler,
        *,
        state: str | os.PathLike[str],
        repair_wait_s: float = 1.0,
        gap_timeout_s: float = 600.0,
        reconcile_every_s: float | None = 60.0,
        reconcile_on_start: bool = True,
        adopt_unknown_tasks: bool = True,
        max_concurrent_handlers: int = 16,
        handler_retry_first_s: float = 0.5,
        handler_retry_max_s: float = 30.0,
        give_up_after: int | None = None,
        retain_events: int = 10_000,
        retain_tasks_s: float = 86_400.0,
        max_skew_s: int = DEFAULT_MAX_SKEW_S,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_json_depth: int = DEFAULT_MAX_JSON_DEPTH,
        connect_timeout_s: float = 10.0,
        call_timeout_s: float = 30.0,
        max_backoff_s: float = 60.0,
        close_grace_s: float = 5.0,
        clock: Callable[[], float] | None = None,
        on_listed: Listed | None = None,
        session_factory: SessionFactory | None = None,
    ) -> None:
        self.servers = server_map(servers)
        if not callable(handler):
            raise ConfigurationError(f"handler must be an async callable, got {handler!r}.")
        if repair_wait_s < 0:
            raise ConfigurationError(f"repair_wait_s must be >= 0, got {repair_wait_s!r}.")
        for name, value in (
            ("gap_timeout_s", gap_timeout_s),
            ("handler_retry_first_s", handler_retry_first_s),
            ("handler_retry_max_s", handler_retry_max_s),
            ("retain_tasks_s", retain_tasks_s),
            ("connect_timeout_s", connect_timeout_s),
            ("call_timeout_s", call_timeout_s),
            ("max_backoff_s", max_backoff_s),
        ):
            _positive(name, value)
        _positive("reconcile_every_s", reconcile_every_s, allow_none=True)
        for name, count in (
            ("max_concurrent_handlers", max_concurrent_handlers),
            ("retain_events", retain_events),
            ("max_body_bytes", max_body_bytes),
            ("max_json_depth", max_json_depth),
        ):
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise ConfigurationError(f"{name} must be an integer >= 1, got {count!r}.")
        if give_up_after is not None and (
            isinstance(give_up_after, bool)
            or not isinstance(give_up_after, int)
            or give_up_after < 1
        ):
            raise ConfigurationError(f"give_up_after must be None or >= 1, got {give_up_after!r}.")
        self.handler = handler
        self.max_skew_s = max_skew_s
        self.max_body_bytes = max_body_bytes
        self.max_json_depth = max_json_depth
        self.retain_events = retain_events
        self.retain_tasks_s = retain_tasks_s
        self.close_grace_s = close_grace_s
        self.reconcile_on_start = reconcile_on_start
        self._clock = clock if clock is not None else time.time
        self._secrets: dict[str, Secrets] = {n: s.secrets for n, s in self.servers.items()}
        self._counters = Counters()
        self._store = ReceiverStore(state)
        self._state = ReceiverState(self._store)
        self._links = {
            name: ServerLink(
                config,
                self._counters,
                connect_timeout_s=connect_timeout_s,
                call_timeout_s=call_timeout_s,
                max_backoff_s=max_backoff_s,
                session_factory=session_factory,
            )
            for name, config in self.servers.items()
        }
        self._lanes = Lanes(
            self._state,
            handler,
            self._counters,
            on_blocked=self._blocked,
            max_concurrent=max_concurrent_handlers,
            retry_first_s=handler_retry_first_s,
            retry_max_s=handler_retry_max_s,
            give_up_after=give_up_after,
            clock=self._clock,
        )
        self._state.on_ready = self._lanes.wake
        self._store.batch.before_commit = self._state.write_moves
        self._repairs = Repairs(
            self._state,
            self._links,
            self._absorb,
            self._lanes.wake,
            wait_s=repair_wait_s,
            gap_timeout_s=gap_timeout_s,
        )
        self._reconciler = Reconciler(
            self._state,
            self._links,
            self._absorb,
            self._lanes.wake,
            self._counters,
            every_s=reconcile_every_s,
            quiet_s=reconcile_every_s or 60.0,
            adopt=adopt_unknown_tasks,
            on_listed=on_listed,
            clock=self._clock,
        )
        self._since_prune = 0
        self._started = False
        self._closed = False
        self._start_lock: asyncio.Lock | None = None
        observe("robot_mcp.receiver.posts", self, _post_counts)
        observe("robot_mcp.receiver.delivered", self, lambda r: [(r.stats.delivered, {})])
        observe(
            "robot_mcp.receiver.handler_failures", self, lambda r: [(r.stats.handler_failures, {})]
        )
        observe("robot_mcp.receiver.waiting", self, lambda r: [(r.stats.waiting, {})])
        observe("robot_mcp.receiver.repaired", self, lambda r: [(r.stats.repaired, {})])

    def __repr__(self) -> str:
        s = self.stats
        state = "closed" if self._closed else ("started" if self._started else "new")
        return (
            f"<Receiver {state} servers={sorted(self.servers)} accepted={s.accepted} "
            f"duplicates={s.duplicates} refused={s.refused} delivered={s.delivered} "
            f"waiting={s.waiting} repaired={s.repaired} handler_failures={s.handler_failures}>"
        )

    # -- life ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """Load the state, hand over what waits, start repairs and reconciliation.

        Idempotent. :meth:`receive` calls it on first use, so a receiver mounted where
        nothing runs the lifespan still works.

        Raises:
            ReceiverClosed: after :meth:`aclose`.
        """
        if self._closed:
            raise ReceiverClosed("the receiver is closed; make a new one")
        if self._started:
            return
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self._started or self._closed:
                return
            loaded = self._state.load()
            self._started = True
            for record in loaded:
                self._lanes.wake(record)
            if any(link.tools is not None for link in self._links.values()) and (
                self.reconcile_on_start or self._reconciler.every_s is not None
            ):
                if self.reconcile_on_start:
                    self._reconciler.start()
                else:
                    asyncio.get_running_loop().call_later(
                        self._reconciler.every_s or 0.0, self._reconciler.start
                    )
            _log.info(
                "receiver_started",
                path=str(self._store.path),
                servers=sorted(self.servers),
                open_tasks=len(loaded),
                waiting=self._state.waiting(),
            )

    async def aclose(self) -> None:
        """Stop: polls and repairs, then handler calls (``close_grace_s``), then the file.

        Idempotent. An update whose handler call is cut short is handed over again at the
        next start (``redelivered``).
        """
        if self._closed:
            return
        self._closed = True
        await self._reconciler.aclose()
        await self._repairs.aclose()
        await self._lanes.aclose(self.close_grace_s)
        try:
            self._state.save(self._clock())
        except Exception as exc:  # the next start hands those updates over again
            _log.error("receiver_cursor_unwritten", error=type(exc).__name__)
        self._state.close()
        self._store.close()
        _log.info("receiver_stopped", **self.stats.to_dict())

    def close(self) -> None:
        """Close the state file now, from any thread, without stopping anything else.

        For a finalizer or a process exiting where no event loop runs :meth:`aclose`;
        background tasks on a loop that still runs would then fail. Idempotent.
        """
        self._closed = True
        self._state.close()
        self._store.close()

    async def __aenter__(self) -> Receiver:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- posts --------------------------------------------------------------------------------

    async def receive(
        self, headers: Headers | PostHeaders, body: bytes, *, now: float | None = None
    ) -> Receipt:
        """Answer one ``POST /api/agent/events``: the framework-free entry point.

        Give it the request's headers (a mapping, or ``(name, value)`` pairs where a
        repeated header repeats) and the body's bytes; send back ``receipt.status`` with
        ``receipt.body`` as JSON. Read at most ``max_body_bytes + 1`` bytes of the body
        (a longer one is refused 413 either way), and answer within 5 s (contract §5.4):
        this returns once the event is committed, without waiting for the handler.
        ``now`` (unix seconds) judges the timestamps instead of the receiver's clock.

        Raises:
            ReceiverClosed: after :meth:`aclose` (answer 503).
        """
        if not self._started:
            await self.start()
        if self._closed:
            raise ReceiverClosed("the receiver is closed")
        if now is None:
            now = self._clock()
        head = headers if isinstance(headers, PostHeaders) else read_headers(headers)
        verdict = (
            head
            if isinstance(head, Verdict)
            else check_post(
                head,
                body,
                self._secrets,
                now,
                max_skew_s=self.max_skew_s,
                max_body_bytes=self.max_body_bytes,
                max_json_depth=self.max_json_depth,
            )
        )
        found = verdict.event
        if found is None or verdict.server is None:
            self._counters.add("refused")
            _log.warning(
                "post_refused",
                status=verdict.status,
                reason=str(verdict.reason),
                server=verdict.server,
                detail=verdict.detail,
            )
            return Receipt(
                verdict.status,
                {"error": str(verdict.reason), "detail": verdict.detail or ""},
                verdict,
            )
        assert isinstance(head, PostHeaders)  # else the verdict refused the post
        parent = head.traceparent
        state = head.tracestate if parent else None
        with continued_span(
            "receiver.post",
            (parent, state or "") if parent else None,
            {
                "robot_mcp.server": verdict.server,
                "robot_mcp.task.id": found.task_id,
                "robot_mcp.event.id": found.event_id,
                "robot_mcp.event.seq": found.seq,
            },
            kind="server",
        ) as current:
            receipt = await self._store_posted(verdict, found, body, now, parent)
            if current is not None:
                set_attributes(current, **{"http.response.status_code": receipt.status})
            return receipt

    async def _store_posted(
        self,
        verdict: Verdict,
        found: TaskEvent,
        body: bytes,
        now: float,
        traceparent: str | None,
    ) -> Receipt:
        server = verdict.server
        assert server is not None
        try:
            ingested, _record = self._state.ingest(
                server, found, body, source="post", now=now, traceparent=traceparent
            )
            # Acknowledge only what is in the file: the event's batch (a duplicate's too,
            # whose original may be in the same batch) must commit first.
            await self._store.batch.done()
        except Exception as exc:
            self._counters.add("unavailable")
            _log.error(
                "receiver_store_failed",
                server=server,
                task_id=found.task_id,
                seq=found.seq,
                error=type(exc).__name__,
            )
            return Receipt(
                503,
                {
                    "error": "unavailable",
                    "detail": "The receiver could not store the event; send it again.",
                },
                verdict,
            )
        if not ingested.new:
            self._counters.add("duplicates")
            return Receipt(200, {"duplicate": True, "event_id": found.event_id}, verdict, ingested)
        self._counters.add("ignored" if verdict.unknown_type else "accepted")
        self._after_store()
        answer: dict[str, Any] = {"accepted": True, "duplicate": False, "event_id": found.event_id}
        if verdict.unknown_type:
            answer["unknown_type"] = True
            _log.warning(
                "post_unknown_type",
                server=server,
                task_id=found.task_id,
                type=found.type[:100],
                detail="acknowledged and ignored: a type this receiver does not know "
                "(docs/contract.md §4.4)",
            )
        return Receipt(200, answer, verdict, ingested)

    async def _absorb(self, server: str, page: EventsPage, source: UpdateSource) -> int:
        """Store events fetched from ``server`` (their lanes wake once committed); return
        how many were new."""
        new: list[TaskEvent] = []
        now = self._clock()
        for fetched in page.events:
            try:
                ingested, _record = self._state.ingest(
                    server, fetched.event, fetched.body, source=source, now=now
                )
            except Exception as exc:
                _log.error(
                    "receiver_store_failed",
                    server=server,
                    task_id=fetched.event.task_id,
                    seq=fetched.event.seq,
                    error=type(exc).__name__,
                )
                break
            if ingested.new:
                new.append(fetched.event)
        try:
            await self._store.batch.done()
        except Exception:
            return 0  # rolled back and logged: the next repair or poll fetches them again
        for event in new:
            self._counters.add("repaired")
            if event.type not in KNOWN_EVENT_TYPES:
                self._counters.add("ignored")
        if new:
            self._after_store()
        return len(new)

    def _blocked(self, record: TaskRecord) -> None:
        self._repairs.schedule(record)

    def _after_store(self) -> None:
        self._since_prune += 1
        if self._since_prune >= _PRUNE_EVERY:
            self.prune()

    def prune(self) -> int:
        """Drop delivered events beyond ``retain_events`` and finished tasks untouched for
        ``retain_tasks_s``; return how many rows went. Never raises (a failure is logged).

        The receiver calls it every 1 000 events it stores; events still waiting are kept.
        """
        self._since_prune = 0
        try:
            self._state.save(self._clock())
            return self._store.prune(
                retain_events=self.retain_events, retain_tasks_s=self.retain_tasks_s
            )
        except Exception as exc:
            _log.error("receiver_prune_failed", error=type(exc).__name__)
            return 0

    # -- the servers --------------------------------------------------------------------------

    async def reconcile(self) -> dict[str, dict[str, Any]]:
        """Poll every server with an MCP URL now (see the class docstring); per server,
        what came of it: ``{"tasks": N, "caught_up": M}`` or ``{"error": code, ...}``."""
        if not self._started:
            await self.start()
        return await self._reconciler.reconcile()

    async def answer_input(
        self,
        server: str,
        task_id: str,
        request_id: str,
        action: str = "accept",
        content: dict[str, Any] | None = None,
    ) -> TaskInfo:
        """Answer a task's question (an ``input_required`` event) with ``answer_task_input``.

        Args:
            server, task_id: the task.
            request_id: the question's ``request_id`` (from the event's payload).
            action: ``accept`` (with ``content`` matching the question's schema),
                ``decline`` or ``cancel``.
            content: the answer when accepting.

        Returns:
            The task as the server answers it.

        Raises:
            ServerCallFailed: ``no_mcp_url``; ``not_found`` (the task no longer waits on
                that question: answered already, finished); ``invalid``; or the server
                could not be reached (``unreachable``, ``timeout``).
        """
        link = self._links.get(server)
        if link is None:
            raise ServerCallFailed(
                server, "answer_task_input", "no_mcp_url", "the server is not configured"
            )
        return await link.call(
            "answer_input",
            lambda session: session.answer_input(task_id, request_id, action, content),
        )

    async def answer(
        self, update: TaskUpdate, action: str = "accept", content: dict[str, Any] | None = None
    ) -> TaskInfo:
        """Answer the question an ``input_required`` update asks (see :meth:`answer_input`).

        Raises:
            ValueError: ``update`` is not an ``input_required`` event with a request_id.
            ServerCallFailed: see :meth:`answer_input`.
        """
        event = update.event
        request_id = event.payload.get("request_id") if event is not None else None
        if event is None or event.type != "input_required" or not isinstance(request_id, str):
            raise ValueError(
                f"{update.describe()} is not an input_required event with a request_id."
            )
        return await self.answer_input(update.server, update.task_id, request_id, action, content)

    # -- reading ------------------------------------------------------------------------------

    def inspect(self, server: str, task_id: str) -> dict[str, Any]:
        """What the receiver did with a task's events (contract §5.5's hook view).

        ``events``: every event stored for the task, in the order stored; ``gaps``: every
        seq found missing when a later one arrived; plus ``delivered_seq`` and ``state``.
        """
        return self._state.inspect(server, task_id)

    @property
    def stats(self) -> ReceiverStats:
        """The counters now."""
        return self._counters.snapshot(self._state.waiting())

    def status(self) -> ReceiverStatus:
        """The servers' reachability, the counters, the running tasks."""
        now = asyncio.get_running_loop().time() if _loop_running() else time.monotonic()
        return ReceiverStatus(
            servers=tuple(
                link.health.status(now, link.config.mcp_url) for link in self._links.values()
            ),
            stats=self.stats,
            running_tasks=sum(1 for t in self._state.tasks.values() if t.running),
            repairs=self._repairs.scheduled,
            started=self._started,
            closed=self._closed,
        )

    @property
    def path(self) -> str:
        """The state file."""
        return str(self._store.path)

    def forget_everything(self) -> None:
        """Delete every stored event and task, in the file and in memory (tests, fake_rvc's
        reset): an event posted again afterwards is new. Updates being handed over at that
        moment still finish; their cursors then move tasks the file no longer has."""
        self._state.forget_all()

    def asgi_app(
        self, *, path: str = "/api/agent/events", inspect_path: str | None = None
    ) -> ReceiverApp:
        """An ASGI app serving ``POST path`` (and the inspection hook at ``inspect_path``).

        Its lifespan starts and closes the receiver. See
        :class:`~robot_mcp_kit.receiver.ReceiverApp`.
        """
        from robot_mcp_kit.receiver._asgi import ReceiverApp

        return ReceiverApp(self, path=path, inspect_path=inspect_path)

    def router(self, *, path: str = "/api/agent/events", inspect_path: str | None = None) -> Any:
        """A FastAPI ``APIRouter`` with the same routes and a lifespan (needs fastapi).

        See :func:`~robot_mcp_kit.receiver.fastapi_router`.
        """
        from robot_mcp_kit.receiver._asgi import fastapi_router

        return fastapi_router(self, path=path, inspect_path=inspect_path)


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _post_counts(receiver: Receiver) -> list[tuple[float, dict[str, str]]]:
    s = receiver.stats
    return [
        (s.accepted, {"outcome": "accepted"}),
        (s.duplicates, {"outcome": "duplicate"}),
        (s.ignored, {"outcome": "ignored"}),
        (s.refused, {"outcome": "refused"}),
        (s.unavailable, {"outcome": "unavailable"}),
    ]
