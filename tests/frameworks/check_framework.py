"""Drive the sleeper's task tools through one framework's own in-memory client.

Run in an isolated environment holding the built wheel and one framework (``.ci/run``
does, through ``tests/frameworks/run.sh``)::

    uv run --isolated --no-project --with dist/robot_mcp_kit-*.whl --with 'mcp>=2,<3' \\
        python tests/frameworks/check_framework.py mcp2

``mcp1``: mcp 1.x ``FastMCP`` with ``create_connected_server_and_client_session``;
``mcp2``: mcp 2.x ``MCPServer`` with ``mcp.client.Client``; ``fastmcp``: standalone
``fastmcp.FastMCP`` with ``fastmcp.Client``. It checks what issue 12 asks: importing the
kit loads no framework; the task tools are listed with an object output schema; the
structured content of ``sleep_task``, ``get_task``, ``cancel_task`` and ``list_tasks`` is
the ``TaskInfo`` (``{"tasks": [TaskInfo]}``), and its text the same object as JSON;
``not_found`` is an object too; ``serverInfo.version`` is the kit's version; a plain ``def``
start tool either starts its task (mcp 1.x runs it on the loop) or gives the client the
kit's message (issue 19); the README's example answers a malformed trigger and a bad
argument with ``{"error": "invalid", "detail": ...}`` naming the field, starting nothing
(issue 32), and an argument of the wrong declared type with the framework's own error
naming it. Prints one line per check; exits 0 when all hold, 1 with the
first that did not.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SLEEPER = REPO / "examples" / "sleeper.py"
README = REPO / "README.md"
NAVIGATION = REPO / "examples" / "navigation.py"
FRAMEWORK_MODULES = ("mcp", "fastmcp")


class CheckFailed(AssertionError):
    """One check did not hold; the message says which and what was seen."""


def check(condition: bool, what: str, seen: Any = None) -> None:
    if not condition:
        raise CheckFailed(f"{what}; seen: {seen!r}"[:2000])
    print(f"  ok  {what}")


def wire(model: Any) -> dict[str, Any]:
    """An mcp type in its JSON wire form (camelCase under mcp 1.x and 2.x)."""
    dumped: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


@asynccontextmanager
async def connect(framework: str, server: Any) -> AsyncIterator[Any]:
    """The framework's own in-memory client, as an object with list_tools/call/info."""
    if framework == "mcp1":
        from mcp.shared.memory import create_connected_server_and_client_session

        async with create_connected_server_and_client_session(server._mcp_server) as session:
            init = await session.initialize()
            yield session, wire(init)["serverInfo"]
    elif framework == "mcp2":
        from mcp.client import Client

        async with Client(server) as client:
            yield client, wire(client.server_info)
    else:
        from fastmcp import Client as FastMCPClient

        async with FastMCPClient(server) as client:
            info = client.initialize_result
            yield client, wire(info.serverInfo if info is not None else client.server_info)


async def list_tools(framework: str, client: Any) -> dict[str, dict[str, Any]]:
    if framework == "fastmcp":
        tools = await client.list_tools_mcp()
    else:
        tools = await client.list_tools()
    return {tool["name"]: tool for tool in wire(tools)["tools"]}


async def call(framework: str, client: Any, tool: str, **arguments: Any) -> dict[str, Any]:
    """The structured content; checks the one text content is the same object as JSON."""
    if framework == "fastmcp":
        result = wire(await client.call_tool_mcp(tool, arguments))
    else:
        result = wire(await client.call_tool(tool, arguments))
    check(not result.get("isError"), f"{tool} answers without an MCP error", result)
    structured = result.get("structuredContent")
    check(isinstance(structured, dict), f"{tool}: structuredContent is an object", result)
    texts = [c["text"] for c in result.get("content", []) if c.get("type") == "text"]
    check(
        len(texts) == 1 and json.loads(texts[0]) == structured,
        f"{tool}: its text content is the same object as JSON",
        texts,
    )
    return dict(structured)


