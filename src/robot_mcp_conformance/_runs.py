"""The task runs the conformance tests inspect: what the suite observed, as plain records.

A :class:`TaskRun` is one task started through the server's start tool and watched to
its end: the start call, every event fake_rvc verified for it, every POST attempt it
saw (including rejected and faulted ones), and ``get_task`` afterwards. :class:`Runs`,
:class:`CancelRun` and :class:`DeliveryRun` group the runs of one scenario. Runs are
shared by many tests (one run, many clauses); :class:`~robot_mcp_conformance._harness.Harness`
produces each once per session, through a fixture in ``_fixtures.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from robot_mcp_conformance._checks import Clause, violation
from robot_mcp_conformance._client import ToolReply
from robot_mcp_kit import TASK_TOOL_NAMES
from robot_mcp_kit.models import TERMINAL_EVENT_TYPES

if TYPE_CHECKING:
    from fake_rvc import Attempt, ReceivedEvent

__all__ = [
    "CANCEL_STOP_S",
    "CANCEL_TASK",
    "GET_TASK",
    "LIST_TASKS",
    "PROGRESS_TRIGGER",
    "UNKNOWN_TRIGGER",
    "CancelRun",
    "DeliveryRun",
    "InputRun",
    "OwnershipRun",
    "RefusalRun",
    "Runs",
    "TaskRun",
]

GET_TASK, CANCEL_TASK, LIST_TASKS = TASK_TOOL_NAMES
"""The contract's reconciliation tools (kit spec §6), by name."""

CANCEL_STOP_S = 1.0
"""After the cancel reply, the cancelled task's events may be stamped this much later at
most (its work must have stopped: cancel awaits the body's teardown)."""

UNKNOWN_TRIGGER: dict[str, Any] = {"type": "conformance_unknown_trigger_v1", "level": 3}
PROGRESS_TRIGGER: dict[str, Any] = {"type": "progress_above", "percent": 50}


@dataclass
class InputRun:
    """A task that asks for input, answered once through ``answer_task_input`` (§11).

    ``announced`` is its first ``input_required`` event (None: none came), ``waiting`` the
    state ``get_task`` reported meanwhile, ``answer`` the answer call's reply and
    ``again`` the reply to answering the same request a second time, after the task ended.
    """

    run: TaskRun
    announced: ReceivedEvent | None = None
    waiting: str | None = None
    answer: ToolReply | None = None
    again: ToolReply | None = None
    answered_with: dict[str, Any] = field(default_factory=dict)


@dataclass
class OwnershipRun:
    """The suite's tasks as another principal saw them (§13), and their owner afterwards.

    ``tasks`` are the owner's task ids (a long task, and one waiting for input when the
    input clause is judged); ``request_id`` is the question the waiting one asked.
    ``calls`` holds each call the other principal made, as ``(tool, the owner's task id,
    its reply, the reply to the same call for an id that never existed)``; ``listed`` its
    ``list_tasks`` replies.
    ``after`` is the owner's ``get_task`` of each task after those calls, ``answered``
    whether an ``input_answered`` event followed the other principal's answer.
    """

    tasks: list[str] = field(default_factory=list)
    request_id: str | None = None
    listed: list[ToolReply] = field(default_factory=list)
    calls: list[tuple[str, str, ToolReply, ToolReply]] = field(default_factory=list)
    after: dict[str, ToolReply] = field(default_factory=dict)
    answered: bool = False
    note: str | None = None
    """Why the scenario could not be played (no task started), else None."""


