"""Task runs the conformance tests inspect, and the harness that produces them.

A :class:`TaskRun` is one task started through the server's start tool and watched to
its end: the start call, every event fake_rvc verified for it, every POST attempt it
saw (including rejected and faulted ones), and ``get_task`` afterwards. Runs are shared
by many tests (one run, many clauses), so each is produced once per session by a fixture
in ``conftest.py``.

Waiting never relies on a fixed sleep to make something happen: the harness waits on
fake_rvc's recorder with deadlines. The only fixed waits are observation windows that
prove an absence (nothing arrives after a terminal event, no ``task_failed`` and no
further work after a cancel), and they are short.
"""

from __future__ import annotations

import contextlib
import functools
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from robot_mcp_conformance._checks import Clause, violation
from robot_mcp_conformance._client import McpClient, ToolReply
from robot_mcp_conformance._config import Config
from robot_mcp_kit import TASK_TOOL_NAMES, TERMINAL_STATES, TaskState
from robot_mcp_kit.models import TERMINAL_EVENT_TYPES

if TYPE_CHECKING:
    from fake_rvc import Attempt, FakeRvcServer, ReceivedEvent

__all__ = [
    "CANCEL_STOP_S",
    "CANCEL_TASK",
    "GET_TASK",
    "LIST_TASKS",
    "PROGRESS_TRIGGER",
    "TERMINAL_EVENT_TYPES",
    "TERMINAL_STATES",
    "UNKNOWN_TRIGGER",
    "CancelRun",
    "DeliveryRun",
    "Harness",
    "Runs",
    "TaskRun",
]

GET_TASK, CANCEL_TASK, LIST_TASKS = TASK_TOOL_NAMES
"""The contract's reconciliation tools (kit spec §6), by name."""

QUIET_S = 0.4
"""How long to keep listening after a terminal event, to catch anything sent after it."""
CANCEL_STOP_S = 1.0
"""After the cancel reply, the cancelled task's events may be stamped this much later at
most (its work must have stopped: cancel awaits the body's teardown)."""
CANCEL_WATCH_S = 1.5
"""How long after the cancel reply the suite listens for the cancelled task's events."""
SETTLE_S = 3.0
"""How long after get_task reports a terminal state the terminal event may still take
(covers the poster's first two retries, 0.5 s and 2 s)."""


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

    def event_dicts(self) -> list[dict[str, Any]]:
        """The verified events as sent (JSON mode), in arrival order."""
        return [e.event.model_dump(mode="json") for e in self.events]

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


UNKNOWN_TRIGGER: dict[str, Any] = {"type": "conformance_unknown_trigger_v1", "level": 3}
PROGRESS_TRIGGER: dict[str, Any] = {"type": "progress_above", "percent": 50}


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


