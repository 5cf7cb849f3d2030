"""The sleeper: the kit spec's §5 example, a capability server whose one task just sleeps.

Run it as a real SSE server::

    MCP_TRANSPORT=sse MCP_PORT=9100 uv run python examples/sleeper.py

It is built on whichever framework is installed: mcp 2.x ``MCPServer`` when mcp is 2.x,
else mcp 1.x ``FastMCP``; ``SLEEPER_FRAMEWORK=fastmcp`` picks standalone FastMCP. The same
kit calls serve all three (``register_task_tools``, ``add_start_tool``).

Environment:

- ``MCP_TRANSPORT``: ``stdio`` (default), ``sse`` or ``streamable-http``.
- ``MCP_HOST``: interface for the HTTP transports (default ``127.0.0.1``).
- ``MCP_PORT``: port for the HTTP transports (default ``9100``).
- ``SLEEPER_FRAMEWORK``: ``auto`` (default: the mcp SDK, 2.x or 1.x) or ``fastmcp``.
- ``RVC_CALLBACK_URL`` / ``RVC_EVENT_SECRET``: where the signed events go (unset URL: the
  poster is a no-op that logs at DEBUG).
- ``RVC_OUTBOX``: a SQLite file for the durable outbox and task journal (unset: none).
  With it, events survive a restart and a task running when the process died is reported
  ``task_failed`` / ``INTERRUPTED`` at the next start (``docs/delivery.md``). One process
  per file: a second sleeper on it, or a damaged file, exits 1 with one line saying so.

``python examples/sleeper.py --version`` prints the kit's version, which the server also
reports as ``serverInfo.version``.

Tools: ``sleep_task`` (starts a task, answers its ``TaskInfo`` at once, as structured
content; with ``confirm=true`` its task first asks the caller to confirm, through
``ctx.request_input``) plus the reconciliation tools ``get_task`` / ``cancel_task`` /
``list_tasks`` / ``get_task_events`` and ``answer_task_input``. On mcp 2.x it also serves the
MCP tasks extension (``NativeTasks``): a host that declares ``io.modelcontextprotocol/tasks``
gets a native task for ``sleep_task`` (``tasks/get``, ``tasks/update``, ``tasks/cancel``),
the very task whose events the brain gets. The server is built by :func:`build_server`, so
tests can run it in memory with a recording poster.

Dual-mode pattern: the tool is the thin entry (validate args → ``manager.start`` → return
the ``TaskInfo``); the body is the real async work.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import logging
import math
import os
import sys
from typing import Any

from robot_mcp_kit import (
    ManagerClosed,
    NativeTasks,
    RobotMcpKitError,
    TaskContext,
    TaskError,
    TaskInfo,
    TaskManager,
    TaskRuntime,
    __version__,
    register_task_tools,
    serve,
)
from robot_mcp_kit.fastmcp_ext import (
    Framework,
    ToolErrorReply,
    add_start_tool,
    set_server_version,
)

__all__ = [
    "KNOWN_TRIGGER_TYPES",
    "MAX_DURATION_S",
    "MAX_TICKS",
    "SERVER_NAME",
    "build_server",
    "default_framework",
    "main",
]

SERVER_NAME = "sleeper"
MAX_DURATION_S = 3600.0
MAX_TICKS = 10_000
KNOWN_TRIGGER_TYPES = ("eta_below", "progress_above")
"""Trigger types sleep_task implements (progress_above through the kit)."""

_INSTRUCTIONS = (
    "A demo capability server. sleep_task starts a long-running fake task and "
    "returns its task_id at once; events about it are pushed to the brain. Use "
    "get_task / list_tasks / cancel_task to check on or stop started tasks."
)

_CONFIRM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "description": "Sleep now?"}},
    "required": ["confirm"],
}

logger = logging.getLogger("sleeper")


def _invalid(detail: str) -> ToolErrorReply:
    return ToolErrorReply(error="invalid", detail=detail)


def default_framework() -> Framework:
    """``SLEEPER_FRAMEWORK=fastmcp`` → standalone FastMCP; else mcp 2.x, else mcp 1.x."""
    if os.environ.get("SLEEPER_FRAMEWORK", "").strip().lower() == "fastmcp":
        return "fastmcp"
    return "mcp2" if importlib.util.find_spec("mcp.server.mcpserver") is not None else "mcp1"


def _new_server(framework: Framework, manager: TaskManager) -> Any:
    # Imported by name: only one of the three frameworks is installed at a time.
    if framework == "fastmcp":
        standalone = importlib.import_module("fastmcp").FastMCP
        return standalone(SERVER_NAME, instructions=_INSTRUCTIONS, version=__version__)
    if framework == "mcp2":
        mcp_server = importlib.import_module("mcp.server.mcpserver").MCPServer
        # The MCP tasks extension over the same manager: the native face (mcp >= 2.3).
        native = NativeTasks(manager)
        return mcp_server(
            SERVER_NAME,
            instructions=_INSTRUCTIONS,
            version=__version__,
            extensions=[native.extension()],
        )
    from mcp.server.fastmcp import FastMCP

    server = FastMCP(SERVER_NAME, instructions=_INSTRUCTIONS)
    set_server_version(server)  # else serverInfo.version is the mcp SDK's
    return server


def _eta_threshold(trigger: dict[str, Any]) -> float | None:
    """The ``seconds`` of a usable eta_below trigger, else None."""
    if trigger.get("type") != "eta_below":
        return None
    seconds = trigger.get("seconds")
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        return None
    return float(seconds) if math.isfinite(seconds) else None


def build_server(manager: TaskManager, *, framework: Framework | None = None) -> Any:
    """Build the sleeper around ``manager`` (which owns the event sink).

    ``framework`` defaults to :func:`default_framework`; the transport, host and port are
    :func:`robot_mcp_kit.serve`'s, on every framework.
    """
    mcp = _new_server(framework or default_framework(), manager)
    register_task_tools(mcp, manager, inputs=True)

    async def sleep_task(
        duration_s: float,
        fail: bool = False,
        triggers: list[dict[str, Any]] | None = None,
        tick_s: float = 1.0,
        confirm: bool = False,
    ) -> TaskInfo | ToolErrorReply:
        """Start a fake long-running task that sleeps for duration_s seconds (at most 3600).

        Returns the task (with its task_id) immediately; the task then reports
        progress every tick_s seconds ({"eta_s", "elapsed_s", "percent"}) and finishes
        with {"slept_s": duration_s}, or fails with FAKE_FAILURE when fail is true.
        Supported triggers: {"type": "eta_below", "seconds": N} (fires once when the
        remaining time drops below N) and {"type": "progress_above", "percent": P}; add
        "repeat": true to fire on every tick while the condition holds.
        With confirm true the task first asks "Sleep for N s?" (an input_required event,
        answered with answer_task_input) and sleeps only if accepted with
        {"confirm": true}; otherwise it fails with NOT_CONFIRMED.
        """
        if not (isinstance(duration_s, int | float) and math.isfinite(duration_s)):
            return _invalid(f"duration_s must be a finite number, got {duration_s!r}.")
        if not 0 < duration_s <= MAX_DURATION_S:
            return _invalid(
                f"duration_s must be > 0 and <= {MAX_DURATION_S:g} seconds, got {duration_s!r}."
            )
        if not (isinstance(tick_s, int | float) and math.isfinite(tick_s) and tick_s > 0):
            return _invalid(f"tick_s must be a finite number > 0, got {tick_s!r}.")
        if duration_s / tick_s > MAX_TICKS:
            return _invalid(
                f"duration_s / tick_s must be at most {MAX_TICKS} progress ticks, got "
                f"{duration_s / tick_s:.0f}; use a larger tick_s."
            )

        async def body(ctx: TaskContext) -> dict[str, Any]:
            if confirm:
                answer = await ctx.request_input(
                    f"Sleep for {duration_s:g} s?", schema=_CONFIRM_SCHEMA
                )
                if answer.action != "accept" or answer.content.get("confirm") is not True:
                    raise TaskError(
                        "NOT_CONFIRMED",
                        f"The caller did not confirm the sleep ({answer.action}).",
                        suggestions=["start_again_and_confirm"],
                    )
            eta_triggers = [
                (t, threshold) for t in ctx.triggers if (threshold := _eta_threshold(t)) is not None
            ]
            # The epsilon keeps float noise (0.07 / 0.01 = 7.000000000000001) from adding a tick.
            ticks = max(1, math.ceil(duration_s / tick_s - 1e-9))
            for tick in range(1, ticks + 1):
                ctx.raise_if_cancelled()
                elapsed = min(tick * tick_s, duration_s)
                await asyncio.sleep(elapsed - min((tick - 1) * tick_s, duration_s))
                eta = round(max(duration_s - elapsed, 0.0), 3)
                await ctx.progress(
                    {
                        "eta_s": eta,
                        "elapsed_s": round(elapsed, 3),
                        "percent": round(100.0 * elapsed / duration_s, 2),
                    }
                )
                for trigger, threshold in eta_triggers:
                    if eta < threshold:
                        # The kit makes this at-most-once unless the trigger repeats.
                        await ctx.fire_trigger(trigger, {"eta_s": eta})
            if fail:
                raise TaskError(
                    "FAKE_FAILURE",
                    "The sleeper was asked to fail.",
                    suggestions=["retry_without_fail"],
                )
            return {"slept_s": duration_s}

        try:
            info = manager.start(
                "sleep_task",
                body,
                triggers=triggers,
                est_duration_s=float(duration_s),
                known_trigger_types=KNOWN_TRIGGER_TYPES,
            )
        except ManagerClosed as exc:  # the server is shutting down
            return ToolErrorReply(error="unavailable", detail=str(exc))
        return info

    add_start_tool(mcp, sleep_task)
    return mcp


def main() -> None:
    """Run the sleeper with the transport, host and port from the environment.

    :func:`robot_mcp_kit.serve` reads ``MCP_TRANSPORT`` / ``MCP_HOST`` / ``MCP_PORT``
    (default port 9100 here), enters the runtime (the poster starts: with an outbox,
    events a previous process left undelivered, and the ``INTERRUPTED`` reports of its
    running tasks, go out now, before anything new) and serves; leaving cancels running
    tasks, then gives queued events a short grace.
    """
    if "--version" in sys.argv[1:]:
        print(f"sleeper (robot-mcp-kit) {__version__}")
        return
    logging.basicConfig(
        level=os.environ.get("LOG_LEVEL", "INFO").upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        # The poster, then the manager (which reads the task journal of an outbox).
        runtime = TaskRuntime(SERVER_NAME, known_trigger_types=KNOWN_TRIGGER_TYPES)
    except RobotMcpKitError as exc:
        # A bad setting, an outbox another process holds (OutboxLocked), a damaged or
        # too new outbox file (StoreError): one line naming it, exit 1, no traceback.
        sys.exit(f"sleeper: {exc}")
    serve(build_server(runtime.manager), runtime, default_port=9100)


if __name__ == "__main__":
    main()