@dataclass
class TaskRun:
    """One task, from its start call to its end, as the suite observed it."""

    label: str
    start: ToolReply
    started_wall: float
    task_id: str | None
    events: list[ReceivedEvent] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    final: ToolReply | None = None
    note: str | None = None
    rejections: dict[str, int] = field(default_factory=dict)
    """fake_rvc's rejections of this server's POSTs so far (any task), by reason."""

    @property
    def info(self) -> dict[str, Any] | None:
        """The start call's TaskInfo (a dict), or None when it did not return one."""
        data = self.start.data
        return data if isinstance(data, dict) and "task_id" in data else None

    @property
    def final_info(self) -> dict[str, Any] | None:
        """``get_task``'s TaskInfo after the run, or None."""
        data = None if self.final is None else self.final.data
        return data if isinstance(data, dict) and "task_id" in data else None

    def attempt_dicts(self) -> list[dict[str, Any]]:
        """The POST attempts, without the bulky fields, in arrival order."""
        keep = ("n", "server", "status", "outcome", "reason", "detail", "seq", "type")
        return [{k: a.to_dict()[k] for k in keep} for a in self.attempts]

    def require_task(self, clause: Clause) -> str:
        """Return the task id, or fail: the start call did not start a task."""
        if self.task_id is None:
            violation(
                clause,
                f"the {self.label} task could not be started, so this clause cannot be "
                "checked; the start tool must return a TaskInfo JSON with a task_id",
                self.start.evidence(),
            )
        return self.task_id

    def require_events(self, clause: Clause) -> list[ReceivedEvent]:
        """Return the verified events, or fail saying what fake_rvc got instead."""
        task_id = self.require_task(clause)
        if self.events:
            return self.events
        rejected = [a for a in self.attempts if a.outcome == "rejected"]
        if rejected:
            reasons = sorted({a.reason or "?" for a in rejected})
            summary = (
                f"no event of task {task_id} ({self.label}) passed fake_rvc's checks: "
                f"{len(rejected)} POST(s) rejected ({', '.join(reasons)})"
            )
        elif self.rejections:
            counts = ", ".join(f"{k} x{v}" for k, v in sorted(self.rejections.items()))
            summary = (
                f"no event of task {task_id} ({self.label}) reached fake_rvc, which has "
                f"rejected this server's POSTs ({counts}); the server's poster is still "
                "retrying those"
            )
        else:
            summary = (
                f"no event of task {task_id} ({self.label}) reached fake_rvc; is the server "
                "posting to RVC_CALLBACK_URL?"
            )
        if self.note:
            summary += f" ({self.note})"
        violation(
            clause, summary, {"attempts": self.attempt_dicts(), "get_task": self.final_evidence()}
        )

    def final_evidence(self) -> Any:
        return None if self.final is None else self.final.evidence()

    def terminal_events(self) -> list[ReceivedEvent]:
        return [e for e in self.events if e.type in TERMINAL_EVENT_TYPES]


@dataclass
class Runs:
    """The shared task runs, started together and observed to their end.

    ``failed`` is None without ``--fail-args``; the trigger runs are None when the start
    tool has no ``triggers`` argument.
    """

    completed: TaskRun
    failed: TaskRun | None
    unknown_trigger: TaskRun | None
    progress_above: TaskRun | None
    triggers_supported: bool

    def all(self) -> list[TaskRun]:
        runs = [self.completed, self.failed, self.unknown_trigger, self.progress_above]
        return [run for run in runs if run is not None]


@dataclass
class CancelRun:
    """A long task cancelled twice while running, then left alone for a moment."""

    run: TaskRun
    before: ToolReply | None
    first: ToolReply | None
    second: ToolReply | None
    after: ToolReply | None
    cancelled_wall: float | None = None
    """Wall time (unix s) when the first cancel_task reply reached the suite."""

    def late_events(self) -> list[ReceivedEvent]:
        """The task's events stamped more than CANCEL_STOP_S after the cancel reply."""
        if self.cancelled_wall is None:
            return []
        limit = self.cancelled_wall + CANCEL_STOP_S
        return [e for e in self.run.events if e.event.ts.timestamp() > limit]


@dataclass
class DeliveryRun:
    """A task whose first POSTs were answered 500 and then dropped by fake_rvc."""

    run: TaskRun
    attempts: list[Attempt]
    """The delivery task's own POST attempts from the first fault on, in arrival order."""
    others: list[Attempt]
    """Attempts of other tasks (or unreadable ones) fake_rvc saw meanwhile."""
    faults: tuple[str, ...]
    faults_left: int

    def rejected(self) -> dict[str, int]:
        """fake_rvc's rejections that make delivery impossible to judge, by reason.

        The delivery task's own rejected POSTs; or, when none of its events got through
        at all, every rejection of this server's POSTs in the run (a poster stuck
        retrying an earlier, rejected event never sends this task's events).
        """
        own: dict[str, int] = {}
        for attempt in self.attempts:
            if attempt.outcome == "rejected":
                reason = attempt.reason or "?"
                own[reason] = own.get(reason, 0) + 1
        if own:
            return own
        if self.run.events:
            return {}
        return dict(self.run.rejections)


@dataclass
class RefusalRun:
    """Two tasks: fake_rvc refused every post of the first while the second ran."""

    refused: TaskRun
    """The task whose posts fake_rvc answered 413 (a fault naming it) until ``other`` ended."""
    other: TaskRun
    """The task started after the first refusal, observed while the refusals went on."""
    refusals: list[Attempt]
    """fake_rvc's 413 answers to the refused task's posts."""
    refused_before_its_end: bool
    """Whether a post of the refused task was refused before all its events got through
    (False: the task was too quick for the clause to be judged)."""
