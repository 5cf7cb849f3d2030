"""The receiver's memory: events, timelines, attempts, counters, faults and waits.

:class:`Recorder` is plain Python guarded by one re-entrant lock, so any thread may call
it: the uvicorn thread that runs the app records into it while a test thread (or another
event loop) reads it and waits on it.

Waiting, two ways:

* **sync** — :meth:`Recorder.wait_for_event`, :meth:`Recorder.wait_for_attempts` and
  :meth:`Recorder.wait_for` block the calling thread on a ``threading.Condition``. Call
  them from a test thread, never from the loop that runs the app (it would stall the app).
* **async** — :meth:`Recorder.wait_for_event_async` and :meth:`Recorder.wait_for_async`
  await an ``asyncio.Event`` that the recorder sets with ``loop.call_soon_threadsafe``, so
  they work on any loop, including the app's own (the long-poll endpoint uses them).

Every POST is an :class:`Attempt`, whatever its fate (accepted, duplicate, rejected,
answered by an injected fault, dropped); verified, first-seen events are also kept as
:class:`ReceivedEvent` and feed the per-task :class:`Timeline`, which records anomalies as
dicts ``{"kind": "gap" | "reorder" | "duplicate" | "after_terminal", ...evidence}``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from robot_mcp_kit.models import TERMINAL_EVENT_TYPES, TaskEvent

__all__ = [
    "ANY_SERVER",
    "Attempt",
    "Fault",
    "Outcome",
    "ReceivedEvent",
    "Recorder",
    "Subscription",
    "Timeline",
]

T = TypeVar("T")

Outcome = Literal["accepted", "duplicate", "rejected", "fault", "dropped", "repaired"]
"""What happened to one POST: ``accepted`` (stored), ``duplicate`` (acknowledged, not
stored again), ``rejected`` (4xx), ``fault`` (answered by an injected status),
``dropped`` (connection closed on purpose, no response). ``repaired`` is no POST: an event
missing from a gap, fetched from the server's ``get_task_events`` in repair mode."""

ANY_SERVER = "*"
"""Fault-plan key that matches posts from any server (per-server faults go first)."""

_MAX_ANOMALIES_PER_TASK = 10_000
_log = logging.getLogger("fake_rvc")


