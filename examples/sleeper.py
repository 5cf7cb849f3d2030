"""The sleeper: the kit spec's §5 example, a capability server whose one task just sleeps.

Run it as a real SSE server::

    MCP_TRANSPORT=sse MCP_PORT=9100 uv run python examples/sleeper.py

Environment:

- ``MCP_TRANSPORT``: ``stdio`` (default), ``sse`` or ``streamable-http``.
- ``MCP_HOST``: interface for the HTTP transports (default ``127.0.0.1``).
- ``MCP_PORT``: port for the HTTP transports (default ``9100``).
- ``RVC_CALLBACK_URL`` / ``RVC_EVENT_SECRET``: where the signed events go (unset URL: the
  poster is a no-op that logs at DEBUG).

Tools: ``sleep_task`` (starts a task, returns its ``TaskInfo`` JSON at once) plus the
reconciliation tools ``get_task`` / ``cancel_task`` / ``list_tasks``. The server is built
by :func:`build_server`, so tests can run it in memory with a recording poster.

Dual-mode pattern: the tool is the thin entry (validate args → ``manager.start`` → return
``TaskInfo`` JSON); the body is the real async work.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import sys
from typing import Any, Literal

from mcp.server.fastmcp import FastMCP

from robot_mcp_kit import (
    ConfigurationError,
    EventPoster,
    TaskContext,
    TaskError,
    TaskManager,
    register_task_tools,
)

__all__ = [
    "KNOWN_TRIGGER_TYPES",
    "MAX_DURATION_S",
    "MAX_TICKS",
    "SERVER_NAME",
    "build_server",
    "main",
]

SERVER_NAME = "sleeper"
MAX_DURATION_S = 3600.0
MAX_TICKS = 10_000
KNOWN_TRIGGER_TYPES = ("eta_below", "progress_above")
"""Trigger types sleep_task implements (progress_above through the kit)."""

Transport = Literal["stdio", "sse", "streamable-http"]
_TRANSPORTS: tuple[Transport, ...] = ("stdio", "sse", "streamable-http")

logger = logging.getLogger("sleeper")


def _invalid(detail: str) -> str:
    return json.dumps({"error": "invalid", "detail": detail})


def _eta_threshold(trigger: dict[str, Any]) -> float | None:
    """The ``seconds`` of a usable eta_below trigger, else None."""
    if trigger.get("type") != "eta_below":
        return None
    seconds = trigger.get("seconds")
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        return None
    return float(seconds) if math.isfinite(seconds) else None


def build_server(
    manager: TaskManager, *, host: str = "127.0.0.1", port: int = 9100
) -> FastMCP[Any]:
    """Build the sleeper FastMCP server around ``manager`` (which owns the event sink)."""
    mcp: FastMCP[Any] = FastMCP(
        SERVER_NAME,
        instructions=(
            "A demo capability server. sleep_task starts a long-running fake task and "
            "returns its task_id at once; events about it are pushed to the brain. Use "
            "get_task / list_tasks / cancel_task to check on or stop started tasks."
        ),
        host=host,
        port=port,
    )
    register_task_tools(mcp, manager)

    @mcp.tool()
    async def sleep_task(
        duration_s: float,
        fail: bool = False,
        triggers: list[dict[str, Any]] | None = None,
        tick_s: float = 1.0,
    ) -> str:
        """Start a fake long-running task that sleeps for duration_s seconds (at most 3600).

        Returns the task's JSON (with its task_id) immediately; the task then reports
        progress every tick_s seconds ({"eta_s", "elapsed_s", "percent"}) and finishes
        with {"slept_s": duration_s}, or fails with FAKE_FAILURE when fail is true.
        Supported triggers: {"type": "eta_below", "seconds": N} (fires once when the
        remaining time drops below N) and {"type": "progress_above", "percent": P}; add
        "repeat": true to fire on every tick while the condition holds.
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
        except RuntimeError as exc:  # the manager is closed: the server is shutting down
            return json.dumps({"error": "unavailable", "detail": str(exc)})
        return info.model_dump_json()

    return mcp


async def _serve(transport: Transport, host: str, port: int) -> None:
    poster = EventPoster(server_name=SERVER_NAME)
    manager = TaskManager(SERVER_NAME, poster, known_trigger_types=KNOWN_TRIGGER_TYPES)
    mcp = build_server(manager, host=host, port=port)
    logger.info(
        "sleeper starting: transport=%s host=%s port=%s events=%s",
        transport,
        host,
        port,
        poster.callback_url or "off",
    )
    try:
        if transport == "stdio":
            await mcp.run_stdio_async()
        elif transport == "sse":
            await mcp.run_sse_async()
        else:
            await mcp.run_streamable_http_async()
    finally:
        # Cancel running tasks, then give queued events a short grace to go out.
        await manager.aclose()
        await poster.aclose()


def main() -> None:
    """Run the sleeper with the transport, host and port from the environment."""
    logging.basicConfig(
        level=os.environ.get("LOG_LEVEL", "INFO").upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    transport = os.environ.get("MCP_TRANSPORT", "stdio").strip() or "stdio"
    if transport not in _TRANSPORTS:
        sys.exit(
            f"sleeper: MCP_TRANSPORT must be one of {', '.join(_TRANSPORTS)}, got {transport!r}"
        )
    host = os.environ.get("MCP_HOST", "127.0.0.1").strip() or "127.0.0.1"
    port_text = os.environ.get("MCP_PORT", "9100").strip() or "9100"
    try:
        port = int(port_text)
    except ValueError:
        sys.exit(f"sleeper: MCP_PORT must be an integer port, got {port_text!r}")
    if not 0 < port < 65536:
        sys.exit(f"sleeper: MCP_PORT must be between 1 and 65535, got {port}")
    try:
        asyncio.run(_serve(transport, host, port))
    except ConfigurationError as exc:
        sys.exit(f"sleeper: {exc}")
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
