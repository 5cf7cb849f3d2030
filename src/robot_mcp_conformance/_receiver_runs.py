"""The posts the receiver suite sends, grouped into the scenarios its tests judge.

Each scenario runs once per session (a fixture in ``receiver/conftest.py``) and many tests
read it, as the server suite's task runs are shared:

* :func:`time_answers` — first, a few events of one task whose answer times judge the time
  budget; it stops as soon as their median is over the budget, and then the suite posts
  nothing more (:attr:`AnswerTimes.stop_reason`: a receiver that slow would keep the
  rest of the run waiting on every post);
* :func:`accept` — events the receiver must acknowledge: a valid one, one sent twice,
  timestamps near the window's edges, both secrets of a rotation, a gap, an out-of-order
  seq, a large legal payload, one of a type no receiver knows (between two known ones of
  its task), and the timed events of :func:`time_answers`;
* :func:`refuse` — one post per way a post can be bad (:data:`REFUSAL_CASES`), each
  properly signed except for its one defect, each for a task of its own;
* :func:`time_compares` — pairs of signatures wrong in their first or their last digit.
"""

from __future__ import annotations

import json
import random
import secrets
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from robot_mcp_conformance._probe import (
    HEADER_SERVER,
    HEADER_SIGNATURE,
    HEADER_TIMESTAMP,
    Exchange,
    Probe,
    compact,
    signature,
)
from robot_mcp_conformance._timing import WARMUP_POSTS, TimingVerdict, judge

__all__ = [
    "BUDGET_POSTS",
    "DEEPEST_PAYLOAD",
    "DEEP_NESTING",
    "INSIDE_WINDOW_S",
    "LARGEST_PAYLOAD_BYTES",
    "OUTSIDE_WINDOW_S",
    "REFUSAL_CASES",
    "UNKNOWN_EVENT_TYPE",
    "VALID_CASES",
    "Acceptance",
    "AnswerTimes",
    "Refusals",
    "TimingRun",
    "accept",
    "refuse",
    "time_answers",
    "time_compares",
]

INSIDE_WINDOW_S = 240
"""How far from now the in-window timestamps are (the window is ±300 s): 60 s of room for
clocks that disagree."""
OUTSIDE_WINDOW_S = 360
"""How far from now the out-of-window timestamps are, with the same room the other way."""
BUDGET_POSTS = 5
"""Posts whose answer times are judged against the budget (their median); fewer when more
than half of them are already over it."""
LARGEST_PAYLOAD_BYTES = 256 * 1024
"""§3.2's default payload bound: a payload this large (as compact JSON) must be taken."""
DEEPEST_PAYLOAD = 32
"""§3.2's nesting bound: a payload this many levels deep must be taken."""
VALID_CASES = ("progress", "task-done", "deepest-payload", "largest-payload")
"""The valid events the suite posts, each for a task of its own."""
UNKNOWN_EVENT_TYPE = "conformance_unknown_event_v1"
"""An event type no kit sends (as the server suite's unknown trigger type): a receiver must
acknowledge an event of it (§4.4), the way it will one of a type a later kit adds."""
DEEP_NESTING = 10_000
"""Levels of nested arrays in the deeply nested body (a parser that recurses overflows)."""
_OVERSIZE_EXTRA_BYTES = 65_536

REFUSAL_CASES: dict[str, tuple[str, ...]] = {
    # "unknown-type": an unknown type is acknowledged only once the post verifies.
    "bad-signature": ("first-digit-flipped", "last-digit-flipped", "unknown-type"),
    "wrong-secret": ("another-secret", "empty-secret"),
    "unknown-server": ("not-configured",),
    "missing-header": (HEADER_SERVER, HEADER_TIMESTAMP, HEADER_SIGNATURE),
    "stale-timestamp": (f"{OUTSIDE_WINDOW_S}-s-old",),
    "future-timestamp": (f"{OUTSIDE_WINDOW_S}-s-ahead",),
    "malformed-timestamp": (
        "plus-sign",
        "underscores",
        "thirteen-digits",
        "decimal-point",
        "non-ascii-digits",
        "empty",
    ),
    "tampered-body": ("payload-changed", "whitespace-added"),
    "non-json": ("not-json", "truncated", "not-utf8", "nan"),
    "non-task-event": (
        "json-array",
        "missing-seq",
        "type-not-a-string",
        "seq-zero",
        "unknown-type-without-seq",
    ),
    "server-mismatch": ("body-names-another-server",),
    "oversize": ("past-the-body-limit",),
    "deeply-nested": (f"{DEEP_NESTING}-levels",),
}
"""Every refusal the suite tries: group (one clause each) → its cases (one test each)."""


