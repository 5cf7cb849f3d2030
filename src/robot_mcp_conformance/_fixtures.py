"""The conformance suite's fixtures (imported by the suite's ``conftest.py`` files).

They are session-scoped: one fake_rvc, one server under test, one MCP session and one set
of task runs serve the whole run. They apply only to the suite's own tests, so their
short names cannot clash with fixtures of the project the suite is run from.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from robot_mcp_conformance._client import McpClient, detect_transport
from robot_mcp_conformance._config import Config, Transport
from robot_mcp_conformance._exceptions import ServerStartError, TargetError
from robot_mcp_conformance._harness import Harness
from robot_mcp_conformance._native import NativeClient, NativeRun
from robot_mcp_conformance._process import ServerProcess
from robot_mcp_conformance._runs import (
    PROGRESS_TRIGGER,
    UNKNOWN_TRIGGER,
    CancelRun,
    DeliveryRun,
    InputRun,
    OwnershipRun,
    RefusalRun,
    Runs,
)
from robot_mcp_conformance.plugin import detected_transport, stashed_config
from robot_mcp_kit.models import TASK_INPUT_TOOL_NAME
from robot_mcp_kit.testing import free_port

if TYPE_CHECKING:
    from fake_rvc import FakeRvcServer

__all__ = [
    "cancelled",
    "client",
    "conformance_config",
    "delivery",
    "fake_rvc",
    "harness",
    "input_run",
    "native_runs",
    "other_client",
    "ownership",
    "refusal",
    "runs",
    "server_endpoint",
    "tools",
]


def _stop(message: str) -> None:
    """Stop the whole run with one line: no test can judge a server the suite cannot use."""
    pytest.exit(message, returncode=pytest.ExitCode.USAGE_ERROR)


@pytest.fixture(scope="session")
def conformance_config(pytestconfig: pytest.Config) -> Config:
    """The suite's configuration, from the command line and the environment."""
    return stashed_config(pytestconfig)


@pytest.fixture(scope="session")
def fake_rvc(conformance_config: Config) -> Iterator[FakeRvcServer]:
    """fake_rvc on the callback port, verifying with ``{server_name: secret}``."""
    try:
        from fake_rvc import FakeRvcServer
    except ImportError as exc:  # pragma: no cover - the conformance extra brings it
        _stop(
            f"conformance: fake_rvc cannot be imported ({exc}); install the suite with "
            "pip install 'robot-mcp-kit[conformance]'"
        )
        raise

    cfg = conformance_config
    rvc = FakeRvcServer({cfg.server_name: cfg.secret}, port=cfg.callback_port)
    try:
        rvc.start()
    except OSError as exc:
        pytest.fail(
            f"conformance: fake_rvc cannot listen on 127.0.0.1:{cfg.callback_port}: {exc}. "
            "Choose another --callback-port (and point the server's RVC_CALLBACK_URL at it).",
            pytrace=False,
        )
    try:
        yield rvc
    finally:
        rvc.stop()


@pytest.fixture(scope="session")
def server_endpoint(
    pytestconfig: pytest.Config, conformance_config: Config, fake_rvc: FakeRvcServer
) -> Iterator[tuple[str, Transport]]:
    """The URL and transport of the server under test, started here unless ``--server-url``.

    A URL that cannot be reached, or that does not speak MCP, stops the run with one line
    (normally before any test, in the plugin's ``pytest_configure``; here when that check
    did not run, e.g. in a pytest-xdist worker).
    """
    cfg = conformance_config
    if cfg.server_url is not None:
        detected = detected_transport(pytestconfig)
        try:
            detected = detected or detect_transport(cfg.server_url, headers=cfg.auth_headers())
        except TargetError as exc:
            _stop(f"conformance: {exc}")
            raise
        yield cfg.server_url, cfg.transport or detected
        return
    assert cfg.server_cmd is not None
    transport: Transport = cfg.transport or "sse"
    port = free_port()
    env = dict(os.environ)
    env.update(
        RVC_CALLBACK_URL=fake_rvc.events_url,
        RVC_EVENT_SECRET=cfg.secret,
        MCP_TRANSPORT=transport,
        MCP_HOST="127.0.0.1",
        MCP_PORT=str(port),
        PYTHONUNBUFFERED="1",
    )
    proc = ServerProcess(cfg.server_cmd, env, port, transport)
    try:
        proc.start(cfg.startup_timeout_s)
    except OSError as exc:
        # The command cannot be run at all (not found, not executable): no test can run,
        # so stop the session with one message instead of an error per test.
        proc.stop()
        proc.remove_log()
        _stop(f"conformance: cannot run --server-cmd {shlex.join(cfg.server_cmd)!r}: {exc}")
    except ServerStartError as exc:
        proc.stop()
        pytest.fail(f"conformance: {exc}", pytrace=False)
    try:
        yield proc.url, transport
    finally:
        proc.stop()
        proc.remove_log()


@pytest.fixture(scope="session")
def client(
    conformance_config: Config, server_endpoint: tuple[str, Transport]
) -> Iterator[McpClient]:
    """One MCP session with the server under test, shared by the whole run."""
    url, transport = server_endpoint
    try:
        mcp = McpClient(url, transport, headers=conformance_config.auth_headers()).open()
    except TargetError as exc:
        _stop(f"conformance: {exc}")
        raise
    try:
        yield mcp
    finally:
        mcp.close()