async def run(framework: str) -> None:
    before = set(sys.modules)
    import robot_mcp_kit
    from robot_mcp_kit import TaskManager
    from robot_mcp_kit.testing import RecordingPoster

    loaded = sorted(m for m in set(sys.modules) - before if m.split(".")[0] in FRAMEWORK_MODULES)
    check(not loaded, "import robot_mcp_kit loads no MCP framework", loaded)

    spec = importlib.util.spec_from_file_location("sleeper_example", SLEEPER)
    assert spec is not None
    assert spec.loader is not None
    sleeper = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sleeper)

    poster = RecordingPoster()
    manager = TaskManager("sleeper", poster, known_trigger_types=sleeper.KNOWN_TRIGGER_TYPES)
    server = sleeper.build_server(manager, framework=framework)
    from robot_mcp_kit.fastmcp_ext import detect_framework

    check(detect_framework(server) == framework, f"the kit detects {framework}", type(server))

    async with connect(framework, server) as (client, server_info):
        check(
            server_info.get("version") == robot_mcp_kit.__version__,
            f"serverInfo.version is the kit's {robot_mcp_kit.__version__}",
            server_info,
        )
        tools = await list_tools(framework, client)
        for name in ("sleep_task", "get_task", "cancel_task", "list_tasks"):
            schema = tools.get(name, {}).get("outputSchema") or {}
            check(schema.get("type") == "object", f"{name} has an object output schema", schema)
            check(
                "result" not in (schema.get("properties") or {}),
                f"{name}'s output is not wrapped in {{'result': ...}}",
                schema,
            )

        def info_of(task_id: str) -> dict[str, Any]:
            info = manager.get(task_id)
            assert info is not None
            dumped: dict[str, Any] = info.model_dump(mode="json")
            return dumped

        started = await call(framework, client, "sleep_task", duration_s=0.3, tick_s=0.1)
        task_id = started["task_id"]
        check(started["state"] == "running", "sleep_task answers the running TaskInfo", started)
        await poster.wait_for(task_id, "task_done")
        got = await call(framework, client, "get_task", task_id=task_id)
        check(got == info_of(task_id), "get_task's structured content is the TaskInfo", got)
        check(got["result"] == {"slept_s": 0.3}, "the TaskInfo carries the result", got)

        long = await call(framework, client, "sleep_task", duration_s=60, tick_s=0.05)
        cancelled = await call(framework, client, "cancel_task", task_id=long["task_id"])
        check(
            cancelled == info_of(long["task_id"]) and cancelled["state"] == "cancelled",
            "cancel_task's structured content is the cancelled TaskInfo",
            cancelled,
        )
        listed = await call(framework, client, "list_tasks")
        check(
            listed == {"tasks": [info_of(task_id), info_of(long["task_id"])]},
            "list_tasks' structured content is {'tasks': [TaskInfo, ...]}",
            listed,
        )
        missing = await call(framework, client, "get_task", task_id="slee-000000")
        check(missing.get("error") == "not_found", "an unknown id answers not_found", missing)
        invalid = await call(framework, client, "sleep_task", duration_s=-1)
        check(invalid.get("error") == "invalid", "a bad start answers invalid", invalid)
    await manager.aclose()
    await plain_def_start_tool(framework)
    await readme_example(framework)


def bare_server(framework: str) -> Any:
    """A new server of ``framework``; standalone FastMCP's masks unexpected errors."""
    if framework == "mcp1":
        from mcp.server.fastmcp import FastMCP

        return FastMCP("sync")
    if framework == "mcp2":
        from mcp.server.mcpserver import MCPServer

        return MCPServer("sync")
    from fastmcp import FastMCP as StandaloneFastMCP

    return StandaloneFastMCP("sync", mask_error_details=True)


async def plain_def_start_tool(framework: str) -> None:
    """A ``def`` start tool with the framework's own decorator: the client gets the task
    (mcp 1.x calls it on the loop) or the kit's message, never a bare "Error executing"."""
    from robot_mcp_kit import TaskManager
    from robot_mcp_kit.testing import RecordingPoster

    manager = TaskManager("sync", RecordingPoster())

    async def body(ctx: Any) -> dict[str, Any]:
        return {}

    server = bare_server(framework)

    @server.tool()
    def sync_start() -> dict[str, Any]:
        return manager.start("sync_start", body).model_dump(mode="json")

    async with connect(framework, server) as (client, _):
        if framework == "fastmcp":
            result = wire(await client.call_tool_mcp("sync_start", {}))
        else:
            result = wire(await client.call_tool("sync_start", {}))
    texts = " ".join(c.get("text", "") for c in result.get("content", []))
    if framework == "mcp1":
        check(
            not result.get("isError") and '"running"' in texts,
            "a plain def start tool starts its task (mcp 1.x runs it on the loop)",
            result,
        )
    else:
        check(
            result.get("isError") is True
            and "must run on the server's asyncio event loop" in texts
            and "async def" in texts,
            "a plain def start tool gives the client the kit's message, not a bare error",
            result,
        )
    await manager.aclose()