class Harness:
    """Starts tasks on the server under test and watches them through fake_rvc.

    Keeps the ids of every task it started, so it can cancel the ones still running
    before a test that needs the server's event queue to itself.
    """

    def __init__(self, config: Config, client: McpClient, rvc: FakeRvcServer) -> None:
        self.config = config
        self.client = client
        self.rvc = rvc
        self.started: list[str] = []

    # -- calls --------------------------------------------------------------------------

    def call(self, tool: str, arguments: dict[str, Any] | None = None) -> ToolReply:
        return self.client.call(tool, arguments)

    def state_of(self, task_id: str) -> str | None:
        """The state get_task reports, or None if it does not answer with a TaskInfo."""
        reply = self.call(GET_TASK, {"task_id": task_id})
        data = reply.data
        if reply.answered and isinstance(data, dict) and isinstance(data.get("state"), str):
            return str(data["state"])
        return None

    def start(self, arguments: dict[str, Any], label: str) -> TaskRun:
        """Call the start tool with ``arguments``; return the run (not yet observed)."""
        wall = time.time()
        reply = self.call(self.config.start_tool, arguments)
        data = reply.data
        task_id = None
        if reply.answered and isinstance(data, dict) and isinstance(data.get("task_id"), str):
            task_id = data["task_id"]
            self.started.append(task_id)
        return TaskRun(label=label, start=reply, started_wall=wall, task_id=task_id)

    # -- watching -----------------------------------------------------------------------

    def events(self, task_id: str) -> list[ReceivedEvent]:
        return self.rvc.state.events(task_id=task_id)

    def attempts(self, task_id: str) -> list[Attempt]:
        return [a for a in self.rvc.state.attempts() if a.task_id == task_id]

    def _any_terminal(self, task_ids: tuple[str, ...], _recorder: object) -> bool | None:
        return any(self._has_terminal(t) for t in task_ids) or None

    def _has_terminal(self, task_id: str) -> bool:
        timeline = self.rvc.state.timeline(task_id)
        return timeline is not None and timeline.terminal is not None

    def observe(
        self,
        run: TaskRun,
        *,
        timeout_s: float | None = None,
        settle_s: float = SETTLE_S,
        quiet_s: float = QUIET_S,
    ) -> TaskRun:
        """Wait for the run's terminal event, then listen ``quiet_s`` more; fill the run."""
        self.observe_all([run], timeout_s=timeout_s, settle_s=settle_s, quiet_s=quiet_s)
        return run

    def observe_all(
        self,
        runs: list[TaskRun],
        *,
        timeout_s: float | None = None,
        settle_s: float = SETTLE_S,
        quiet_s: float = QUIET_S,
    ) -> None:
        """Wait for each run's terminal event, listen ``quiet_s`` more, fill the runs.

        Gives up on a run when ``timeout_s`` passes, or ``settle_s`` after get_task first
        reports a terminal state without the terminal event having arrived (it will not).
        Runs that run side by side share the waiting and the one observation window.
        """
        recorder = self.rvc.state
        timeout = timeout_s or self.config.task_timeout_s
        deadline = time.monotonic() + timeout
        pending = {run.task_id: run for run in runs if run.task_id is not None}
        settled_since: dict[str, float] = {}
        next_poll = 0.0
        while True:
            for task_id in [t for t in pending if self._has_terminal(t)]:
                del pending[task_id]
            if not pending:
                break
            now = time.monotonic()
            if now >= deadline:
                for run in pending.values():
                    run.note = f"no terminal event within {timeout:g} s"
                break
            if now >= next_poll:
                next_poll = now + 0.25
                # fake_rvc rejects a POST every time (a bad signature stays bad), so once
                # it has rejected one, waiting longer shows nothing new.
                patience = 0.5 if self._rejections() else settle_s
                for task_id, run in list(pending.items()):
                    if self.state_of(task_id) not in TERMINAL_STATES:
                        continue
                    since = settled_since.setdefault(task_id, now)
                    if now - since >= patience:
                        run.note = (
                            "get_task reported a terminal state but no terminal event "
                            f"arrived within {patience:g} s"
                        )
                        del pending[task_id]
                if not pending:
                    break
            with contextlib.suppress(TimeoutError):
                recorder.wait_for(
                    functools.partial(self._any_terminal, tuple(pending)),
                    timeout_s=max(0.01, min(0.25, deadline - time.monotonic())),
                )
        # An observation window: anything sent after a terminal event shows up here.
        time.sleep(quiet_s)
        rejections = self._rejections()
        for run in runs:
            if run.task_id is None:
                continue
            run.events = self.events(run.task_id)
            run.attempts = self.attempts(run.task_id)
            run.final = self.call(GET_TASK, {"task_id": run.task_id})
            run.rejections = rejections

    def _rejections(self) -> dict[str, int]:
        rejections: dict[str, int] = self.rvc.state.counters()["rejections"]
        return rejections

    def run(self, arguments: dict[str, Any], label: str, **observe: Any) -> TaskRun:
        """Start a task and observe it to its end."""
        return self.observe(self.start(arguments, label), **observe)

    # -- scenarios ----------------------------------------------------------------------

    def cancel_scenario(self) -> CancelRun:
        """Start a long task, cancel it twice once it runs, listen, and read it back."""
        run = self.start(self.config.long_args, "cancelled")
        if run.task_id is None:
            return CancelRun(run, None, None, None, None)
        task_id = run.task_id
        recorder = self.rvc.state
        # The task surely runs once it has reported something (unless fake_rvc rejects
        # the server's posts, and then no report will come).
        with contextlib.suppress(TimeoutError):
            recorder.wait_for(
                lambda r: bool(r.events(task_id=task_id)) or bool(r.counters()["rejected"]),
                timeout_s=3.0,
            )
        before = self.call(GET_TASK, {"task_id": task_id})
        called = time.time()
        first = self.call(CANCEL_TASK, {"task_id": task_id})
        cancelled_wall = called + first.elapsed_s
        second = self.call(CANCEL_TASK, {"task_id": task_id})
        limit = cancelled_wall + CANCEL_STOP_S

        def stamped_late(r: Any) -> bool:
            return any(e.event.ts.timestamp() > limit for e in r.events(task_id=task_id))

        # An observation window (CANCEL_WATCH_S after the cancel reply, bounded) for a
        # terminal event after the cancel, or for work that goes on; it ends early once
        # an event stamped after the limit has arrived.
        watch = max(0.3, cancelled_wall + CANCEL_WATCH_S - time.time())
        with contextlib.suppress(TimeoutError):
            recorder.wait_for(stamped_late, timeout_s=min(watch, CANCEL_WATCH_S))
        after = self.call(GET_TASK, {"task_id": task_id})
        run.events = self.events(task_id)
        run.attempts = self.attempts(task_id)
        run.final = after
        run.rejections = self._rejections()
        return CancelRun(run, before, first, second, after, cancelled_wall)

    def quiesce(self) -> None:
        """Cancel every task this harness started that still runs, then flush events.

        The flush is a barrier task: the contract's poster sends in FIFO order, so once
        the barrier's terminal event has arrived, everything posted before it has too.
        """
        for task_id in list(self.started):
            if self.state_of(task_id) == TaskState.RUNNING:
                self.call(CANCEL_TASK, {"task_id": task_id})
        self.run(self.config.start_args, "barrier")

    def delivery_scenario(self) -> DeliveryRun:
        """Answer the next POSTs 500, then drop the connection; run a task through it."""
        self.quiesce()
        recorder = self.rvc.state
        name = self.config.server_name
        seen = recorder.attempts()
        first_n = (seen[-1].n if seen else 0) + 1
        recorder.inject_fault(name, status=500, count=1)
        recorder.inject_fault(name, drop=True, count=1)
        run = self.start(self.config.start_args, "delivery")
        # 0.5 s + 2 s of back-off before the first event gets through, then the rest.
        self.observe(run, timeout_s=self.config.task_timeout_s + 10, settle_s=8.0)
        faults_left = sum(f.remaining for f in recorder.faults() if f.server == name)
        recorder.clear_faults(name)
        since = [a for a in recorder.attempts() if a.n >= first_n]
        # Only the delivery task's own attempts are judged: a post of another task that
        # took a fault must not be blamed on (or credited to) this one.
        own = [a for a in since if run.task_id is not None and a.task_id == run.task_id]
        return DeliveryRun(
            run=run,
            attempts=own,
            others=[a for a in since if a.n not in {o.n for o in own}],
            faults=("500", "dropped connection"),
            faults_left=faults_left,
        )
