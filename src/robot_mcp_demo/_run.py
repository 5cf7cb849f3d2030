"""The demo: start the three services, run the acceptance scenarios, print a report.

Scenarios (DESIGN §2):

1. a sleeper task with an ``eta_below`` trigger: every event signed and verified by the
   fake brain, ``seq`` 1..n with no gap or duplicate, the trigger exactly once, then
   ``task_done``, and ``get_task`` agreeing;
2. a cancel: ``cancel_task`` answers ``cancelled`` (twice: idempotent) and no
   ``task_failed`` follows;
3. a failure: ``task_failed`` carrying the structured ``FAKE_FAILURE``;
4. memory: ``save_process`` of the mailroom document, then
   ``find_processes("bring me the parcel from the mail room")`` ranks it first with the
   full markdown (over the admin token, ``MEMORY_TOKEN``);
5. fleet (memory spec §6, §6a): the admin creates groups ``line-a`` and ``line-b``,
   registers ``rap-1``, ``rap-2`` (line-a) and ``rap-3`` (line-b), each with its own robot
   token (``MEMORY_ROBOT_TOKENS``), and switches self-improvement on (a lesson recorded
   before that is refused with ``self_improve_off``);
6. fleet: ``rap-3`` saves its own document; ``rap-1`` reads it as ``not_found`` (exactly
   as a missing id), does not find it, and is ``forbidden`` fleet administration;
7. fleet: a lesson ``rap-1`` records (``record_params``) is recalled by its group-mate
   ``rap-2`` and not by ``rap-3`` of the other group;
8. the brain's receiver (``examples/brain.py``, the README's, on ``robot_mcp_kit.receiver``)
   with a sleeper of its own: the brain is killed with -9 while a task runs and the task
   finishes while it is down; restarted on the same state file, it reconciles at once
   (``list_tasks``, ``get_task_events``) and its handler gets every event of the task once,
   in order, exactly the server's sequence, before the poster's next retry.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import re
import secrets
import signal
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from robot_mcp_kit import __version__

__all__ = ["DemoError", "Scenario", "main", "run_demo"]

_PACKAGE_DIR = Path(__file__).resolve().parent
_BUNDLED = _PACKAGE_DIR / "_examples"
"""The wheel's copies of ``examples/sleeper.py`` and ``examples/mailroom.md`` (decision 0017)."""
_CHECKOUT = _PACKAGE_DIR.parents[1] / "examples"


def _examples_dir() -> Path:
    """Where the sleeper and the mailroom document are: the wheel's copies, else a checkout's.

    An installed wheel carries both files in the package (``pyproject.toml``'s
    ``force-include``); a checkout, editable install included, reads ``examples/``.
    """
    return _BUNDLED if (_BUNDLED / "sleeper.py").is_file() else _CHECKOUT


_DEFAULT_SLEEPER = _examples_dir() / "sleeper.py"
_BRAIN = _examples_dir() / "brain.py"
_BRAIN_LINE = re.compile(r"^sleeper (\S+) #(\d+) (\w+) \((\w+)\)( redelivered)?$")
_ALL_EXTRA_MODULES = ("fastapi", "uvicorn", "mcp", "structlog", "yaml", "pydantic_settings")
"""What the three services import (fake_rvc, the sleeper, the memory server)."""
MAILROOM_QUERY = "bring me the parcel from the mail room"
MAILROOM_ID = "fetch-package-mailroom"
FLEET_GROUPS = {"line-a": ("rap-1", "rap-2"), "line-b": ("rap-3",)}
FLEET_ROBOTS = tuple(robot for robots in FLEET_GROUPS.values() for robot in robots)
LINE_B_DOC_ID = "inspect-press-line-b"
LESSON_SKILL = "grasp.mug"
LESSON_PLACE = "kitchen"
LESSON_PARAMS = {"approach_offset_m": 0.04, "grip_force_n": 12}


class DemoError(Exception):
    """A scenario's expectation did not hold; the message says what was seen."""


@dataclass(frozen=True)
class Scenario:
    """One scenario's outcome."""

    name: str
    passed: bool
    detail: str
    duration_s: float


