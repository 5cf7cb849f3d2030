"""What the receiver keeps: one :class:`Attempt` per POST, verified events, per-task timelines.

Every POST is an :class:`Attempt`, whatever its fate (accepted, duplicate, rejected,
answered by an injected fault, dropped); verified, first-seen events are also kept as
:class:`ReceivedEvent` and feed the per-task :class:`Timeline`, which records anomalies as
dicts ``{"kind": "gap" | "reorder" | "duplicate" | "event_id_reused" | "after_terminal",
...evidence}``. A :class:`TaskState` is what the server itself said of a task when asked
(``list_tasks``, in repair mode): the only way the receiver learns of a task that posted
nothing, such as one cancelled before its first event (a cancel posts no event, contract
§7). These are plain records; :class:`fake_rvc.Recorder` owns and guards them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from robot_mcp_kit.models import TERMINAL_EVENT_TYPES, TaskEvent
from robot_mcp_kit.receiver import KNOWN_EVENT_TYPES, Ingested

__all__ = [
    "ANOMALY_KINDS",
    "MAX_TRACE_HEADER_CHARS",
    "Attempt",
    "Outcome",
    "ReceivedEvent",
    "TaskState",
    "Timeline",
    "duplicate_anomaly",
    "json_line",
    "stored_attempt",
]

Outcome = Literal["accepted", "duplicate", "rejected", "fault", "dropped", "repaired"]
"""What happened to one POST: ``accepted`` (stored), ``duplicate`` (acknowledged, not
stored again), ``rejected`` (4xx), ``fault`` (answered by an injected status),
``dropped`` (connection closed on purpose, no response). ``repaired`` is no POST: an event
missing from a gap, fetched from the server's ``get_task_events`` in repair mode."""

MAX_TRACE_HEADER_CHARS = 512
"""The most characters of a ``traceparent`` / ``tracestate`` header an attempt keeps (a
``tracestate`` has at most 32 members; 512 covers every usual one)."""

ANOMALY_KINDS = ("gap", "reorder", "duplicate", "event_id_reused", "after_terminal")
"""Every ``kind`` an anomaly may have, in the order the counters list them."""

_MAX_ANOMALIES_PER_TASK = 10_000
_EVENT_FIELDS = ("event_id", "task_id", "seq", "type", "payload")
"""The fields an :class:`Attempt` copies from the event it carried."""


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
    traceparent: str | None = None
    """The POST's W3C ``traceparent`` header as received (None: none sent), at most
    :data:`MAX_TRACE_HEADER_CHARS` characters."""
    tracestate: str | None = None
    """The POST's ``tracestate`` header as received (None: none sent), bounded the same."""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict of every field."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["anomalies"] = list(self.anomalies)
        return out


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
    traceparent: str | None = None
    """The ``traceparent`` header of the POST that delivered it first (None: none sent)."""

    @property
    def event_id(self) -> str:
        """The event's ``event_id``."""
        return self.event.event_id

    @property
    def task_id(self) -> str:
        """The event's ``task_id``."""
        return self.event.task_id

    @property
    def type(self) -> str:
        """The event's ``type``."""
        return self.event.type

    @property
    def seq(self) -> int:
        """The event's ``seq``."""
        return self.event.seq

    @property
    def payload(self) -> dict[str, Any]:
        """The event's ``payload``."""
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
            "traceparent": self.traceparent,
        }


