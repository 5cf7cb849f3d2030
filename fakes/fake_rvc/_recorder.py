"""The receiver's state machine: :class:`Recorder` keeps events, timelines, attempts, counters.

:class:`Recorder` is plain Python guarded by one re-entrant lock, so any thread may call
it: the uvicorn thread that runs the app records into it while a test thread (or another
event loop) reads it and waits on it. It composes two collaborators that own their state:
a :class:`~fake_rvc._waits.Notifier` (condition, async waiters, live feeds, listeners; the
wait methods here delegate to it) and a :class:`~fake_rvc._faults.FaultPlan`. The records
are in :mod:`fake_rvc._records`.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any, Self, TypeVar

from fake_rvc._exceptions import WaitTimeout
from fake_rvc._faults import Fault, FaultPlan
from fake_rvc._records import (
    ANOMALY_KINDS,
    Attempt,
    ReceivedEvent,
    TaskState,
    Timeline,
    duplicate_anomaly,
    stored_attempt,
)
from fake_rvc._waits import Listener, Notifier, Subscription
from robot_mcp_kit.models import TaskEvent
from robot_mcp_kit.receiver import Ingested

__all__ = ["Recorder"]

T = TypeVar("T")


class Recorder:
    """The receiver's state, shared by the app and the test that drives it.

    Thread-safe: every method takes one re-entrant lock. Sync waits block on a
    ``threading.Condition``; async waits work on any event loop (see :mod:`fake_rvc._waits`).

    Args:
        max_attempts: how many attempts to keep (oldest forgotten first); counters stay
            exact. Events are never forgotten until :meth:`reset`.
    """

    def __init__(self, *, max_attempts: int = 100_000) -> None:
        self._lock = threading.RLock()
        self._notifier = Notifier(self._lock, describe=self.__repr__)
        self._attempts: collections.deque[Attempt] = collections.deque(maxlen=max_attempts)
        self._n = 0
        self._events: list[ReceivedEvent] = []
        self._by_event_id: dict[str, ReceivedEvent] = {}
        # Keyed by (server, task_id): a task id is unique only within its server (kit spec
        # §4.2: four characters of the server name and six hex digits).
        self._timelines: dict[tuple[str, str], Timeline] = {}
        # What each server answered list_tasks (repair mode), by (server, task_id).
        self._states: dict[tuple[str, str], TaskState] = {}
        self._faults = FaultPlan()
        self._counters: collections.Counter[str] = collections.Counter()
        self._rejections: collections.Counter[str] = collections.Counter()

    def __repr__(self) -> str:
        with self._lock:
            return (
                f"<Recorder attempts={self._n} events={len(self._events)} "
                f"tasks={len(self._timelines)} faults={len(self._faults)}>"
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
        self._notifier.notify(attempt)

    def record_event(
        self,
        event: TaskEvent,
        *,
        server: str,
        n: int,
        received_wall: float,
        received_mono: float,
        traceparent: str | None = None,
        tracestate: str | None = None,
        ingested: Ingested | None = None,
    ) -> Attempt:
        """Store a verified event, or note it as a duplicate; return the attempt.

        ``traceparent`` / ``tracestate`` are the POST's trace headers, kept on the attempt
        (and the first one on the stored event). ``ingested`` is what the app's receiver
        (:class:`robot_mcp_kit.receiver.Receiver`, which stores events durably and
        decides) made of the event: a duplicate by its word is one here too, and its gap,
        late and after-terminal flags say which anomalies happened. Without it (a Recorder
        used on its own) the recorder decides by the same rules.

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
            if original is None and ingested is not None and not ingested.new:
                # The receiver stored it before this recorder's memory begins (a reset).
                self._counters["duplicates"] += 1
                self._counters["anomaly_duplicate"] += 1
                dup: dict[str, Any] = {
                    "kind": "duplicate",
                    "event_id": event.event_id,
                    "seq": event.seq,
                    "attempt": n,
                    "first_attempt": None,
                }
                attempt = stored_attempt(
                    event, "duplicate", (dup,), n, received_wall, received_mono, server
                )
            elif original is not None:
                first_timeline = self._timelines[(original.server, original.task_id)]
                first_timeline.duplicates += 1
                dup = duplicate_anomaly(event, server, original, n)
                first_timeline.add_anomaly(dup)
                self._counters["duplicates"] += 1
                self._counters["anomaly_" + dup["kind"]] += 1
                attempt = stored_attempt(
                    original, "duplicate", (dup,), n, received_wall, received_mono, server
                )
            else:
                received = ReceivedEvent(
                    event, server, n, received_wall, received_mono, traceparent=traceparent
                )
                key = (server, event.task_id)
                timeline = self._timelines.get(key)
                if timeline is None:
                    timeline = Timeline(task_id=event.task_id, server=server)
                    self._timelines[key] = timeline
                anomalies = timeline.track(received, ingested)
                for anomaly in anomalies:
                    timeline.add_anomaly(anomaly)
                    self._counters["anomaly_" + anomaly["kind"]] += 1
                self._keep(timeline, received)
                self._counters["accepted"] += 1
                attempt = stored_attempt(
                    event, "accepted", tuple(anomalies), n, received_wall, received_mono, server
                )
            if traceparent is not None or tracestate is not None:
                attempt = replace(attempt, traceparent=traceparent, tracestate=tracestate)
            self._store_attempt(attempt)
        self._notifier.notify(attempt)
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
            self._keep(timeline, received)
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
        self._notifier.notify(attempt)
        return attempt

    def record_task_states(
        self, server: str, tasks: Iterable[Mapping[str, Any]], *, polled_wall: float | None = None
    ) -> list[TaskState]:
        """Store what ``server`` answered ``list_tasks``; return the states that changed.

        Each TaskInfo with a string ``task_id`` and ``state`` becomes a :class:`TaskState`;
        anything else in the answer is skipped. Only a new task or a changed state is
        stored again and fed to the live page, so polling an idle server changes nothing.
        """
        now = time.time() if polled_wall is None else polled_wall
        changed: list[TaskState] = []
        with self._lock:
            for info in tasks:
                task_id, state = info.get("task_id"), info.get("state")
                if not isinstance(task_id, str) or not isinstance(state, str):
                    continue
                tool = info.get("tool")
                known = self._states.get((server, task_id))
                if known is not None and known.state == state:
                    continue
                record = TaskState(
                    task_id, server, tool if isinstance(tool, str) else None, state, now
                )
                self._states[(server, task_id)] = record
                changed.append(record)
        for record in changed:
            self._notifier.notify(record)
        return changed

    def task_states(self, server: str | None = None) -> list[TaskState]:
        """Return the last reconciled state of each task (of ``server``), oldest first."""
        with self._lock:
            return [s for s in self._states.values() if server is None or s.server == server]

    def _keep(self, timeline: Timeline, received: ReceivedEvent) -> None:
        # Caller holds the lock.
        timeline.store(received)
        self._events.append(received)
        self._by_event_id[received.event_id] = received

    def _store_attempt(self, attempt: Attempt) -> None:
        # Caller holds the lock.
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

    def _find_event(
        self, task_id: str, type: str | None, server: str | None = None
    ) -> ReceivedEvent | None:
        with self._lock:
            for timeline in self._matching(task_id, server):
                for e in timeline.events:
                    if type is None or e.type == type:
                        return e
            return None

    def event(self, event_id: str) -> ReceivedEvent | None:
        """The stored event with ``event_id``, or None."""
        with self._lock:
            return self._by_event_id.get(event_id)

    def timeline(self, task_id: str, server: str | None = None) -> Timeline | None:
        """Return a snapshot of one task's timeline, or None if no event named it.

        Task ids are unique per server; pass ``server`` when two servers may share one.
        Without it, the first server (in order of first event) that used the id is meant.
        """
        with self._lock:
            matching = self._matching(task_id, server)
            return matching[0].copy() if matching else None

    def timelines(self) -> list[Timeline]:
        """Return a snapshot of every task's timeline, in order of first event."""
        with self._lock:
            return [t.copy() for t in self._timelines.values()]

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
            out: dict[str, Any] = {
                key: c[key]
                for key in (
                    "attempts",
                    "accepted",
                    "duplicates",
                    "rejected",
                    "faults",
                    "dropped",
                    "repaired",
                )
            }
            out["tasks"] = len(self._timelines)
            out["anomalies"] = {kind: c["anomaly_" + kind] for kind in ANOMALY_KINDS}
            out["rejections"] = dict(sorted(self._rejections.items()))
            return out

    def reset(self) -> None:
        """Forget events, attempts, counters and faults; wake waiters; tell the page."""
        with self._lock:
            self._attempts.clear()
            self._n = 0
            self._events.clear()
            self._by_event_id.clear()
            self._timelines.clear()
            self._states.clear()
            self._faults.clear()
            self._counters.clear()
            self._rejections.clear()
        self._notifier.notify(None)

    # ----------------------------------------------------------------- faults

    def inject_fault(
        self,
        server: str,
        *,
        status: int | None = None,
        delay_s: float | None = None,
        drop: bool = False,
        count: int = 1,
        task_id: str | None = None,
        retry_after_s: int | None = None,
    ) -> Fault:
        """Answer the next ``count`` posts from ``server`` (of ``task_id`` only, if given).

        ``server`` is an ``X-RVC-Server`` name, or ``"*"`` for any server. Faults queue
        up in order per server. Faults act before authentication, like a broken network
        or proxy would.

        Raises:
            FaultError: (a ``ValueError``) nothing to inject, both ``status`` and ``drop``,
                a status outside 100–599, a negative delay or a count below 1.
        """
        return self._faults.add(
            Fault(
                server=server,
                status=status,
                delay_s=delay_s,
                drop=drop,
                remaining=count,
                task_id=task_id,
                retry_after_s=retry_after_s,
            )
        )

    def add_faults(self, faults: Iterable[Fault]) -> list[Fault]:
        """Queue ``faults`` in order (e.g. a script from :func:`fake_rvc.load_faults`)."""
        return [self._faults.add(fault) for fault in faults]

    def take_fault(self, server: str | None, task_id: str | None = None) -> Fault | None:
        """Consume one fault for a post from ``server`` (its own first, then ``"*"``)."""
        return self._faults.take(server, task_id)

    def faults(self) -> list[Fault]:
        """Return the pending faults, per server in the order they will be used."""
        return self._faults.pending()

    def clear_faults(self, server: str | None = None) -> None:
        """Remove pending faults for ``server``, or all of them when None."""
        self._faults.clear(server)

    # ----------------------------------------------------------------- waiting

    def wait_for(self, predicate: Callable[[Self], T | None], timeout_s: float) -> T:
        """Block until ``predicate(self)`` returns something other than None or False.

        Thread-safe; never call it on the loop that runs the app.

        Raises:
            WaitTimeout: the predicate still failed after ``timeout_s`` (a ``TimeoutError``).
        """
        return self._notifier.wait_for(lambda: predicate(self), timeout_s)

    async def wait_for_async(self, predicate: Callable[[Self], T | None], timeout_s: float) -> T:
        """Await until ``predicate(self)`` returns something other than None or False.

        Works on any event loop, including the app's.

        Raises:
            WaitTimeout: the predicate still failed after ``timeout_s`` (a ``TimeoutError``).
        """
        return await self._notifier.wait_for_async(lambda: predicate(self), timeout_s)

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
            WaitTimeout: no such event within ``timeout_s``; the message says what was seen.
        """
        try:
            return self.wait_for(lambda r: r._find_event(task_id, type, server), timeout_s)
        except WaitTimeout:
            raise WaitTimeout(self._timeout_message(task_id, type, timeout_s)) from None

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
        except WaitTimeout:
            raise WaitTimeout(self._timeout_message(task_id, type, timeout_s)) from None

    def wait_for_attempts(
        self, count: int, *, server: str | None = None, timeout_s: float = 10.0
    ) -> list[Attempt]:
        """Block until at least ``count`` attempts (from ``server``) were recorded."""

        def enough(r: Self) -> list[Attempt] | None:
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

        Must be called on the loop that will read the subscription. The backlog and the
        feed are taken under one lock, so no attempt falls between them. The feed also
        carries each changed :class:`TaskState`; read :meth:`task_states` after
        subscribing for the ones before (a state in both is the same record twice).
        """
        with self._lock:
            sub = self._notifier.subscribe()
            past = self.attempts()[-backlog:] if backlog > 0 else []
        return past, sub

    def unsubscribe(self, sub: Subscription) -> None:
        """Stop feeding ``sub``."""
        self._notifier.unsubscribe(sub)

    def close_streams(self) -> None:
        """End every live feed (used before shutting the server down)."""
        self._notifier.close_streams()

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(attempt)`` after each recorded attempt, on the recording thread.

        A listener must be quick and must not raise; the CLI prints one line with it.
        """
        self._notifier.add_listener(listener)

    def listening(self, listener: Listener) -> contextlib.AbstractContextManager[None]:
        """Register ``listener`` for the duration of a ``with`` block."""
        return self._notifier.listening(listener)
