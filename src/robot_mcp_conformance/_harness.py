"""The harness that starts tasks on the server under test and watches them through fake_rvc.

Waiting never relies on a fixed sleep to make something happen: the harness waits on
fake_rvc's recorder with deadlines. The only fixed waits are observation windows that
prove an absence (nothing arrives after a terminal event, no ``task_failed`` and no
further work after a cancel), and they are short.
"""

from __future__ import annotations

import contextlib
import functools
import time
from typing import TYPE_CHECKING, Any

from robot_mcp_conformance._client import McpClient, ToolReply
from robot_mcp_conformance._config import Config
from robot_mcp_conformance._native import NativeClient, NativeError, NativeRun
from robot_mcp_conformance._runs import (
    CANCEL_STOP_S,
    CANCEL_TASK,
    GET_TASK,
    LIST_TASKS,
    CancelRun,
    DeliveryRun,
    InputRun,
    OwnershipRun,
    RefusalRun,
    TaskRun,
)
from robot_mcp_kit import TERMINAL_STATES, TaskState
from robot_mcp_kit.models import TASK_EVENTS_TOOL_NAME, TASK_INPUT_TOOL_NAME

if TYPE_CHECKING:
    from fake_rvc import Attempt, FakeRvcServer, ReceivedEvent

__all__ = ["Harness", "answer_for"]

QUIET_S = 0.4
"""How long to keep listening after a terminal event, to catch anything sent after it."""
CANCEL_WATCH_S = 1.5
"""How long after the cancel reply the suite listens for the cancelled task's events."""
INPUT_WAIT_S = 10.0
"""The longest the input scenario waits for the question, and then for the task's end
(at most ``--task-timeout``): the task asks at once and then runs a short task."""
NEVER_STARTED = "zzzz-000000"
"""A task id no server has started (§13 compares another principal's answers with it)."""
SETTLE_S = 3.0
"""How long after get_task reports a terminal state the terminal event may still take
(covers the poster's first two retries, 0.5 s and 2 s)."""