def _flip(hex_digit: str) -> str:
    return "0" if hex_digit != "0" else "1"


def _with_digit_flipped(signature: str, index: int) -> str:
    digits = list(signature.removeprefix("sha256="))
    digits[index] = _flip(digits[index])
    return "sha256=" + "".join(digits)


@dataclass
class Acceptance:
    """The posts a receiver must acknowledge (each a new event unless said otherwise)."""

    valid: dict[str, Exchange]
    """One post per case of :data:`VALID_CASES`."""
    first: Exchange
    """An event's first post; :attr:`again` is the same event re-signed."""
    again: Exchange
    """The same event_id and body as :attr:`first`, re-signed with a fresh timestamp."""
    past: Exchange
    future: Exchange
    rotation: tuple[Exchange, Exchange] | None
    """Signed with --secret, then with --second-secret (None without the option)."""
    gap: tuple[Exchange, Exchange]
    """seq 1, then seq 3 of one task (seq 2 never comes)."""
    reorder: tuple[Exchange, Exchange, Exchange]
    """seq 1, 3, then 2 of one task."""
    timed: list[Exchange]
    """The events of :func:`time_answers` (one task), whose answer times are judged."""
    unknown_type: tuple[Exchange, Exchange, Exchange]
    """seq 1 (progress), seq 2 of type :data:`UNKNOWN_EVENT_TYPE`, seq 3 (progress) of one
    task."""

    def new_events(self) -> list[Exchange]:
        """Every post that carried an event the receiver had not seen (not :attr:`again`),
        but the event of an unknown type, which a receiver may ignore."""
        posts = [*self.valid.values(), self.first, self.past, self.future]
        posts += [*self.gap, *self.reorder, *self.timed]
        posts += [self.unknown_type[0], self.unknown_type[2]]
        if self.rotation is not None:
            posts += list(self.rotation)
        return posts


@dataclass
class AnswerTimes:
    """The timed events of one task (:func:`time_answers`) and the budget they are held to."""

    timed: list[Exchange]
    budget_s: float

    @property
    def median_s(self) -> float:
        """The median answer time of the timed events."""
        return statistics.median(e.elapsed_s for e in self.timed)

    @property
    def over_budget(self) -> bool:
        """Whether the median answer took longer than the budget."""
        return self.median_s > self.budget_s

    @property
    def stop_reason(self) -> str | None:
        """One line saying why the suite checks nothing else (None: within budget)."""
        if not self.over_budget:
            return None
        return (
            f"not checked: the receiver answered slower than its time budget (median "
            f"{self.median_s:.2f} s over {len(self.timed)} events, budget {self.budget_s:g} s; "
            "receiver.answers-within-budget failed), so the suite stopped rather than wait "
            "that long on each of its other posts; make it answer within --time-budget and "
            "run the suite again"
        )


def time_answers(probe: Probe, budget_s: float) -> AnswerTimes:
    """Post up to :data:`BUDGET_POSTS` events of one task and time their answers.

    Stops once more than half were answered slower than ``budget_s``: their median is then
    over it whatever the others take.
    """
    task = probe.new_task()
    timed: list[Exchange] = []
    for seq in range(1, BUDGET_POSTS + 1):
        timed.append(probe.send(f"seq {seq} of a task (timed)", probe.event(task, seq)))
        if sum(e.elapsed_s > budget_s for e in timed) > BUDGET_POSTS // 2:
            break
    return AnswerTimes(timed, budget_s)