def mailroom_markdown() -> str:
    """Return the memory spec's §3 mailroom process document (``examples/mailroom.md``)."""
    return (_examples_dir() / "mailroom.md").read_text(encoding="utf-8")


class _Services:
    """MCP sessions to the sleeper and the memory server, and HTTP to the fake brain."""

    def __init__(self, stack: AsyncExitStack, fake_url: str, workdir: Path, sleeper: Path) -> None:
        self._stack = stack
        self.fake_url = fake_url
        self.workdir = workdir
        self.sleeper = sleeper
        self.sessions: dict[str, Any] = {}

    async def connect(self, name: str, sse_url: str, token: str | None = None) -> None:
        from mcp import ClientSession
        from mcp.client.sse import sse_client

        headers = {"Authorization": f"Bearer {token}"} if token is not None else None
        read, write = await self._stack.enter_async_context(sse_client(sse_url, headers))
        session = await self._stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        self.sessions[name] = session

    async def call(self, server: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        result = await self.sessions[server].call_tool(tool, args)
        return self._json(server, tool, result)

    async def call_unlisted(self, server: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        """Call ``tool``, which the server must not list to this caller (a robot naming an
        admin tool it was never shown): checks its ``tools/list`` first, then sends the
        ``tools/call`` request itself. ``call_tool`` would check the answer against the
        tool's output schema, which a tool left out of the list does not have (the client
        then logs "Tool … not listed by server")."""
        from mcp import types

        session = self.sessions[server]
        listed = {shown.name for shown in (await session.list_tools()).tools}
        if tool in listed:
            raise DemoError(f"{server} is shown {tool} in its tools/list; it must not be")
        request = types.CallToolRequest(
            params=types.CallToolRequestParams(name=tool, arguments=args)
        )
        result = await session.send_request(types.ClientRequest(request), types.CallToolResult)
        return self._json(server, tool, result)

    @staticmethod
    def _json(server: str, tool: str, result: Any) -> dict[str, Any]:
        """The JSON object a tool's text content holds."""
        text = "".join(getattr(part, "text", "") for part in result.content)
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DemoError(f"{server}.{tool} answered non-JSON: {text[:200]!r}") from exc
        if not isinstance(value, dict):
            raise DemoError(f"{server}.{tool} answered {value!r}, not a JSON object")
        return value

    async def fake(self, path: str, **params: Any) -> tuple[int, Any]:
        import httpx

        async with httpx.AsyncClient(base_url=self.fake_url, timeout=60) as client:
            response = await client.get(path, params=params)
        return response.status_code, response.json()

    async def wait_finished(self, server: str, task_id: str, timeout_s: float) -> dict[str, Any]:
        """Poll ``get_task`` until the task is no longer running; its last ``TaskInfo``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            info = await self.call(server, "get_task", {"task_id": task_id})
            if info.get("state") != "running":
                return info
            if loop.time() > deadline:
                raise DemoError(f"{task_id} is still running after {timeout_s:.0f} s")
            await asyncio.sleep(0.2)

    async def wait_event(self, task_id: str, type_: str, timeout_s: float) -> dict[str, Any]:
        status, body = await self.fake(
            "/api/fake/wait", task_id=task_id, type=type_, timeout_s=timeout_s
        )
        if status != 200:
            raise DemoError(f"no {type_} event for {task_id} within {timeout_s:.0f} s: {body}")
        return dict(body)

    async def timeline(self, task_id: str) -> dict[str, Any]:
        status, body = await self.fake(f"/api/fake/tasks/{task_id}")
        if status != 200:
            raise DemoError(f"the fake brain has no timeline for {task_id}: {body}")
        return dict(body)


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise DemoError(message)


async def _scenario_trigger(s: _Services) -> str:
    trigger = {"type": "eta_below", "seconds": 1}
    started = await s.call(
        "sleeper", "sleep_task", {"duration_s": 2, "tick_s": 0.25, "triggers": [trigger]}
    )
    task_id = started.get("task_id")
    _expect(started.get("state") == "running", f"sleep_task answered {started}")
    # Poll first: a task that failed is reported at once, not after a 20 s wait.
    finished = await s.wait_finished("sleeper", str(task_id), 20)
    _expect(
        finished.get("state") == "succeeded",
        f"{task_id} ended {finished.get('state')}: {finished.get('failure')}",
    )
    await s.wait_event(str(task_id), "task_done", 10)
    timeline = await s.timeline(str(task_id))
    types = [e["event"]["type"] for e in timeline["events"]]
    seqs = timeline["seqs"]
    _expect(seqs == list(range(1, len(seqs) + 1)), f"seq is not 1..n: {seqs}")
    # A duplicate is legal (delivery is at least once); gaps, reorders and late events are not.
    anomalies = [a for a in timeline["anomalies"] if a.get("kind") != "duplicate"]
    _expect(not anomalies, f"anomalies: {anomalies}")
    _expect(types.count("trigger_fired") == 1, f"trigger fired {types.count('trigger_fired')}x")
    _expect(types[-1] == "task_done", f"last event is {types[-1]}, not task_done")
    info = await s.call("sleeper", "get_task", {"task_id": task_id})
    _expect(info.get("state") == "succeeded", f"get_task says {info.get('state')}")
    return f"{task_id}: {len(seqs)} signed events, seq 1..{len(seqs)}, trigger once, task_done"


async def _scenario_cancel(s: _Services) -> str:
    started = await s.call("sleeper", "sleep_task", {"duration_s": 30, "tick_s": 0.2})
    task_id = str(started.get("task_id"))
    await s.wait_event(task_id, "progress", 10)
    first = await s.call("sleeper", "cancel_task", {"task_id": task_id})
    second = await s.call("sleeper", "cancel_task", {"task_id": task_id})
    _expect(first.get("state") == "cancelled", f"cancel_task answered {first}")
    _expect(second.get("state") == "cancelled", f"second cancel_task answered {second}")
    status, body = await s.fake("/api/fake/wait", task_id=task_id, type="task_failed", timeout_s=1)
    _expect(status == 408, f"expected no task_failed (a 408 timeout), got {status}: {body}")
    info = await s.call("sleeper", "get_task", {"task_id": task_id})
    _expect(info.get("state") == "cancelled", f"get_task says {info.get('state')}")
    return f"{task_id}: cancelled (idempotent), no task_failed within 1 s"


async def _scenario_failure(s: _Services) -> str:
    started = await s.call(
        "sleeper", "sleep_task", {"duration_s": 0.5, "tick_s": 0.25, "fail": True}
    )
    task_id = str(started.get("task_id"))
    event = await s.wait_event(task_id, "task_failed", 15)
    payload = event["event"]["payload"]
    _expect(payload.get("error_code") == "FAKE_FAILURE", f"task_failed payload {payload}")
    info = await s.call("sleeper", "get_task", {"task_id": task_id})
    _expect(info.get("state") == "failed", f"get_task says {info.get('state')}")
    return f"{task_id}: task_failed FAKE_FAILURE ({payload.get('message', '')!r})"


async def _scenario_memory(s: _Services) -> str:
    markdown = mailroom_markdown()
    saved = await s.call("memory", "save_process", {"markdown": markdown})
    _expect("error" not in saved, f"save_process answered {saved}")
    found = await s.call("memory", "find_processes", {"query": MAILROOM_QUERY, "k": 3})
    processes = found.get("processes") or []
    _expect(bool(processes), f"find_processes({MAILROOM_QUERY!r}) found nothing: {found}")
    top = processes[0]
    _expect(top.get("id") == MAILROOM_ID, f"ranked first: {top.get('id')}")
    _expect("## Steps" in str(top.get("markdown")), "the result lacks the full markdown")
    return (
        f"{MAILROOM_ID} ranked first for {MAILROOM_QUERY!r} "
        f"(score {top.get('score', 0):.3g}, reliability {top.get('reliability', 0):.2f})"
    )


def _line_b_markdown() -> str:
    """A process document of rap-3 (line-b); ``robot`` is omitted, the server pins it."""
    return (
        "---\n"
        f"id: {LINE_B_DOC_ID}\n"
        "title: Inspect the stamping press on line B\n"
        'task_pattern: "inspect|check ... press ... line b"\n'
        "tags: [inspection, line-b]\n"
        "source_mission_id: m-line-b-01\n"
        "---\n\n"
        "## Steps\n"
        "1. navigation.navigate_to(press-3) with trigger eta_below:5\n"
        '2. perception.find_object("stamping press guard")\n'
        '3. speech.say("press guard inspected")\n'
    )


async def _scenario_fleet_setup(s: _Services) -> str:
    refused = await s.call(
        "rap-1",
        "record_params",
        {"robot": "rap-1", "skill": LESSON_SKILL, "params": LESSON_PARAMS},
    )
    _expect(
        refused.get("recorded") is False and refused.get("reason") == "self_improve_off",
        f"record_params before self-improve was switched on answered {refused}",
    )
    for group_id, robots in FLEET_GROUPS.items():
        group = await s.call(
            "memory",
            "upsert_group",
            {"group_id": group_id, "name": f"Line {group_id[-1].upper()}", "factory": "demo"},
        )
        _expect(group.get("group_id") == group_id, f"upsert_group({group_id!r}) answered {group}")
        for robot in robots:
            entry = await s.call(
                "memory",
                "register_robot",
                {"robot_id": robot, "name": robot.upper(), "group_id": group_id},
            )
            _expect(
                entry.get("group_id") == group_id, f"register_robot({robot!r}) answered {entry}"
            )
    switched = await s.call("memory", "set_self_improve", {"enabled": True})
    _expect(switched.get("self_improve") is True, f"set_self_improve answered {switched}")
    seen = await s.call("rap-1", "list_robots", {})
    names = sorted(str(r.get("robot_id")) for r in seen.get("robots") or [])
    _expect(names == ["rap-1", "rap-2"], f"rap-1's list_robots shows {names}, not its group")
    return (
        f"groups line-a {{rap-1, rap-2}}, line-b {{rap-3}}, {len(FLEET_ROBOTS)} robot tokens; "
        "self-improve off refused a lesson, then switched on; rap-1 lists only line-a"
    )


async def _scenario_fleet_isolation(s: _Services) -> str:
    saved = await s.call("rap-3", "save_process", {"markdown": _line_b_markdown()})
    _expect(saved.get("robot") == "rap-3", f"rap-3's save_process answered {saved}")
    own = await s.call("rap-3", "get_process", {"id": LINE_B_DOC_ID})
    _expect(own.get("id") == LINE_B_DOC_ID, f"rap-3 cannot read its own document: {own}")
    foreign = await s.call("rap-1", "get_process", {"id": LINE_B_DOC_ID})
    _expect(foreign.get("error") == "not_found", f"rap-1's get_process answered {foreign}")
    missing = await s.call("rap-1", "get_process", {"id": "no-such-process"})
    _expect(
        set(foreign) == set(missing) and missing.get("error") == "not_found",
        f"out of scope {foreign} differs in shape from missing {missing}",
    )
    found = await s.call("rap-1", "find_processes", {"query": "inspect the stamping press"})
    ids = [p.get("id") for p in found.get("processes") or []]
    _expect(LINE_B_DOC_ID not in ids, f"rap-1's find_processes returned {ids}")
    moved = await s.call_unlisted("rap-1", "set_group", {"robot_id": "rap-3", "group_id": "line-a"})
    _expect(moved.get("error") == "forbidden", f"rap-1's set_group answered {moved}")
    toggled = await s.call_unlisted("rap-1", "set_self_improve", {"enabled": False})
    _expect(toggled.get("error") == "forbidden", f"rap-1's set_self_improve answered {toggled}")
    return (
        f"rap-3 saved {LINE_B_DOC_ID}; rap-1: get_process not_found (as a missing id), "
        "not in its find, set_group and set_self_improve not listed to it and forbidden"
    )


async def _scenario_fleet_lessons(s: _Services) -> str:
    recorded = await s.call(
        "rap-1",
        "record_params",
        {
            "robot": "rap-1",
            "skill": LESSON_SKILL,
            "params": LESSON_PARAMS,
            "place": LESSON_PLACE,
            "success": True,
            "note": "approach 4 cm higher; the mugs sit on a mat",
        },
    )
    _expect(recorded.get("recorded") is True, f"rap-1's record_params answered {recorded}")
    scope = recorded.get("scope")
    _expect(scope == "group:line-a", f"rap-1's lesson went to scope {scope!r}, not group:line-a")
    args = {"skill": LESSON_SKILL, "place": LESSON_PLACE}
    mate = await s.call("rap-2", "recall_params", {"robot": "rap-2", **args})
    lesson = mate.get("lesson") or {}
    _expect(lesson.get("params") == LESSON_PARAMS, f"rap-2's recall_params answered {mate}")
    other = await s.call("rap-3", "recall_params", {"robot": "rap-3", **args})
    _expect(
        "lesson" in other and other["lesson"] is None and "error" not in other,
        f"rap-3's recall_params answered {other}",
    )
    # Naming rap-1 does not help: a robot token always acts as its own robot.
    posing = await s.call("rap-3", "recall_params", {"robot": "rap-1", **args})
    _expect(posing.get("lesson") is None, f"rap-3 posing as rap-1 recalled {posing}")
    return (
        f"rap-1 recorded {LESSON_SKILL}@{LESSON_PLACE} in {scope}; rap-2 recalled it "
        f"({mate.get('match')}); rap-3 got none ({other.get('reason')}), even naming rap-1"
    )


async def _call_once(url: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """One tool call in a session of its own (the brain's sleeper restarts nothing here)."""
    from mcp import ClientSession
    from mcp.client.sse import sse_client

    async with sse_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool(tool, args)
    value = json.loads("".join(getattr(part, "text", "") for part in result.content))
    if not isinstance(value, dict):
        raise DemoError(f"{tool} answered {value!r}, not a JSON object")
    return value


def _brain_lines(text: str, task_id: str) -> tuple[list[tuple[int, str, str]], int]:
    """(seq, type, source) of each update the brain printed for ``task_id``, once each, and
    how many it printed again flagged ``redelivered`` (the handler contract allows that
    after a kill; an unflagged repeat is kept, and fails the comparison)."""
    found: list[tuple[int, str, str]] = []
    again = 0
    for line in text.splitlines():
        match = _BRAIN_LINE.match(line.strip())
        if match is None or match[1] != task_id:
            continue
        update = (int(match[2]), match[3], match[4])
        if match[5] and any(seen[:2] == update[:2] for seen in found):
            again += 1
            continue
        found.append(update)
    return found, again


async def _scenario_brain_restart(s: _Services) -> str:
    from robot_mcp_kit.testing import ServiceProcess, free_port

    secret = secrets.token_hex(16)
    brain_port, sleeper_port = free_port(), free_port()
    mcp_url = f"http://127.0.0.1:{sleeper_port}/sse"
    python = sys.executable
    state = s.workdir / "brain-receiver.db"

    def brain() -> ServiceProcess:
        return ServiceProcess(
            "brain",
            [python, str(_BRAIN)],
            brain_port,
            env={
                "RVC_SERVERS": "sleeper",
                "RVC_SLEEPER_SECRET": secret,
                "RVC_SLEEPER_MCP_URL": mcp_url,
                "BRAIN_PORT": str(brain_port),
                "BRAIN_STATE": str(state),
            },
        )

    sleeper = ServiceProcess(
        "the brain's sleeper",
        [python, str(s.sleeper)],
        sleeper_port,
        env={
            "MCP_TRANSPORT": "sse",
            "MCP_PORT": str(sleeper_port),
            "RVC_CALLBACK_URL": f"http://127.0.0.1:{brain_port}/api/agent/events",
            "RVC_EVENT_SECRET": secret,
            "RVC_OUTBOX": "",
        },
    )
    first = brain()
    second: ServiceProcess | None = None

    def printed() -> str:
        """What the brain printed: the first process's output, then the second's."""
        return first.log_text() + ("" if second is None else second.log_text())

    try:
        await asyncio.to_thread(sleeper.start, 60)
        await asyncio.to_thread(first.start, 60)
        args = {"duration_s": 2.0, "tick_s": 0.25}
        task_id = str((await _call_once(mcp_url, "sleep_task", args))["task_id"])
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while len(_brain_lines(printed(), task_id)[0]) < 2:
            _expect(loop.time() < deadline, f"the brain printed nothing for {task_id}")
            await asyncio.sleep(0.05)
        assert first.proc is not None
        first.proc.send_signal(signal.SIGKILL)
        await asyncio.to_thread(first.proc.wait, 10)
        before = len(_brain_lines(printed(), task_id)[0])
        while (await _call_once(mcp_url, "get_task", {"task_id": task_id})).get("state") == (
            "running"
        ):
            _expect(loop.time() < deadline, f"{task_id} is still running after 20 s")
            await asyncio.sleep(0.1)
        expected = await _call_once(mcp_url, "get_task_events", {"task_id": task_id})
        events = [(e["seq"], e["type"]) for e in expected["events"]]
        second = brain()
        restarted = loop.time()
        await asyncio.to_thread(second.start, 60)
        while len(_brain_lines(printed(), task_id)[0]) < len(events):
            _expect(loop.time() - restarted < 20, "the restarted brain did not catch up")
            await asyncio.sleep(0.05)
        caught_up = loop.time() - restarted
    finally:
        text = printed()  # before the services close: their output goes with them
        for service in (second, first, sleeper):
            if service is not None:
                with contextlib.suppress(Exception):
                    service.close()
    seen, again = _brain_lines(text, task_id)
    _expect(
        [(seq, type_) for seq, type_, _ in seen] == events,
        f"the brain's handler saw {seen}, the server's events are {events}",
    )
    repaired = [seq for seq, _, source in seen if source in ("reconcile", "repair")]
    _expect(bool(repaired), f"nothing was repaired: {seen}")
    flagged = f" ({again} handed over again, flagged redelivered)" if again else ""
    return (
        f"{task_id}: brain killed -9 after #{before}, the task finished while it was down; "
        f"restarted, it reconciled #{repaired[0]}..#{repaired[-1]} in {caught_up:.1f} s: "
        f"{len(events)} events handed over once, in order, the server's sequence{flagged}"
    )


SCENARIOS: list[tuple[str, Callable[[_Services], Awaitable[str]]]] = [
    ("sleeper: eta_below trigger, signed events in order", _scenario_trigger),
    ("sleeper: cancel is idempotent, no task_failed", _scenario_cancel),
    ("sleeper: failure carries a structured TaskFailure", _scenario_failure),
    ("memory: save the mailroom process, find it first", _scenario_memory),
    ("fleet: two groups, three robot tokens, self-improve on", _scenario_fleet_setup),
    ("fleet: another group's document and administration refused", _scenario_fleet_isolation),
    ("fleet: a lesson is recalled by a group-mate, not another group", _scenario_fleet_lessons),
    ("brain: a restart while a task runs is reconciled", _scenario_brain_restart),
]


def run_demo(sleeper: Path = _DEFAULT_SLEEPER, out: TextIO = sys.stdout) -> list[Scenario]:
    """Start the services, run every scenario, stop the services; return the outcomes.

    Raises:
        ServiceStartError: a service would not start (its output is in the message).
    """
    from robot_mcp_kit.testing import ServiceProcess, free_port

    def say(text: str) -> None:
        print(text, file=out, flush=True)

    secret = secrets.token_hex(16)
    tokens = {name: secrets.token_urlsafe(24) for name in ("memory", *FLEET_ROBOTS)}
    robot_tokens = ",".join(f"{robot}:{tokens[robot]}" for robot in FLEET_ROBOTS)
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="robot-mcp-demo-") as tmp:
        fake_port, sleeper_port, memory_port = free_port(), free_port(), free_port()
        fake_url = f"http://127.0.0.1:{fake_port}"
        services = [
            ServiceProcess(
                "fake brain",
                [
                    *(python, "-m", "fake_rvc"),
                    *("--port", str(fake_port)),
                    *("--secret", f"sleeper={secret}"),
                ],
                fake_port,
            ),
            ServiceProcess(
                "sleeper",
                [python, str(sleeper)],
                sleeper_port,
                env={
                    "MCP_TRANSPORT": "sse",
                    "MCP_HOST": "127.0.0.1",
                    "MCP_PORT": str(sleeper_port),
                    "RVC_CALLBACK_URL": f"{fake_url}/api/agent/events",
                    "RVC_EVENT_SECRET": secret,
                },
            ),
            ServiceProcess(
                "memory server",
                [python, "-m", "robot_mcp_memory"],
                memory_port,
                env={
                    "MCP_TRANSPORT": "sse",
                    "MCP_HOST": "127.0.0.1",
                    "MCP_PORT": str(memory_port),
                    "MEMORY_DATA_DIR": str(Path(tmp) / "memory"),
                    "ROBOT_ID": "demo",
                    "MEMORY_TOKEN": tokens["memory"],
                    "MEMORY_ROBOT_TOKENS": robot_tokens,
                },
            ),
        ]
        try:
            for service in services:
                say(f"… starting {service.name} on 127.0.0.1:{service.port}")
                service.start()
            say(f"  fake brain page: {fake_url}/")
            say(f"  memory server: admin token and robot tokens for {', '.join(FLEET_ROBOTS)}")
            return asyncio.run(
                _run_scenarios(fake_url, sleeper_port, memory_port, tokens, say, Path(tmp), sleeper)
            )
        finally:
            for service in reversed(services):
                service.close()


async def _run_scenarios(
    fake_url: str,
    sleeper_port: int,
    memory_port: int,
    tokens: dict[str, str],
    say: Callable[[str], None],
    workdir: Path,
    sleeper: Path,
) -> list[Scenario]:
    outcomes: list[Scenario] = []
    async with AsyncExitStack() as stack:
        services = _Services(stack, fake_url, workdir, sleeper)
        await services.connect("sleeper", f"http://127.0.0.1:{sleeper_port}/sse")
        # One SSE session per token: "memory" is the admin (MEMORY_TOKEN), the others are
        # the robots, each bound to its own robot and group by the server.
        for name, token in tokens.items():
            await services.connect(name, f"http://127.0.0.1:{memory_port}/sse", token)
        for name, scenario in SCENARIOS:
            say(f"… {name}")
            started = time.monotonic()
            try:
                detail = await scenario(services)
                passed = True
            except DemoError as exc:
                detail, passed = str(exc), False
            outcomes.append(Scenario(name, passed, detail, time.monotonic() - started))
            say(f"  {'PASS' if passed else 'FAIL'} {detail}")
    return outcomes


def _report(outcomes: list[Scenario], out: TextIO) -> None:
    width = max(len(o.name) for o in outcomes)
    print("\nrobot-mcp demo report", file=out)
    for o in outcomes:
        mark = "PASS" if o.passed else "FAIL"
        print(f"  {mark}  {o.name:<{width}}  {o.duration_s:5.1f} s", file=out)
    passed = sum(o.passed for o in outcomes)
    print(f"{passed} passed, {len(outcomes) - passed} failed", file=out)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``robot-mcp-demo``; returns the exit code (0: every scenario held)."""
    parser = argparse.ArgumentParser(
        prog="robot-mcp-demo",
        description=(
            "Start the fake brain, the sleeper and the memory server as real processes on "
            "free loopback ports, run the acceptance scenarios of the kit and memory specs "
            "over real SSE, and print a report. Exits 0 only if every scenario held. "
            "Nothing is left behind: state lives in a temporary directory."
        ),
    )
    parser.add_argument(
        "--sleeper",
        type=Path,
        default=_DEFAULT_SLEEPER,
        help="path to the sleeper example (default: the copy in the installed package, "
        "or examples/sleeper.py of a checkout)",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    args = parser.parse_args(argv)
    if not args.sleeper.is_file():
        print(
            f"robot-mcp-demo: the sleeper example {str(args.sleeper)!r} is missing; pass "
            "--sleeper PATH to an existing file.",
            file=sys.stderr,
        )
        return 2
    for module in _ALL_EXTRA_MODULES:
        try:
            importlib.import_module(module)
        except ImportError:
            print(
                f"robot-mcp-demo needs the 'all' extra ({module} is missing): "
                "uv sync, or pip install 'robot-mcp-kit[all]'",
                file=sys.stderr,
            )
            return 2
    from robot_mcp_kit.testing import ServiceStartError

    try:
        outcomes = run_demo(args.sleeper)
    except ServiceStartError as exc:
        print(f"robot-mcp-demo: {exc}", file=sys.stderr)
        return 1
    _report(outcomes, sys.stdout)
    return 0 if all(o.passed for o in outcomes) else 1