@dataclass(frozen=True)
class Attempt:
    """One POST to the events endpoint, as the receiver saw it.

    ``received_wall`` is the app clock (unix seconds) and ``received_mono`` is
    ``time.monotonic()``, both taken when the request reached the endpoint: use the
    monotonic one to measure retry spacing. ``event_id`` / ``task_id`` / ``seq`` /
    ``type`` are best effort (None when the body could not be parsed), and are unverified
    claims unless ``outcome`` is ``accepted`` or ``duplicate``. ``status`` is None when
    the connection was dropped.
    """

    n: int
    received_wall: float
    received_mono: float
    server: str | None
    status: int | None
    outcome: Outcome
    reason: str | None = None
    detail: str | None = None
    event_id: str | None = None
    task_id: str | None = None
    seq: int | None = None
    type: str | None = None
    payload: dict[str, Any] | None = None
    anomalies: tuple[dict[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict of every field."""
        return {
            "n": self.n,
            "received_wall": self.received_wall,
            "received_mono": self.received_mono,
            "server": self.server,
            "status": self.status,
            "outcome": self.outcome,
            "reason": self.reason,
            "detail": self.detail,
            "event_id": self.event_id,
            "task_id": self.task_id,
            "seq": self.seq,
            "type": self.type,
            "payload": self.payload,
            "anomalies": list(self.anomalies),
        }


@dataclass(frozen=True)
class ReceivedEvent:
    """A verified event stored once, with when and how it arrived.

    The common fields of the wrapped :class:`TaskEvent` are mirrored as properties, so
    ``received.seq`` and ``received.event.seq`` are the same thing.
    """

    event: TaskEvent
    server: str
    attempt: int
    received_wall: float
    received_mono: float
    repaired: bool = False
    """True for an event fetched through ``get_task_events`` to fill a gap (repair mode)."""

    @property
    def event_id(self) -> str:
        return self.event.event_id

    @property
    def task_id(self) -> str:
        return self.event.task_id

    @property
    def type(self) -> str:
        return self.event.type

    @property
    def seq(self) -> int:
        return self.event.seq

    @property
    def payload(self) -> dict[str, Any]:
        return self.event.payload

    def to_dict(self) -> dict[str, Any]:
        """Return the event as sent (JSON mode) plus ``received`` metadata."""
        return {
            "event": self.event.model_dump(mode="json"),
            "server": self.server,
            "attempt": self.attempt,
            "received_wall": self.received_wall,
            "received_mono": self.received_mono,
            "repaired": self.repaired,
        }


def _stored_attempt(
    event: TaskEvent | ReceivedEvent,
    outcome: Outcome,
    anomalies: tuple[dict[str, Any], ...],
    n: int,
    received_wall: float,
    received_mono: float,
    server: str,
) -> Attempt:
    """The 200 attempt of a verified event: its fields come from ``event``.

    ``event`` is the new event (``accepted``) or the stored original (``duplicate``; same
    ``event_id``), so a duplicate reports the original's task, seq, type and payload.
    """
    return Attempt(
        n=n,
        received_wall=received_wall,
        received_mono=received_mono,
        server=server,
        status=200,
        outcome=outcome,
        event_id=event.event_id,
        task_id=event.task_id,
        seq=event.seq,
        type=event.type,
        payload=event.payload,
        anomalies=anomalies,
    )


@dataclass
class Timeline:
    """Everything known about one task, in arrival order.

    ``expected_seq`` is the next seq the task should send. ``anomalies`` is the history
    of what went wrong (gaps as they happened, even if later filled); ``missing_seqs`` is
    what is still missing now, between 1 and the highest seq seen.
    """

    task_id: str
    server: str
    events: list[ReceivedEvent] = field(default_factory=list)
    expected_seq: int = 1
    terminal: ReceivedEvent | None = None
    anomalies: list[dict[str, Any]] = field(default_factory=list)
    duplicates: int = 0
    anomalies_truncated: int = 0

    @property
    def seqs(self) -> list[int]:
        return [e.seq for e in self.events]

    @property
    def repaired_seqs(self) -> list[int]:
        """Seqs filled through ``get_task_events`` rather than received by POST."""
        return sorted(e.seq for e in self.events if e.repaired)

    @property
    def missing_seqs(self) -> list[int]:
        seen = set(self.seqs)
        return [s for s in range(1, max(seen, default=0) + 1) if s not in seen]

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready view of the timeline."""
        return {
            "task_id": self.task_id,
            "server": self.server,
            "events": [e.to_dict() for e in self.events],
            "seqs": self.seqs,
            "expected_seq": self.expected_seq,
            "missing_seqs": self.missing_seqs,
            "repaired_seqs": self.repaired_seqs,
            "terminal": None if self.terminal is None else self.terminal.type,
            "duplicates": self.duplicates,
            "anomalies": list(self.anomalies),
            "anomalies_truncated": self.anomalies_truncated,
        }

    def _add_anomaly(self, anomaly: dict[str, Any]) -> None:
        if len(self.anomalies) >= _MAX_ANOMALIES_PER_TASK:
            self.anomalies_truncated += 1
        else:
            self.anomalies.append(anomaly)


@dataclass(frozen=True)
class Fault:
    """An injected answer for the next ``remaining`` posts from one server.

    ``delay_s`` waits before answering; then ``status`` answers with that status (the
    event is not stored), ``drop`` closes the connection without a response, and neither
    processes the post normally (so a delay alone just makes the receiver slow).
    """

    server: str
    status: int | None = None
    delay_s: float | None = None
    drop: bool = False
    remaining: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "status": self.status,
            "delay_s": self.delay_s,
            "drop": self.drop,
            "remaining": self.remaining,
        }


class Subscription:
    """A live feed of attempts for one asyncio loop (the page's SSE stream uses it).

    Items are ``("attempt", Attempt)``, ``("reset", None)``, or ``None`` when the recorder
    closes its streams. Unsubscribe with :meth:`Recorder.unsubscribe`.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queue: asyncio.Queue[tuple[str, Attempt | None] | None] = asyncio.Queue()

    def _push(self, item: tuple[str, Attempt | None] | None) -> None:
        with contextlib.suppress(RuntimeError):  # loop already closed: nobody listens
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)


Listener = Callable[[Attempt], None]


class Recorder:
    """The receiver's state, shared by the app and the test that drives it.

    Thread-safe: every method takes one re-entrant lock. Sync waits block on a
    ``threading.Condition``; async waits work on any event loop (see the module docstring).

    Args:
        max_attempts: how many attempts to keep (oldest forgotten first); counters stay
            exact. Events are never forgotten until :meth:`reset`.
    """

    def __init__(self, *, max_attempts: int = 100_000) -> None:
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._attempts: collections.deque[Attempt] = collections.deque(maxlen=max_attempts)
        self._n = 0
        self._events: list[ReceivedEvent] = []
        self._by_event_id: dict[str, ReceivedEvent] = {}
        # Keyed by (server, task_id): a task id is unique only within its server (kit spec
        # §4.2: four characters of the server name and six hex digits).
        self._timelines: dict[tuple[str, str], Timeline] = {}
        self._faults: dict[str, list[Fault]] = {}
        self._counters: collections.Counter[str] = collections.Counter()
        self._rejections: collections.Counter[str] = collections.Counter()
        self._async_waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
        self._subscriptions: set[Subscription] = set()
        self._listeners: list[Listener] = []

    def __repr__(self) -> str:
        with self._lock:
            return (
                f"<Recorder attempts={self._n} events={len(self._events)} "
                f"tasks={len(self._timelines)} faults={sum(map(len, self._faults.values()))}>"
            )

    # ----------------------------------------------------------------- recording

    def next_attempt_number(self) -> int:
        """Reserve the next attempt number (1-based, in arrival order)."""
        with self._lock:
            self._n += 1
            return self._n

    def record_attempt(self, attempt: Attempt) -> None:
        """Store one attempt that did not yield a new event (rejected, fault, dropped)."""
        with self._lock:
            self._store_attempt(attempt)
        self._after_change(attempt)

    def record_event(
        self,
        event: TaskEvent,
        *,
        server: str,
        n: int,
        received_wall: float,
        received_mono: float,
    ) -> Attempt:
        """Store a verified event, or note it as a duplicate; return the attempt.

        A duplicate ``event_id`` is not stored again: the attempt's outcome is
        ``duplicate`` and the original task's timeline gets a ``duplicate`` anomaly, or an
        ``event_id_reused`` one (naming the fields that differ) when the body is not the
        same event again.
        A new event advances its task's expected seq and records ``gap`` (seq above the
        expected one), ``reorder`` (below it) or ``after_terminal`` (anything after
        ``task_done`` / ``task_failed``).
        """
        with self._lock:
            original = self._by_event_id.get(event.event_id)
            if original is not None:
                first_timeline = self._timelines[(original.server, original.task_id)]
                first_timeline.duplicates += 1
                # A re-send (at least once) repeats the event exactly; the same id on a
                # different event is a server bug that dedupe would otherwise hide.
                differs = [
                    name
                    for name in type(event).model_fields
                    if getattr(event, name) != getattr(original.event, name)
                ]
                if server != original.server:
                    differs.append("X-RVC-Server")
                dup: dict[str, Any] = {
                    "kind": "event_id_reused" if differs else "duplicate",
                    "event_id": event.event_id,
                    "seq": original.seq,
                    "attempt": n,
                    "first_attempt": original.attempt,
                }
                if differs:
                    dup["differs"] = differs
                    dup["got"] = {"task_id": event.task_id, "seq": event.seq, "type": event.type}
                first_timeline._add_anomaly(dup)
                self._counters["duplicates"] += 1
                self._counters["anomaly_" + dup["kind"]] += 1
                attempt = _stored_attempt(
                    original, "duplicate", (dup,), n, received_wall, received_mono, server
                )
            else:
                received = ReceivedEvent(event, server, n, received_wall, received_mono)
                key = (server, event.task_id)
                timeline = self._timelines.get(key)
                if timeline is None:
                    timeline = Timeline(task_id=event.task_id, server=server)
                    self._timelines[key] = timeline
                anomalies = self._track(timeline, received)
                for anomaly in anomalies:
                    timeline._add_anomaly(anomaly)
                    self._counters["anomaly_" + anomaly["kind"]] += 1
                timeline.events.append(received)
                if event.type in TERMINAL_EVENT_TYPES and timeline.terminal is None:
                    timeline.terminal = received
                self._events.append(received)
                self._by_event_id[event.event_id] = received
                self._counters["accepted"] += 1
                attempt = _stored_attempt(
                    event, "accepted", tuple(anomalies), n, received_wall, received_mono, server
                )
            self._store_attempt(attempt)
        self._after_change(attempt)
        return attempt

    def record_repaired(self, event: TaskEvent, *, server: str) -> Attempt | None:
        """Store an event fetched to fill a gap (repair mode); None if it is no longer missing.

        Only a seq still in the task's ``missing_seqs`` is stored, marked ``repaired``; its
        timeline's expected seq and anomaly history are left as they are (the gap did
        happen). The record is an :class:`Attempt` with outcome ``repaired``.
        """
        with self._lock:
            timeline = self._timelines.get((server, event.task_id))
            if (
                timeline is None
                or event.event_id in self._by_event_id
                or event.seq not in timeline.missing_seqs
            ):
                return None
            self._n += 1
            now_wall, now_mono = time.time(), time.monotonic()
            received = ReceivedEvent(event, server, self._n, now_wall, now_mono, repaired=True)
            timeline.events.append(received)
            if event.type in TERMINAL_EVENT_TYPES and timeline.terminal is None:
                timeline.terminal = received
            self._events.append(received)
            self._by_event_id[event.event_id] = received
            self._counters["repaired"] += 1
            attempt = Attempt(
                n=self._n,
                received_wall=now_wall,
                received_mono=now_mono,
                server=server,
                status=None,
                outcome="repaired",
                reason="get_task_events",
                detail=f"seq {event.seq} fetched from the server to fill a gap",
                event_id=event.event_id,
                task_id=event.task_id,
                seq=event.seq,
                type=event.type,
                payload=event.payload,
            )
            self._store_attempt(attempt)
        self._after_change(attempt)
        return attempt

    @staticmethod
    def _track(timeline: Timeline, received: ReceivedEvent) -> list[dict[str, Any]]:
        anomalies: list[dict[str, Any]] = []
        seq = received.seq
        if timeline.terminal is not None:
            anomalies.append(
                {
                    "kind": "after_terminal",
                    "terminal_type": timeline.terminal.type,
                    "terminal_seq": timeline.terminal.seq,
                    "got": seq,
                    "type": received.type,
                    "event_id": received.event_id,
                }
            )
        expected = timeline.expected_seq
        if seq > expected:
            anomalies.append(
                {
                    "kind": "gap",
                    "expected": expected,
                    "got": seq,
                    "missing": list(range(expected, seq)),
                    "event_id": received.event_id,
                }
            )
            timeline.expected_seq = seq + 1
        elif seq < expected:
            anomalies.append(
                {
                    "kind": "reorder",
                    "expected": expected,
                    "got": seq,
                    "seq_seen_before": seq in timeline.seqs,
                    "event_id": received.event_id,
                }
            )
        else:
            timeline.expected_seq = seq + 1
        return anomalies

    def _store_attempt(self, attempt: Attempt) -> None:
        self._attempts.append(attempt)
        if attempt.outcome == "repaired":  # no POST: counted as "repaired" only
            return
        self._counters["attempts"] += 1
        if attempt.outcome == "rejected":
            self._counters["rejected"] += 1
            self._rejections[attempt.reason or "unknown"] += 1
        elif attempt.outcome == "fault":
            self._counters["faults"] += 1
        elif attempt.outcome == "dropped":
            self._counters["dropped"] += 1

    def _after_change(self, attempt: Attempt | None) -> None:
        with self._lock:
            self._cond.notify_all()
            waiters = list(self._async_waiters)
            subscriptions = list(self._subscriptions)
            listeners = list(self._listeners)
        for loop, flag in waiters:
            with contextlib.suppress(RuntimeError):  # the waiter's loop is closed
                loop.call_soon_threadsafe(flag.set)
        item: tuple[str, Attempt | None] = (
            ("reset", None) if attempt is None else ("attempt", attempt)
        )
        for sub in subscriptions:
            sub._push(item)
        if attempt is not None:
            for listener in listeners:
                try:
                    listener(attempt)
                except Exception:  # a broken printer must not break the receiver
                    _log.exception("fake_rvc listener %r failed", listener)

    # ----------------------------------------------------------------- reading

    def events(
        self, server: str | None = None, task_id: str | None = None, type: str | None = None
    ) -> list[ReceivedEvent]:
        """Return the stored events in arrival order, filtered by the given fields."""
        with self._lock:
            return [
                e
                for e in self._events
                if (server is None or e.server == server)
                and (task_id is None or e.task_id == task_id)
                and (type is None or e.type == type)
            ]

    def _matching(self, task_id: str, server: str | None) -> list[Timeline]:
        # Caller holds the lock. Without a server, every server's task of that id.
        if server is not None:
            found = self._timelines.get((server, task_id))
            return [] if found is None else [found]
        return [t for (_, tid), t in self._timelines.items() if tid == task_id]

    def timeline(self, task_id: str, server: str | None = None) -> Timeline | None:
        """Return a snapshot of one task's timeline, or None if no event named it.

        Task ids are unique per server; pass ``server`` when two servers may share one.
        Without it, the first server (in order of first event) that used the id is meant.
        """
        with self._lock:
            matching = self._matching(task_id, server)
            if not matching:
                return None
            return self._snapshot(matching[0])

    def timelines(self) -> list[Timeline]:
        """Return a snapshot of every task's timeline, in order of first event."""
        with self._lock:
            return [self._snapshot(t) for t in self._timelines.values()]

    @staticmethod
    def _snapshot(timeline: Timeline) -> Timeline:
        return Timeline(
            task_id=timeline.task_id,
            server=timeline.server,
            events=list(timeline.events),
            expected_seq=timeline.expected_seq,
            terminal=timeline.terminal,
            anomalies=list(timeline.anomalies),
            duplicates=timeline.duplicates,
            anomalies_truncated=timeline.anomalies_truncated,
        )

    def task_ids(self) -> list[str]:
        """Return the ids of every task seen, in order of first event."""
        with self._lock:
            return list(dict.fromkeys(task_id for _, task_id in self._timelines))

    def attempts(self, server: str | None = None) -> list[Attempt]:
        """Return the kept attempts in arrival order, optionally for one server header."""
        with self._lock:
            return [a for a in self._attempts if server is None or a.server == server]

    def counters(self) -> dict[str, Any]:
        """Return the counters as a JSON-ready dict.

        Keys: ``attempts``, ``accepted``, ``duplicates``, ``rejected``, ``faults``,
        ``dropped``, ``repaired``, ``tasks``, ``anomalies`` (by kind) and ``rejections``
        (by reason).
        """
        with self._lock:
            c = self._counters
            return {
                "attempts": c["attempts"],
                "accepted": c["accepted"],
                "duplicates": c["duplicates"],
                "rejected": c["rejected"],
                "faults": c["faults"],
                "dropped": c["dropped"],
                "repaired": c["repaired"],
                "tasks": len(self._timelines),
                "anomalies": {
                    kind: c["anomaly_" + kind]
                    for kind in ("gap", "reorder", "duplicate", "event_id_reused", "after_terminal")
                },
                "rejections": dict(sorted(self._rejections.items())),
            }

    def reset(self) -> None:
        """Forget events, attempts, counters and faults; wake waiters; tell the page."""
        with self._lock:
            self._attempts.clear()
            self._n = 0
            self._events.clear()
            self._by_event_id.clear()
            self._timelines.clear()
            self._faults.clear()
            self._counters.clear()
            self._rejections.clear()
        self._after_change(None)

    # ----------------------------------------------------------------- faults

    def inject_fault(
        self,
        server: str,
        *,
        status: int | None = None,
        delay_s: float | None = None,
        drop: bool = False,
        count: int = 1,
    ) -> Fault:
        """Answer the next ``count`` posts from ``server`` with a fault.

        ``server`` is an ``X-RVC-Server`` name, or ``"*"`` for any server. Faults queue
        up in order per server. Faults act before authentication, like a broken network
        or proxy would.

        Raises:
            ValueError: nothing to inject, both ``status`` and ``drop``, a status outside
                100–599, a negative delay or a count below 1.
        """
        if status is None and delay_s is None and not drop:
            raise ValueError("A fault needs at least one of status, delay_s or drop=True.")
        if status is not None and drop:
            raise ValueError("A fault either answers with a status or drops; not both.")
        if status is not None and not 100 <= status <= 599:
            raise ValueError(f"Fault status must be 100-599, got {status}.")
        if delay_s is not None and not 0 <= delay_s <= 3600:
            raise ValueError(f"Fault delay_s must be 0-3600 seconds, got {delay_s}.")
        if count < 1:
            raise ValueError(f"Fault count must be at least 1, got {count}.")
        if not server:
            raise ValueError("Fault server must be a server name or '*'.")
        fault = Fault(server=server, status=status, delay_s=delay_s, drop=drop, remaining=count)
        with self._lock:
            self._faults.setdefault(server, []).append(fault)
        return fault

    def take_fault(self, server: str | None) -> Fault | None:
        """Consume one fault for a post from ``server`` (its own first, then ``"*"``)."""
        with self._lock:
            for key in (server, ANY_SERVER):
                if key is None:
                    continue
                plan = self._faults.get(key)
                if plan:
                    fault = plan[0]
                    if fault.remaining <= 1:
                        plan.pop(0)
                    else:
                        plan[0] = Fault(
                            fault.server,
                            fault.status,
                            fault.delay_s,
                            fault.drop,
                            fault.remaining - 1,
                        )
                    if not plan:
                        del self._faults[key]
                    return fault
            return None

    def faults(self) -> list[Fault]:
        """Return the pending faults, per server in the order they will be used."""
        with self._lock:
            return [f for plan in self._faults.values() for f in plan]

    def clear_faults(self, server: str | None = None) -> None:
        """Remove pending faults for ``server``, or all of them when None."""
        with self._lock:
            if server is None:
                self._faults.clear()
            else:
                self._faults.pop(server, None)

    # ----------------------------------------------------------------- waiting

    def wait_for(self, predicate: Callable[[Recorder], T | None], timeout_s: float) -> T:
        """Block until ``predicate(self)`` returns something other than None or False.

        Thread-safe; never call it on the loop that runs the app.

        Raises:
            TimeoutError: the predicate still failed after ``timeout_s``.
        """
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                result = predicate(self)
                if result is not None and result is not False:
                    return result
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"Condition not met within {timeout_s} s: {self!r}.")
                self._cond.wait(remaining)

    async def wait_for_async(
        self, predicate: Callable[[Recorder], T | None], timeout_s: float
    ) -> T:
        """Await until ``predicate(self)`` returns something other than None or False.

        Works on any event loop, including the app's.

        Raises:
            TimeoutError: the predicate still failed after ``timeout_s``.
        """
        loop = asyncio.get_running_loop()
        flag = asyncio.Event()
        waiter = (loop, flag)
        deadline = loop.time() + timeout_s
        with self._lock:
            self._async_waiters.add(waiter)
        try:
            while True:
                flag.clear()
                result = predicate(self)
                if result is not None and result is not False:
                    return result
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise TimeoutError(f"Condition not met within {timeout_s} s: {self!r}.")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(flag.wait(), remaining)
        finally:
            with self._lock:
                self._async_waiters.discard(waiter)

    def _find_event(
        self, task_id: str, type: str | None, server: str | None = None
    ) -> ReceivedEvent | None:
        with self._lock:
            for timeline in self._matching(task_id, server):
                for e in timeline.events:
                    if type is None or e.type == type:
                        return e
            return None

    def wait_for_event(
        self,
        task_id: str,
        type: str | None = None,
        timeout_s: float = 10.0,
        *,
        server: str | None = None,
    ) -> ReceivedEvent:
        """Block until task ``task_id`` has an event of ``type`` (any type when None).

        Returns the first such event, even one that arrived before the call.

        Raises:
            TimeoutError: no such event within ``timeout_s``; the message says what was seen.
        """
        try:
            return self.wait_for(lambda r: r._find_event(task_id, type, server), timeout_s)
        except TimeoutError:
            raise TimeoutError(self._timeout_message(task_id, type, timeout_s)) from None

    async def wait_for_event_async(
        self,
        task_id: str,
        type: str | None = None,
        timeout_s: float = 10.0,
        *,
        server: str | None = None,
    ) -> ReceivedEvent:
        """Async twin of :meth:`wait_for_event`, usable on any loop."""
        try:
            return await self.wait_for_async(
                lambda r: r._find_event(task_id, type, server), timeout_s
            )
        except TimeoutError:
            raise TimeoutError(self._timeout_message(task_id, type, timeout_s)) from None

    def wait_for_attempts(
        self, count: int, *, server: str | None = None, timeout_s: float = 10.0
    ) -> list[Attempt]:
        """Block until at least ``count`` attempts (from ``server``) were recorded."""

        def enough(r: Recorder) -> list[Attempt] | None:
            found = r.attempts(server)
            return found if len(found) >= count else None

        return self.wait_for(enough, timeout_s)

    def _timeout_message(self, task_id: str, type: str | None, timeout_s: float) -> str:
        seen = [f"#{e.seq} {e.type}" for e in self.events(task_id=task_id)]
        return (
            f"No {type or 'event'} for task {task_id!r} within {timeout_s} s; "
            f"seen for it: {', '.join(seen) or 'nothing'}."
        )

    # ----------------------------------------------------------------- live feeds

    def subscribe(self, backlog: int = 2000) -> tuple[list[Attempt], Subscription]:
        """Return the last ``backlog`` attempts and a live feed of the ones after them.

        Must be called on the loop that will read the subscription.
        """
        sub = Subscription(asyncio.get_running_loop())
        with self._lock:
            self._subscriptions.add(sub)
            past = list(self._attempts)[-backlog:] if backlog > 0 else []
        return past, sub

    def unsubscribe(self, sub: Subscription) -> None:
        """Stop feeding ``sub``."""
        with self._lock:
            self._subscriptions.discard(sub)

    def close_streams(self) -> None:
        """End every live feed (used before shutting the server down)."""
        with self._lock:
            subs = list(self._subscriptions)
            self._subscriptions.clear()
        for sub in subs:
            sub._push(None)

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(attempt)`` after each recorded attempt, on the recording thread.

        A listener must be quick and must not raise; the CLI prints one line with it.
        """
        with self._lock:
            self._listeners.append(listener)

    @contextlib.contextmanager
    def listening(self, listener: Listener) -> Iterator[None]:
        """Register ``listener`` for the duration of a ``with`` block."""
        self.add_listener(listener)
        try:
            yield
        finally:
            with self._lock:
                self._listeners.remove(listener)