def accept(probe: Probe, timed: list[Exchange]) -> Acceptance:
    """Post the events a receiver must acknowledge (see :class:`Acceptance`); ``timed``
    are the events :func:`time_answers` posted."""
    valid = {case: _valid(probe, case) for case in VALID_CASES}
    event = probe.event(probe.new_task(), 1)
    body = compact(event)
    first = probe.post("an event, first post", body, probe.headers(body), event)
    again = probe.post(
        "the same event again (same event_id and bytes, signed 1 s later)",
        body,
        probe.headers(body, skew_s=1),
        event,
    )
    past = probe.send(
        f"an event stamped {INSIDE_WINDOW_S} s ago",
        probe.event(probe.new_task(), 1),
        skew_s=-INSIDE_WINDOW_S,
    )
    future = probe.send(
        f"an event stamped {INSIDE_WINDOW_S} s ahead",
        probe.event(probe.new_task(), 1),
        skew_s=INSIDE_WINDOW_S,
    )
    rotation = None
    second = probe.config.second_secret
    if second is not None:
        rotation = (
            probe.send("an event signed with --secret", probe.event(probe.new_task(), 1)),
            probe.send(
                "an event signed with --second-secret",
                probe.event(probe.new_task(), 1),
                secret=second,
            ),
        )
    task = probe.new_task()
    gap = (
        probe.send("seq 1 of a task", probe.event(task, 1)),
        probe.send("seq 3 of the same task (seq 2 is missing)", probe.event(task, 3)),
    )
    task = probe.new_task()
    reorder = (
        probe.send("seq 1 of a task", probe.event(task, 1)),
        probe.send("seq 3 of the same task (seq 2 not yet sent)", probe.event(task, 3)),
        probe.send("seq 2 of the same task, after seq 3", probe.event(task, 2)),
    )
    task = probe.new_task()
    unknown_type = (
        probe.send("seq 1 of a task", probe.event(task, 1)),
        probe.send(
            f"seq 2 of the same task, of type {UNKNOWN_EVENT_TYPE!r} (a type the receiver "
            "does not know)",
            probe.event(task, 2, type=UNKNOWN_EVENT_TYPE, payload={"level": 3}),
        ),
        probe.send("seq 3 of the same task, after the unknown type", probe.event(task, 3)),
    )
    return Acceptance(
        valid, first, again, past, future, rotation, gap, reorder, timed, unknown_type
    )


def _valid(probe: Probe, case: str) -> Exchange:
    task = probe.new_task()
    if case == "task-done":
        event = probe.event(task, 1, type="task_done", payload={"result": {"arrived": True}})
        return probe.send("a valid task_done event", event)
    if case == "deepest-payload":
        deep: dict[str, Any] = {"percent": 50}
        for _ in range(DEEPEST_PAYLOAD - 1):
            deep = {"d": deep}
        label = f"a valid event whose payload nests {DEEPEST_PAYLOAD} levels deep (§3.2's bound)"
        return probe.send(label, probe.event(task, 1, payload=deep))
    if case == "largest-payload":
        filler = LARGEST_PAYLOAD_BYTES - len(compact({"note": ""}))
        label = f"a valid event with a {LARGEST_PAYLOAD_BYTES:,}-byte payload (§3.2's bound)"
        return probe.send(label, probe.event(task, 1, payload={"note": "n" * filler}))
    return probe.send("a valid progress event", probe.event(task, 1))


@dataclass
class Refusals:
    """One post per refusal case: ``(group, case)`` → the exchange."""

    exchanges: dict[tuple[str, str], Exchange] = field(default_factory=dict)

    def get(self, group: str, case: str) -> Exchange:
        return self.exchanges[(group, case)]


def refuse(probe: Probe) -> Refusals:
    """Post every case of :data:`REFUSAL_CASES` once, each for a task of its own."""
    out = Refusals()
    for group, cases in REFUSAL_CASES.items():
        for case in cases:
            out.exchanges[(group, case)] = _BUILDERS[group](probe, case)
    return out


def _bad_signature(probe: Probe, case: str) -> Exchange:
    kind = UNKNOWN_EVENT_TYPE if case == "unknown-type" else "progress"
    event = probe.event(probe.new_task(), 1, type=kind)
    body = compact(event)
    headers = probe.headers(body)
    index = -1 if case == "last-digit-flipped" else 0
    headers[HEADER_SIGNATURE] = _with_digit_flipped(str(headers[HEADER_SIGNATURE]), index)
    label = f"bad signature: {case}"
    if case == "unknown-type":
        label = f"an event of type {kind!r} whose signature's first digit is changed"
    return probe.post(label, body, headers, event)