def answer_for(schema: object) -> dict[str, Any]:
    """An accepting answer to a form request: true, "yes", 1 or its first enum value for
    each property the schema names (a flat MCP elicitation schema)."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    answer: dict[str, Any] = {}
    for name, spec in (properties or {}).items():
        kind = spec.get("type") if isinstance(spec, dict) else None
        enum = spec.get("enum") if isinstance(spec, dict) else None
        if isinstance(enum, list) and enum:
            answer[name] = enum[0]
        elif kind == "boolean":
            answer[name] = True
        elif kind in ("number", "integer"):
            answer[name] = 1
        else:
            answer[name] = "yes"
    return answer


def _reported(recorder: Any, *, task_id: str) -> bool:
    """Whether fake_rvc holds an event of ``task_id`` (the task surely runs)."""
    return bool(recorder.events(task_id=task_id))


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

    def input_scenario(self, arguments: dict[str, Any]) -> InputRun:
        """Start a task that asks for input, wait for its ``input_required`` event, answer
        it (accept, with content filled from the request's schema) and watch it end; then
        answer the same request again."""
        run = self.start(arguments, "input")
        scenario = InputRun(run)
        task_id = run.task_id
        if task_id is None:
            return scenario

        def announced(recorder: Any) -> ReceivedEvent | None:
            return next(
                (e for e in recorder.events(task_id=task_id) if e.type == "input_required"),
                None,
            )

        with contextlib.suppress(TimeoutError):
            self.rvc.state.wait_for(announced, timeout_s=self._input_wait_s())
        scenario.announced = announced(self.rvc.state)
        scenario.waiting = self.state_of(task_id)
        if scenario.announced is None:
            self.call(CANCEL_TASK, {"task_id": task_id})
            run.events = self.events(task_id)
            return scenario
        payload = scenario.announced.event.payload
        params = payload.get("params")
        schema = params.get("requestedSchema") if isinstance(params, dict) else None
        scenario.answered_with = {
            "task_id": task_id,
            "request_id": payload.get("request_id"),
            "action": "accept",
            "content": answer_for(schema),
        }
        scenario.answer = self.call(TASK_INPUT_TOOL_NAME, scenario.answered_with)
        self.observe(run, timeout_s=self._input_wait_s())
        if run.note is not None:
            self.call(CANCEL_TASK, {"task_id": task_id})
        scenario.again = self.call(TASK_INPUT_TOOL_NAME, scenario.answered_with)
        return scenario

    def native_scenario(self, native: NativeClient) -> list[NativeRun]:
        """Drive a succeeding, a failing and a cancelled task through the tasks extension
        (§12), each to its end by ``tasks/get``, and watch each one's events."""
        cfg = self.config
        plans = [("succeeding", cfg.start_args, False), ("cancelled", cfg.long_args, True)]
        if cfg.fail_args is not None:
            plans.insert(1, ("failing", cfg.fail_args, False))
        runs: list[NativeRun] = []
        for label, arguments, cancel in plans:
            run = NativeRun(label)
            runs.append(run)
            wall = time.time()
            try:
                run.created = native.request(
                    "tools/call", {"name": cfg.start_tool, "arguments": dict(arguments)}
                )
            except NativeError as exc:
                run.error = f"tools/call {cfg.start_tool} with the extension answered {exc}"
                continue
            native_id = run.created.get("taskId")
            task_id = run.kit_task_id
            if not isinstance(native_id, str) or task_id is None:
                continue
            self.started.append(task_id)
            start = ToolReply(
                tool=cfg.start_tool,
                arguments=dict(arguments),
                elapsed_s=time.time() - wall,
                data=run.created,
            )
            run.webhook = TaskRun(
                label=f"native {label}", start=start, started_wall=wall, task_id=task_id
            )
            if cancel:
                with contextlib.suppress(TimeoutError):
                    self.rvc.state.wait_for(
                        functools.partial(_reported, task_id=task_id), timeout_s=3.0
                    )
                try:
                    run.cancel_ack = native.request("tasks/cancel", {"taskId": native_id})
                except NativeError as exc:
                    run.error = f"tasks/cancel answered {exc}"
                    continue
            native.until_terminal(run, native_id, cfg.task_timeout_s)
        finished = [r.webhook for r in runs if r.webhook is not None and r.label != "cancelled"]
        self.observe_all(finished)
        for run in runs:
            if run.label == "cancelled" and run.webhook is not None:
                time.sleep(QUIET_S)
                assert run.webhook.task_id is not None
                run.webhook.events = self.events(run.webhook.task_id)
                run.webhook.final = self.call(GET_TASK, {"task_id": run.webhook.task_id})
        return runs

    def ownership_scenario(
        self, other: McpClient, tools: dict[str, dict[str, Any]]
    ) -> OwnershipRun:
        """Start a long task (and one that waits for input, when judged) as the suite's
        principal; as ``other``, list, read, answer and cancel them, and the same calls
        for an id that never existed; then read them back as their owner and cancel them.
        """
        cfg = self.config
        scenario = OwnershipRun()
        long_run = self.start(cfg.long_args, "owned")
        if long_run.task_id is None:
            scenario.note = f"{cfg.start_tool}({cfg.long_args}) started no task"
            return scenario
        scenario.tasks.append(long_run.task_id)
        asks = cfg.input_args is not None and TASK_INPUT_TOOL_NAME in tools
        if asks and cfg.input_args is not None:
            asking = self.start(cfg.input_args, "owned, asking")
            if asking.task_id is not None:
                scenario.tasks.append(asking.task_id)
                asking_id = asking.task_id

                def question(recorder: Any) -> ReceivedEvent | None:
                    return next(
                        (
                            e
                            for e in recorder.events(task_id=asking_id)
                            if e.type == "input_required"
                        ),
                        None,
                    )

                with contextlib.suppress(TimeoutError):
                    self.rvc.state.wait_for(question, timeout_s=self._input_wait_s())
                asked = question(self.rvc.state)
                if asked is not None:
                    scenario.request_id = str(asked.event.payload.get("request_id"))
        if LIST_TASKS in tools:  # a server without it fails §6 already
            scenario.listed = [
                other.call(LIST_TASKS, {}),
                other.call(LIST_TASKS, {"states": [TaskState.RUNNING.value]}),
            ]
        probes: list[tuple[str, dict[str, Any]]] = [(GET_TASK, {})]
        if TASK_EVENTS_TOOL_NAME in tools:
            probes.append((TASK_EVENTS_TOOL_NAME, {"after_seq": 0}))
        probes.append((CANCEL_TASK, {}))
        for task_id in scenario.tasks:
            for tool, extra in probes:
                theirs = other.call(tool, {"task_id": task_id, **extra})
                never = other.call(tool, {"task_id": NEVER_STARTED, **extra})
                scenario.calls.append((tool, task_id, theirs, never))
        if scenario.request_id is not None:
            asking_id = scenario.tasks[-1]
            answer = {"request_id": scenario.request_id, "action": "cancel"}
            theirs = other.call(TASK_INPUT_TOOL_NAME, {"task_id": asking_id, **answer})
            never = other.call(TASK_INPUT_TOOL_NAME, {"task_id": NEVER_STARTED, **answer})
            scenario.calls.append((TASK_INPUT_TOOL_NAME, asking_id, theirs, never))
            # A short window: an answer the server took is announced at once.
            time.sleep(QUIET_S)
            scenario.answered = any(e.type == "input_answered" for e in self.events(asking_id))
        for task_id in scenario.tasks:
            scenario.after[task_id] = self.call(GET_TASK, {"task_id": task_id})
            self.call(CANCEL_TASK, {"task_id": task_id})
        return scenario

    def _input_wait_s(self) -> float:
        return min(self.config.task_timeout_s, INPUT_WAIT_S)

    def quiesce(self) -> None:
        """Cancel every task this harness started that still runs, then flush events.

        The flush is a barrier task. It is best effort: a poster keeps one task's events
        in order, not different tasks' (§5.1), so a late event of an earlier task may
        still come after the barrier's; the checks that use faults judge only their own
        task's attempts.
        """
        for task_id in list(self.started):
            if self.state_of(task_id) == TaskState.RUNNING:
                self.call(CANCEL_TASK, {"task_id": task_id})
        self.run(self.config.start_args, "barrier")

    def refusal_scenario(self) -> RefusalRun:
        """Refuse every post of one task (413) and run a second task meanwhile.

        The first task starts with the start arguments and fake_rvc at once answers 413 to
        each of its posts (a fault naming its task id). Once one was refused, a second
        task starts; it is observed for the task timeout while the refusals go on. Then
        the fault is cleared and the first task observed to its end (a retry delivers it),
        so nothing of it is left in flight for later checks.
        """
        self.quiesce()
        recorder = self.rvc.state
        name = self.config.server_name
        refused = self.start(self.config.start_args, "refused")
        refusals: list[Attempt] = []
        reached = False
        if refused.task_id is not None:
            task_id = refused.task_id
            recorder.inject_fault(name, status=413, count=1_000_000, task_id=task_id)

            def refused_or_ended(r: Any) -> bool | None:
                if any(a.task_id == task_id and a.outcome == "fault" for a in r.attempts()):
                    return True
                return self._has_terminal(task_id) or None

            with contextlib.suppress(TimeoutError):
                recorder.wait_for(refused_or_ended, timeout_s=self.config.task_timeout_s)
            reached = any(a.outcome == "fault" for a in self.attempts(task_id))
        other = self.start(self.config.start_args, "unrefused")
        if reached:
            self.observe(other, quiet_s=0.0)
        recorder.clear_faults(name)
        if refused.task_id is not None:
            refusals = [a for a in self.attempts(refused.task_id) if a.outcome == "fault"]
        # 40 s: the refused event's next retry comes at most 30 s after the last refusal.
        self.observe(refused, timeout_s=40.0)
        if not reached:
            self.observe(other)
        return RefusalRun(refused, other, refusals, reached)

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
