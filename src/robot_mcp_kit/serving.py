"""serve: run a capability server the way the fleet's servers run, on any of three frameworks.

::

    if __name__ == "__main__":
        serve(mcp, runtime)     # MCP_TRANSPORT, MCP_HOST, MCP_PORT from the environment

The fleet's servers share one convention, which :func:`serve` reads (:func:`serve_options`):

- ``MCP_TRANSPORT``: ``stdio`` (the default), ``sse`` or ``streamable-http``;
- ``MCP_HOST``: the interface the HTTP transports listen on (default ``127.0.0.1``);
- ``MCP_PORT``: their port (default ``default_port``, 8000).

It then serves ``server`` inside ``runtime`` (the poster starts first, so events a previous
process left in the outbox go out before anything new; on exit running tasks are
cancelled, then the poster closes), calling what the framework that built the server
offers:

============================  =================================================================
mcp 1.x ``FastMCP``           ``settings.host`` / ``settings.port`` set, then ``run_sse_async()``
                              or ``run_streamable_http_async()``
mcp 2.x ``MCPServer``         ``run_sse_async(host=, port=)`` / ``run_streamable_http_async(...)``
standalone ``fastmcp``        ``run_http_async(transport=, host=, port=)``
any, ``stdio``                ``run_stdio_async()``
============================  =================================================================

mcp 1.x decides at construction whether to check the ``Host`` header (DNS-rebinding
protection, on for a loopback ``host``, which is its default). Serving on another interface
through ``MCP_HOST`` gets what ``FastMCP(host=MCP_HOST)`` would have got: that loopback-only
check is dropped (logged), because it would refuse every client that is not on loopback. A
protection the author configured is kept as it is.

SIGINT and SIGTERM stop the server in order on every transport: the framework's server
shuts down, then running tasks are cancelled and the poster gets its grace; the process
exits 0. (Left alone, uvicorn raises the signal again after its own shutdown, which would
kill the process, or cancel the runtime's close, before that.)

One INFO line (logger ``robot_mcp_kit.serving``) says what was started: the framework, the
transport, the endpoint URL to give the brain and the conformance suite, and where events go.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast, get_args

from robot_mcp_kit._exceptions import ConfigurationError
from robot_mcp_kit._frameworks import Framework, detect_framework
from robot_mcp_kit.runtime import TaskRuntime

__all__ = ["ServeOptions", "Transport", "serve", "serve_async", "serve_options"]

logger = logging.getLogger("robot_mcp_kit.serving")

Transport = Literal["stdio", "sse", "streamable-http"]
"""The transports of the convention (``MCP_TRANSPORT``)."""

_TRANSPORTS: tuple[str, ...] = get_args(Transport)
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_DEFAULT_PATHS = {"sse": "/sse", "streamable-http": "/mcp"}


@dataclass(frozen=True)
class ServeOptions:
    """How to serve: the transport, and for the HTTP transports the interface and port."""

    transport: Transport
    host: str
    port: int


def serve_options(
    env: Mapping[str, str] | None = None,
    *,
    default_transport: Transport = "stdio",
    default_port: int = 8000,
) -> ServeOptions:
    """``MCP_TRANSPORT``, ``MCP_HOST`` and ``MCP_PORT`` from ``env`` (``os.environ``).

    An unset or blank variable takes its default.

    Raises:
        ConfigurationError: a transport outside the convention, or a port that is not an
            integer from 1 to 65535; the message names the variable, the value and what
            it accepts.
    """
    env = os.environ if env is None else env
    transport = env.get("MCP_TRANSPORT", "").strip() or default_transport
    if transport not in _TRANSPORTS:
        raise ConfigurationError(
            f"MCP_TRANSPORT must be one of {', '.join(_TRANSPORTS)}, got {transport!r}."
        )
    host = env.get("MCP_HOST", "").strip() or "127.0.0.1"
    port_text = env.get("MCP_PORT", "").strip() or str(default_port)
    try:
        port = int(port_text)
    except ValueError:
        raise ConfigurationError(
            f"MCP_PORT must be an integer port from 1 to 65535, got {port_text!r}."
        ) from None
    if not 0 < port < 65536:
        raise ConfigurationError(f"MCP_PORT must be from 1 to 65535, got {port}.")
    return ServeOptions(cast(Transport, transport), host, port)


async def serve_async(
    server: Any,
    runtime: TaskRuntime[Any],
    options: ServeOptions | None = None,
) -> None:
    """Serve ``server`` inside ``runtime`` until the framework's server returns.

    ``options`` defaults to :func:`serve_options` (the environment). Enters ``runtime``
    (it runs once per process), so build a new one for another run.

    Raises:
        ConfigurationError: the environment is not a valid convention, or the poster's
            configuration is invalid.
        TypeError: ``server`` was built by none of the three frameworks.
    """
    framework = detect_framework(server)
    options = options or serve_options()
    if framework == "mcp1":
        _configure_mcp1(server, options)
    where = "" if options.transport == "stdio" else f" at {_endpoint(server, framework, options)}"
    events_to = getattr(runtime.poster, "callback_url", None) or "nowhere (RVC_CALLBACK_URL unset)"
    async with runtime:
        serving = asyncio.ensure_future(_run(server, framework, options))
        with _stop_on_signals(serving, runtime.server_name, options.transport):
            logger.info(
                "%s serving on %s over %s%s; events to %s",
                runtime.server_name,
                _FRAMEWORK_NAMES[framework],
                options.transport,
                where,
                events_to,
            )
            try:
                await serving
            except asyncio.CancelledError:
                if not serving.cancelled() or _current_task_cancelling():
                    raise  # we were cancelled from outside, not by a signal
    logger.info("%s stopped: running tasks cancelled, the poster closed", runtime.server_name)


def _current_task_cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


@contextlib.contextmanager
def _stop_on_signals(
    serving: asyncio.Future[None], name: str, transport: Transport
) -> Iterator[None]:
    """SIGINT and SIGTERM end ``serving`` and let the runtime close in order.

    The HTTP transports run uvicorn, which takes both signals while it serves, shuts down
    gracefully and then raises the signal again: left to Python's defaults that second
    SIGTERM would kill the process, and asyncio's SIGINT handler would cancel the runtime's
    close, before running tasks are cancelled and the poster's grace is given. Here both
    land on the loop too: over stdio they stop the transport; over HTTP uvicorn does, and
    the signal it raises again is absorbed. Outside the main thread, signals are the
    caller's business.
    """
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []

    def stop(signum: signal.Signals) -> None:
        if transport == "stdio" and not serving.done():
            logger.info("%s: %s received, stopping", name, signum.name)
            serving.cancel()

    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(signum, stop, signum)
        except (NotImplementedError, RuntimeError, ValueError):  # Windows, not main thread
            continue
        installed.append(signum)
    try:
        yield
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)


def serve(
    server: Any,
    runtime: TaskRuntime[Any],
    *,
    default_transport: Transport = "stdio",
    default_port: int = 8000,
) -> None:
    """From ``if __name__ == "__main__":``: read the environment and serve until stopped.

    A configuration error ends the process with one line, ``<server name>: <what is
    wrong>`` (exit code 1) and no traceback; Ctrl-C ends it quietly, after the runtime
    has cancelled running tasks and closed the poster.
    """
    try:
        options = serve_options(default_transport=default_transport, default_port=default_port)
        asyncio.run(serve_async(server, runtime, options))
    except ConfigurationError as exc:
        raise SystemExit(f"{runtime.server_name}: {exc}") from None
    except KeyboardInterrupt:
        pass


_FRAMEWORK_NAMES: dict[Framework, str] = {
    "mcp1": "mcp 1.x FastMCP",
    "mcp2": "mcp 2.x MCPServer",
    "fastmcp": "standalone FastMCP",
}


def _configure_mcp1(server: Any, options: ServeOptions) -> None:
    """Give mcp 1.x the interface and port it otherwise takes at construction."""
    settings = server.settings
    settings.host, settings.port = options.host, options.port
    security = getattr(settings, "transport_security", None)
    automatic = (
        security is not None
        and list(getattr(security, "allowed_hosts", ())) == _MCP1_LOOPBACK_HOSTS
        and list(getattr(security, "allowed_origins", ())) == _MCP1_LOOPBACK_ORIGINS
    )
    if options.host not in _LOOPBACK and automatic:
        settings.transport_security = None
        logger.info(
            "mcp 1.x: MCP_HOST=%s is not loopback, so the loopback-only Host check FastMCP "
            "set at construction is dropped (as FastMCP(host=%r) would); pass "
            "transport_security= to FastMCP to check Host headers yourself",
            options.host,
            options.host,
        )


# What mcp 1.x FastMCP sets by itself for a loopback host (mcp/server/fastmcp/server.py).
_MCP1_LOOPBACK_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
_MCP1_LOOPBACK_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]


def _endpoint(server: Any, framework: Framework, options: ServeOptions) -> str:
    path = _DEFAULT_PATHS[options.transport]
    if framework == "mcp1":
        attribute = "sse_path" if options.transport == "sse" else "streamable_http_path"
        path = getattr(server.settings, attribute, path)
    host = f"[{options.host}]" if ":" in options.host else options.host
    return f"http://{host}:{options.port}{path}"


async def _run(server: Any, framework: Framework, options: ServeOptions) -> None:
    if options.transport == "stdio":
        await server.run_stdio_async()
    elif framework == "mcp1":
        if options.transport == "sse":
            await server.run_sse_async()
        else:
            await server.run_streamable_http_async()
    elif framework == "fastmcp":
        await server.run_http_async(
            transport=options.transport, host=options.host, port=options.port
        )
    elif options.transport == "sse":
        await server.run_sse_async(host=options.host, port=options.port)
    else:
        await server.run_streamable_http_async(host=options.host, port=options.port)