def _wrong_secret(probe: Probe, case: str) -> Exchange:
    key = "" if case == "empty-secret" else "not-" + secrets.token_hex(8)
    event = probe.event(probe.new_task(), 1)
    body = compact(event)
    headers = probe.headers(body)
    headers[HEADER_SIGNATURE] = signature(key, str(headers[HEADER_TIMESTAMP]), body)
    label = "signed with an empty secret" if not key else "signed with another secret"
    return probe.post(label, body, headers, event)


def _unknown_server(probe: Probe, case: str) -> Exchange:
    name = f"{probe.config.server_name}-not-configured"
    return probe.send(
        f"X-RVC-Server {name!r}, which the receiver is not configured for (signed with --secret)",
        probe.event(probe.new_task(), 1, server=name),
        server=name,
    )


def _missing_header(probe: Probe, case: str) -> Exchange:
    event = probe.event(probe.new_task(), 1)
    body = compact(event)
    headers = probe.headers(body)
    del headers[case]
    return probe.post(f"no {case} header (the others valid)", body, headers, event)


def _stale(probe: Probe, case: str) -> Exchange:
    return probe.send(
        f"an event stamped {OUTSIDE_WINDOW_S} s ago",
        probe.event(probe.new_task(), 1),
        skew_s=-OUTSIDE_WINDOW_S,
    )


def _future(probe: Probe, case: str) -> Exchange:
    return probe.send(
        f"an event stamped {OUTSIDE_WINDOW_S} s ahead",
        probe.event(probe.new_task(), 1),
        skew_s=OUTSIDE_WINDOW_S,
    )


_ARABIC_INDIC = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")


def _malformed_timestamp(probe: Probe, case: str) -> Exchange:
    now = str(int(probe.clock()))
    stamps: dict[str, str | bytes] = {
        "plus-sign": "+" + now,
        "underscores": "_".join(now[i : i + 3] for i in range(0, len(now), 3)),
        "thirteen-digits": now.zfill(13),
        "decimal-point": now + ".0",
        "non-ascii-digits": now.translate(_ARABIC_INDIC).encode(),
        "empty": "",
    }
    stamp = stamps[case]
    shown = stamp.decode() if isinstance(stamp, bytes) else stamp
    return probe.send(
        f"X-RVC-Timestamp {shown!r} (the signature covers it as sent)",
        probe.event(probe.new_task(), 1),
        timestamp=stamp,
    )


def _tampered(probe: Probe, case: str) -> Exchange:
    event = probe.event(probe.new_task(), 1, payload={"percent": 10})
    body = compact(event)
    headers = probe.headers(body)
    if case == "payload-changed":
        sent = body.replace(b'"percent":10', b'"percent":90')
        label = 'a body changed after signing ("percent": 10 → 90)'
    else:
        sent = json.dumps(event, indent=1).encode()
        label = "a body re-formatted after signing (the same JSON, other bytes)"
    return probe.post(label, sent, headers, event)