@pytest.fixture(scope="session")
def other_client(
    conformance_config: Config, server_endpoint: tuple[str, Transport]
) -> Iterator[McpClient]:
    """An MCP session as another principal (``--other-bearer-token``), for §13.

    Skipped (the clause is not judged) without ``--other-bearer-token``.
    """
    if conformance_config.other_bearer_token is None:
        pytest.skip(
            "no --other-bearer-token: task ownership (contract §13) needs a second "
            "principal's token to be judged"
        )
    url, transport = server_endpoint
    try:
        mcp = McpClient(url, transport, headers=conformance_config.auth_headers(other=True))
        mcp.open()
    except TargetError as exc:
        pytest.fail(f"conformance: as the other principal (--other-bearer-token): {exc}")
    try:
        yield mcp
    finally:
        mcp.close()


@pytest.fixture(scope="session")
def ownership(
    harness: Harness, other_client: McpClient, tools: dict[str, dict[str, Any]]
) -> OwnershipRun:
    """The suite's tasks (a long one, and one waiting for input when judged) driven by
    another principal (§13), then checked and cancelled by their owner."""
    return harness.ownership_scenario(other_client, tools)


@pytest.fixture(scope="session")
def harness(conformance_config: Config, client: McpClient, fake_rvc: FakeRvcServer) -> Harness:
    """Starts tasks on the server under test and watches them through fake_rvc."""
    return Harness(conformance_config, client, fake_rvc)


@pytest.fixture(scope="session")
def tools(client: McpClient) -> dict[str, dict[str, Any]]:
    """The server's tools by name, in their wire form (``inputSchema``, ``outputSchema``, ...)."""
    return {tool["name"]: tool for tool in client.list_tools()}


def _accepts_triggers(cfg: Config, tools: dict[str, dict[str, Any]]) -> bool:
    tool = tools.get(cfg.start_tool) or {}
    schema = tool.get("inputSchema") or {}
    return "triggers" in (schema.get("properties") or {})


@pytest.fixture(scope="session")
def runs(conformance_config: Config, harness: Harness, tools: dict[str, dict[str, Any]]) -> Runs:
    """A task that succeeds, one that fails, and two with triggers, run side by side."""
    cfg = conformance_config
    with_triggers = _accepts_triggers(cfg, tools)
    completed = harness.start(cfg.start_args, "succeeding")
    failed = None if cfg.fail_args is None else harness.start(cfg.fail_args, "failing")
    unknown = progress = None
    if with_triggers:
        unknown = harness.start(
            {**cfg.start_args, "triggers": [dict(UNKNOWN_TRIGGER)]}, "unknown-trigger"
        )
        progress = harness.start(
            {**cfg.start_args, "triggers": [dict(PROGRESS_TRIGGER)]}, "progress_above"
        )
    harness.observe_all([run for run in (completed, failed, unknown, progress) if run is not None])
    return Runs(completed, failed, unknown, progress, with_triggers)


@pytest.fixture(scope="session")
def cancelled(harness: Harness) -> CancelRun:
    """A long task cancelled twice while running."""
    return harness.cancel_scenario()


@pytest.fixture(scope="session")
def delivery(harness: Harness) -> DeliveryRun:
    """A task run while fake_rvc answers 500 and then drops the connection."""
    return harness.delivery_scenario()


@pytest.fixture(scope="session")
def refusal(harness: Harness) -> RefusalRun:
    """A task whose every post fake_rvc refuses (413), and a second task run meanwhile."""
    return harness.refusal_scenario()


@pytest.fixture(scope="session")
def input_run(
    conformance_config: Config, harness: Harness, tools: dict[str, dict[str, Any]]
) -> InputRun:
    """A task that asks for input, answered through answer_task_input (contract §11).

    Skipped (an optional clause) without ``--input-args`` or when the server does not list
    ``answer_task_input``.
    """
    arguments = conformance_config.input_args
    if arguments is None:
        pytest.skip("no --input-args: no task that asks for input to judge (contract §11)")
    if TASK_INPUT_TOOL_NAME not in tools:
        pytest.skip(f"the server does not list {TASK_INPUT_TOOL_NAME} (contract §11, optional)")
    return harness.input_scenario(arguments)


@pytest.fixture(scope="session")
def native_runs(server_endpoint: tuple[str, Transport], harness: Harness) -> list[NativeRun]:
    """Tasks driven through the MCP tasks extension and watched through fake_rvc (§12).

    Skipped unless the server speaks streamable HTTP and its ``server/discover`` (protocol
    2026-07-28) advertises ``io.modelcontextprotocol/tasks``.
    """
    url, transport = server_endpoint
    if transport != "streamable-http":
        pytest.skip("the MCP tasks extension is judged over streamable HTTP only (§12)")
    native = NativeClient(url, headers=harness.config.auth_headers())
    if not native.advertises_tasks():
        pytest.skip(
            "the server does not advertise io.modelcontextprotocol/tasks in server/discover "
            "(contract §12, optional)"
        )
    return harness.native_scenario(native)