def json_line(event: ReceivedEvent) -> str:
    """``event.to_dict()`` as one line of JSON (a JSONL export), newline included."""
    return json.dumps(event.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n"


def stored_attempt(
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
    claims = {name: getattr(event, name) for name in _EVENT_FIELDS}
    return Attempt(
        n=n,
        received_wall=received_wall,
        received_mono=received_mono,
        server=server,
        status=200,
        outcome=outcome,
        anomalies=anomalies,
        **claims,
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
        """The seq of each stored event, in arrival order."""
        return [e.seq for e in self.events]

    @property
    def repaired_seqs(self) -> list[int]:
        """Seqs filled through ``get_task_events`` rather than received by POST."""
        return sorted(e.seq for e in self.events if e.repaired)

    @property
    def missing_seqs(self) -> list[int]:
        """Seqs between 1 and the highest seen that no stored event has."""
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

    def inspection(self) -> dict[str, Any]:
        """The contract's inspection-hook view (docs/contract.md §5.5) of this task.

        ``events``: each stored event once, in the order it was stored; ``gaps``: every seq
        found missing when a later one arrived, whether or not it came afterwards.
        """
        gaps = sorted(
            {seq for a in self.anomalies if a.get("kind") == "gap" for seq in a["missing"]}
        )
        return {
            "server": self.server,
            "task_id": self.task_id,
            "events": [{"event_id": e.event_id, "seq": e.seq, "type": e.type} for e in self.events],
            "gaps": gaps,
        }

    def copy(self) -> Timeline:
        """A snapshot: later changes to this timeline do not show in it."""
        return Timeline(
            task_id=self.task_id,
            server=self.server,
            events=list(self.events),
            expected_seq=self.expected_seq,
            terminal=self.terminal,
            anomalies=list(self.anomalies),
            duplicates=self.duplicates,
            anomalies_truncated=self.anomalies_truncated,
        )

    def add_anomaly(self, anomaly: dict[str, Any]) -> None:
        """Keep ``anomaly`` in the history, or count it once the history is full."""
        if len(self.anomalies) >= _MAX_ANOMALIES_PER_TASK:
            self.anomalies_truncated += 1
        else:
            self.anomalies.append(anomaly)

    def store(self, received: ReceivedEvent) -> None:
        """Append ``received``; the first terminal event becomes the task's ``terminal``."""
        self.events.append(received)
        if received.type in TERMINAL_EVENT_TYPES and self.terminal is None:
            self.terminal = received

    def track(
        self, received: ReceivedEvent, placed: Ingested | None = None
    ) -> list[dict[str, Any]]:
        """Advance ``expected_seq`` for a newly received event; return its anomalies.

        ``after_terminal`` (an event of a known type after ``task_done`` / ``task_failed``;
        one of a type the kit does not know is acknowledged and ignored, contract §4.4),
        ``gap`` (seq above the expected one, whatever the type: every seq counts) or
        ``reorder`` (below it). The caller stores them.
        ``placed`` is what the app's receiver (:class:`robot_mcp_kit.receiver.Receiver`)
        decided of the event: then its word says which of them happened, and the
        timeline only gives their evidence; without it (a Recorder used on its own) the
        timeline decides by the same rule.
        """
        anomalies: list[dict[str, Any]] = []
        seq = received.seq
        expected = self.expected_seq
        after_terminal = self.terminal is not None
        gap, late = seq > expected, seq < expected
        if placed is not None:
            after_terminal, gap, late = placed.after_terminal, placed.gap is not None, placed.late
        if received.type not in KNOWN_EVENT_TYPES:
            after_terminal = False  # acknowledged and ignored (§4.4); its seq still counts
        if after_terminal and self.terminal is not None:
            anomalies.append(
                {
                    "kind": "after_terminal",
                    "terminal_type": self.terminal.type,
                    "terminal_seq": self.terminal.seq,
                    "got": seq,
                    "type": received.type,
                    "event_id": received.event_id,
                }
            )
        if gap:
            anomalies.append(
                {
                    "kind": "gap",
                    "expected": expected,
                    "got": seq,
                    "missing": list(range(expected, seq)),
                    "event_id": received.event_id,
                }
            )
            self.expected_seq = max(expected, seq + 1)
        elif late:
            anomalies.append(
                {
                    "kind": "reorder",
                    "expected": expected,
                    "got": seq,
                    "seq_seen_before": seq in self.seqs,
                    "event_id": received.event_id,
                }
            )
        else:
            self.expected_seq = max(expected, seq + 1)
        return anomalies


@dataclass(frozen=True)
class TaskState:
    """A task's state as its server answered ``list_tasks`` (reconciliation, repair mode).

    ``state`` is the TaskInfo's ``state`` (``running``, ``succeeded``, ``failed``,
    ``cancelled``); ``polled_wall`` the app clock (unix seconds) when the answer arrived.
    """

    task_id: str
    server: str
    tool: str | None
    state: str
    polled_wall: float

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready view of the record."""
        return {
            "task_id": self.task_id,
            "server": self.server,
            "tool": self.tool,
            "state": self.state,
            "polled_wall": self.polled_wall,
        }


def duplicate_anomaly(
    event: TaskEvent, server: str, original: ReceivedEvent, n: int
) -> dict[str, Any]:
    """The anomaly of an ``event_id`` seen before: ``duplicate``, or ``event_id_reused``.

    A re-send (at least once) repeats the event exactly; the same id on a different event
    is a server bug that dedupe would otherwise hide, so the fields that differ are named.
    """
    differs = [
        name
        for name in type(event).model_fields
        if getattr(event, name) != getattr(original.event, name)
    ]
    if server != original.server:
        differs.append("X-RVC-Server")
    anomaly: dict[str, Any] = {
        "kind": "event_id_reused" if differs else "duplicate",
        "event_id": event.event_id,
        "seq": original.seq,
        "attempt": n,
        "first_attempt": original.attempt,
    }
    if differs:
        anomaly["differs"] = differs
        anomaly["got"] = {"task_id": event.task_id, "seq": event.seq, "type": event.type}
    return anomaly