async def readme_example(framework: str) -> None:
    """The README's example (examples/navigation.py, the same text) picks this framework and
    serves structured answers; run.sh then holds it to the conformance suite."""
    code = NAVIGATION.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    check([b for b in blocks if "register_task_tools" in b] == [code], "README = navigation.py")
    os.environ.pop("RVC_CALLBACK_URL", None)
    namespace: dict[str, Any] = {"__name__": "navigation"}
    exec(compile(code, str(NAVIGATION), "exec"), namespace)  # noqa: S102 - our own example
    from robot_mcp_kit.fastmcp_ext import detect_framework

    server = namespace["mcp"]
    check(detect_framework(server) == framework, f"the README's example runs on {framework}")
    async with connect(framework, server) as (client, _):
        started = await call(framework, client, "navigate_to", place="dock", speed=50)
        check(started.get("state") == "running", "the README's navigate_to answers a TaskInfo")
        got = await call(framework, client, "get_task", task_id=started["task_id"])
        check(got["task_id"] == started["task_id"], "the README's server serves get_task", got)
        # Issue 32, finding 5: a malformed trigger or a bad argument is refused with the
        # reason, as an object, and starts nothing, on every framework.
        for arguments, detail in README_REFUSALS:
            refused = await call(framework, client, "navigate_to", place="dock", **arguments)
            check(
                refused == {"error": "invalid", "detail": detail},
                f"navigate_to({str(arguments)[:90]}) answers invalid naming the field",
                refused,
            )
        for arguments, parameter in FRAMEWORK_TYPE_ERRORS:
            arguments = {"place": "dock", **arguments}
            if framework == "fastmcp":
                result = wire(await client.call_tool_mcp("navigate_to", arguments))
            else:
                result = wire(await client.call_tool("navigate_to", arguments))
            texts = " ".join(c.get("text", "") for c in result.get("content", []))
            check(
                result.get("isError") is True and parameter in texts,
                f"navigate_to({arguments}) is the framework's type error naming {parameter}",
                result,
            )
        listed = await call(framework, client, "list_tasks")
        check(
            [t["task_id"] for t in listed["tasks"]] == [started["task_id"]],
            "no refused navigate_to started a task",
            listed,
        )
    await namespace["manager"].aclose()


README_REFUSALS: list[tuple[dict[str, Any], str]] = [
    (
        {"triggers": [{"type": "eta_below"}]},
        'trigger 0 (eta_below): "seconds" is missing; it must be a finite number > 0.',
    ),
    (
        {"triggers": [{"type": "eta_below", "seconds": "10"}]},
        'trigger 0 (eta_below): "seconds" must be a finite number > 0, got "10" (a string).',
    ),
    ({"speed": 0}, "speed must be a number > 0, got 0.0."),
    # triggers: list[Any] lets every entry reach the kit, which names what is wrong with it.
    (
        {"triggers": ["eta_below"]},
        'trigger 0 must be an object with a "type", got "eta_below" (a string).',
    ),
    ({"triggers": [None]}, 'trigger 0 must be an object with a "type", got null.'),
    (
        {"triggers": [{"type": "eta_below", "seconds": 10**400}]},
        'trigger 0 (eta_below): "seconds" must be a finite number > 0, got an integer beyond '
        "±1.8e308 (no JSON reader holds it as a number).",
    ),
    (
        {"triggers": [{"type": "progress_above", "percent": 0, "n": i} for i in range(33)]},
        "at most 32 triggers per task, got 33: keep the conditions the task needs (one "
        'trigger with "repeat": true fires each time its condition holds).',
    ),
]
# Arguments whose declared type the framework checks before the tool runs: its own error
# (an MCP tool error naming the parameter), not the kit's "invalid" (contract §2.1).
FRAMEWORK_TYPE_ERRORS: list[tuple[dict[str, Any], str]] = [
    ({"speed": "fast"}, "speed"),
    ({"triggers": "eta_below"}, "triggers"),
]


def main(argv: list[str]) -> int:
    frameworks: dict[str, Callable[[], str]] = {
        "mcp1": lambda: f"mcp {version('mcp')}",
        "mcp2": lambda: f"mcp {version('mcp')}",
        "fastmcp": lambda: f"fastmcp {version('fastmcp')} on mcp {version('mcp')}",
    }
    if len(argv) != 1 or argv[0] not in frameworks:
        print(f"usage: check_framework.py {{{'|'.join(frameworks)}}}", file=sys.stderr)
        return 2
    framework = argv[0]
    print(f"framework {framework} ({frameworks[framework]()}):")
    try:
        asyncio.run(run(framework))
    except CheckFailed as exc:
        print(f"FAIL {framework}: {exc}", file=sys.stderr)
        return 1
    print(f"framework {framework}: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