def _non_json(probe: Probe, case: str) -> Exchange:
    event = probe.event(probe.new_task(), 1, payload={"note": "PLACEHOLDER"})
    body = compact(event)
    bodies: dict[str, tuple[bytes, str]] = {
        "not-json": (b"this is not JSON", "a body that is not JSON"),
        "truncated": (body[: len(body) // 2], "a TaskEvent cut in half"),
        "not-utf8": (body.replace(b"PLACEHOLDER", b"\xff\xfe"), "a body that is not UTF-8"),
        "nan": (
            body.replace(b'"PLACEHOLDER"', b"NaN"),
            "a TaskEvent with NaN in its payload (not JSON)",
        ),
    }
    sent, label = bodies[case]
    return probe.post(label, sent, probe.headers(sent), event)


def _non_task_event(probe: Probe, case: str) -> Exchange:
    event = probe.event(probe.new_task(), 1)
    value: Any
    if case == "json-array":
        value, label = [event], "a JSON array holding a TaskEvent"
    elif case == "missing-seq":
        value = {k: v for k, v in event.items() if k != "seq"}
        label = "a TaskEvent without seq"
    elif case == "type-not-a-string":
        value, label = {**event, "type": 7}, "a TaskEvent whose type is the number 7"
    elif case == "unknown-type-without-seq":
        value = {k: v for k, v in event.items() if k != "seq"} | {"type": UNKNOWN_EVENT_TYPE}
        label = f"an event of type {UNKNOWN_EVENT_TYPE!r} without seq"
    else:
        value, label = {**event, "seq": 0}, "a TaskEvent with seq 0"
    body = compact(value)
    return probe.post(label, body, probe.headers(body), value if isinstance(value, dict) else event)


def _server_mismatch(probe: Probe, case: str) -> Exchange:
    other = f"{probe.config.server_name}-other"
    return probe.send(
        f'a TaskEvent with "server": {other!r}, posted as X-RVC-Server '
        f"{probe.config.server_name!r}",
        probe.event(probe.new_task(), 1, server=other),
    )


def _oversize(probe: Probe, case: str) -> Exchange:
    size = probe.config.max_body_bytes + _OVERSIZE_EXTRA_BYTES
    event = probe.event(probe.new_task(), 1, payload={"blob": "x" * size})
    return probe.send(
        f"a signed TaskEvent of {size + 200:,}+ bytes (the limit is "
        f"{probe.config.max_body_bytes:,})",
        event,
    )


def _deeply_nested(probe: Probe, case: str) -> Exchange:
    event = probe.event(probe.new_task(), 1, payload={"deep": "PLACEHOLDER"})
    body = compact(event).replace(b'"PLACEHOLDER"', b"[" * DEEP_NESTING + b"]" * DEEP_NESTING)
    return probe.post(
        f"a signed TaskEvent whose payload nests {DEEP_NESTING} arrays deep",
        body,
        probe.headers(body),
        event,
    )


_BUILDERS: dict[str, Callable[[Probe, str], Exchange]] = {
    "bad-signature": _bad_signature,
    "wrong-secret": _wrong_secret,
    "unknown-server": _unknown_server,
    "missing-header": _missing_header,
    "stale-timestamp": _stale,
    "future-timestamp": _future,
    "malformed-timestamp": _malformed_timestamp,
    "tampered-body": _tampered,
    "non-json": _non_json,
    "non-task-event": _non_task_event,
    "server-mismatch": _server_mismatch,
    "oversize": _oversize,
    "deeply-nested": _deeply_nested,
}


@dataclass
class TimingRun:
    """The timing pairs and their verdict (None when the check was switched off)."""

    verdict: TimingVerdict | None
    statuses: dict[int | None, int]
    """How the receiver answered the timing posts: status → count (None: no answer)."""

    @property
    def all_refused(self) -> bool:
        """Whether every timing post got a 4xx (only then do the times compare compares)."""
        return all(s is not None and 400 <= s < 500 for s in self.statuses)


def time_compares(probe: Probe, pairs: int, rng: random.Random | None = None) -> TimingRun:
    """Time ``pairs`` pairs of posts whose signature is wrong in its first or last digit.

    Within a pair the order is random, so neither kind is always the second request.
    """
    if pairs <= 0:
        return TimingRun(None, {})
    rng = rng or random.Random()  # an order within each pair, not a secret
    event = probe.event(probe.new_task(), 1)
    body = compact(event)
    headers = probe.headers(body)
    kinds = {
        "first": _with_digit_flipped(str(headers[HEADER_SIGNATURE]), 0),
        "last": _with_digit_flipped(str(headers[HEADER_SIGNATURE]), -1),
    }
    statuses: dict[int | None, int] = {}

    def timed(kind: str) -> float:
        sent = {**headers, HEADER_SIGNATURE: kinds[kind]}
        exchange = probe.post(f"timing: signature wrong in its {kind} digit", body, sent, event)
        statuses[exchange.status] = statuses.get(exchange.status, 0) + 1
        return exchange.elapsed_s

    for index in range(WARMUP_POSTS):
        timed("first" if index % 2 else "last")
    first: list[float] = []
    last: list[float] = []
    for _ in range(pairs):
        order = ["first", "last"]
        rng.shuffle(order)
        times = {kind: timed(kind) for kind in order}
        first.append(times["first"])
        last.append(times["last"])
    return TimingRun(judge(first, last), statuses)
