"""Options and fixtures of the conformance suite.

Options (each with an environment fallback, the option wins):

=====================  ============================  =======================================
option                 environment                   meaning
=====================  ============================  =======================================
``--server-url``       ``CONFORMANCE_SERVER_URL``    SSE endpoint of a running server
``--server-cmd``       ``CONFORMANCE_SERVER_CMD``    command that starts the server (the
                                                     suite sets ``RVC_CALLBACK_URL``,
                                                     ``RVC_EVENT_SECRET``,
                                                     ``MCP_TRANSPORT=sse``, ``MCP_HOST``,
                                                     ``MCP_PORT``)
``--secret``           ``CONFORMANCE_SECRET``        HMAC secret (default ``s3cret``)
``--callback-port``    ``CONFORMANCE_CALLBACK_PORT`` fake_rvc's port (default 8765 with
                                                     ``--server-url``, else a free one)
``--server-name``      ``CONFORMANCE_SERVER_NAME``   expected ``X-RVC-Server`` (``sleeper``)
``--start-tool``       ``CONFORMANCE_START_TOOL``    tool that starts a task (``sleep_task``)
``--start-args``       ``CONFORMANCE_START_ARGS``    JSON args: a short task that succeeds
``--fail-args``        ``CONFORMANCE_FAIL_ARGS``     JSON args: a short task that fails
``--cancel-args``      ``CONFORMANCE_CANCEL_ARGS``   JSON args: a task long enough to cancel
``--task-timeout``     ``CONFORMANCE_TASK_TIMEOUT``  seconds a short task may take (20)
=====================  ============================  =======================================

With no target option the suite starts ``examples/sleeper.py`` itself, so a plain
``uv run pytest`` holds the sleeper to the contract.

A run of the conformance suite alone (every path given to pytest is inside
``conformance/``) judges a server, not this repository's tests, so the repository's
coverage measurement (pytest-cov, from ``addopts``, with its gate) is switched off for it:
``uv run pytest conformance --server-url URL`` exits 0 when the server conforms.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from conformance._scenarios import (
    PROGRESS_TRIGGER,
    UNKNOWN_TRIGGER,
    CancelRun,
    DeliveryRun,
    Harness,
    Runs,
)
from conformance._target import (
    Config,
    ConfigError,
    McpClient,
    ServerProcess,
    free_port,
)

if TYPE_CHECKING:
    from fake_rvc import FakeRvcServer

_CONFIG_KEY = pytest.StashKey[Config]()

_OPTIONS: tuple[tuple[str, str, str], ...] = (
    ("--server-url", "CONFORMANCE_SERVER_URL", "SSE endpoint of a running server under test"),
    (
        "--server-cmd",
        "CONFORMANCE_SERVER_CMD",
        "command that starts the server under test; the suite sets RVC_CALLBACK_URL, "
        "RVC_EVENT_SECRET, MCP_TRANSPORT=sse, MCP_HOST and MCP_PORT",
    ),
    ("--secret", "CONFORMANCE_SECRET", "HMAC secret shared with the server (default s3cret)"),
    (
        "--callback-port",
        "CONFORMANCE_CALLBACK_PORT",
        "port fake_rvc listens on (default 8765 with --server-url, else a free port)",
    ),
    (
        "--server-name",
        "CONFORMANCE_SERVER_NAME",
        "the server's X-RVC-Server name (default sleeper)",
    ),
    (
        "--start-tool",
        "CONFORMANCE_START_TOOL",
        "tool that starts a long-running task (default sleep_task)",
    ),
    ("--start-args", "CONFORMANCE_START_ARGS", "JSON arguments of a short task that succeeds"),
    ("--fail-args", "CONFORMANCE_FAIL_ARGS", "JSON arguments of a short task that fails"),
    (
        "--cancel-args",
        "CONFORMANCE_CANCEL_ARGS",
        "JSON arguments of a task that runs long enough to be cancelled",
    ),
    (
        "--task-timeout",
        "CONFORMANCE_TASK_TIMEOUT",
        "seconds a short task may take to finish (default 20)",
    ),
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("conformance", "Async Task Contract conformance suite")
    for option, env, text in _OPTIONS:
        group.addoption(option, default=None, help=f"{text} [env {env}]")


def _raw(config: pytest.Config, option: str, env: str) -> Any:
    value = config.getoption(option.lstrip("-").replace("-", "_"))
    return os.environ.get(env) if value is None else value


def _conformance_only(config: pytest.Config) -> bool:
    """True when every path pytest was given lies inside this folder."""
    here = Path(__file__).resolve().parent
    base = Path(config.invocation_params.dir)
    paths = [(base / str(arg).split("::", 1)[0]).resolve() for arg in config.args]
    return bool(paths) and all(p == here or here in p.parents for p in paths)


def _switch_coverage_off(config: pytest.Config) -> None:
    # pytest-cov (on through addopts) has already started measuring before any conftest
    # loads. Stop it and mark it disabled, as --no-cov would have: no data file, no
    # table, no fail-under gate. Guarded, so another pytest-cov version just keeps going.
    plugin = config.pluginmanager.get_plugin("_cov")
    controller = getattr(plugin, "cov_controller", None)
    if plugin is None or not hasattr(plugin, "_disabled"):
        return
    if controller is not None and getattr(controller, "started", False):
        controller.pause()
    plugin._disabled = True


def pytest_configure(config: pytest.Config) -> None:
    if _conformance_only(config):
        _switch_coverage_off(config)
    raw = {
        option.lstrip("-").replace("-", "_"): _raw(config, option, env)
        for option, env, _ in _OPTIONS
    }
    raw["task_timeout_s"] = raw.pop("task_timeout")
    try:
        config.stash[_CONFIG_KEY] = Config.build(**raw)
    except ConfigError as exc:
        raise pytest.UsageError(f"conformance: {exc}") from None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the delivery tests before the other conformance tests.

    fake_rvc injects its faults into the next POSTs of the server, whichever task they
    belong to. Before any other test has started a task, nothing else of the suite can
    be posting (not even a task whose cancel failed to stop it), so the faults land on
    the delivery task's own events.
    """
    here = Path(__file__).resolve().parent
    ours = [i for i, item in enumerate(items) if here in Path(item.path).resolve().parents]
    if not ours:
        return
    delivery = [i for i in ours if Path(items[i].path).name == "test_delivery.py"]
    first = ours[0]
    moved = [items[i] for i in delivery]
    rest = [item for i, item in enumerate(items) if i not in set(delivery)]
    items[:] = rest[:first] + moved + rest[first:]


def pytest_report_header(config: pytest.Config) -> list[str]:
    cfg = config.stash.get(_CONFIG_KEY, None)
    if cfg is None:
        return []
    port = cfg.callback_port or "a free port"
    return [
        f"conformance target: {cfg.describe_target()}",
        f"conformance fake_rvc: 127.0.0.1:{port}, X-RVC-Server {cfg.server_name!r}",
        f"conformance start: {cfg.start_tool}({cfg.start_args})",
    ]


@pytest.fixture(scope="session")
def conformance_config(pytestconfig: pytest.Config) -> Config:
    """The suite's configuration, from the command line and the environment."""
    return pytestconfig.stash[_CONFIG_KEY]


@pytest.fixture(scope="session")
def fake_rvc(conformance_config: Config) -> Iterator[FakeRvcServer]:
    """fake_rvc on the callback port, verifying with ``{server_name: secret}``."""
    from fake_rvc import FakeRvcServer

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
def server_url(conformance_config: Config, fake_rvc: FakeRvcServer) -> Iterator[str]:
    """The SSE URL of the server under test, started here unless ``--server-url``."""
    cfg = conformance_config
    if cfg.server_url is not None:
        yield cfg.server_url
        return
    assert cfg.server_cmd is not None
    port = free_port()
    env = dict(os.environ)
    env.update(
        RVC_CALLBACK_URL=fake_rvc.events_url,
        RVC_EVENT_SECRET=cfg.secret,
        MCP_TRANSPORT="sse",
        MCP_HOST="127.0.0.1",
        MCP_PORT=str(port),
        PYTHONUNBUFFERED="1",
    )
    proc = ServerProcess(cfg.server_cmd, env, port)
    try:
        proc.start(cfg.startup_timeout_s)
    except OSError as exc:
        # The command cannot be run at all (not found, not executable): no test can run,
        # so stop the session with one message instead of an error per test.
        proc.stop()
        proc.remove_log()
        pytest.exit(
            f"conformance: cannot run --server-cmd {shlex.join(cfg.server_cmd)!r}: {exc}",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )
    except RuntimeError as exc:
        proc.stop()
        pytest.fail(f"conformance: {exc}", pytrace=False)
    try:
        yield proc.url
    finally:
        proc.stop()
        proc.remove_log()


@pytest.fixture(scope="session")
def client(server_url: str) -> Iterator[McpClient]:
    """One MCP session with the server under test, shared by the whole run."""
    try:
        mcp = McpClient(server_url).open()
    except RuntimeError as exc:
        pytest.fail(f"conformance: {exc}", pytrace=False)
    try:
        yield mcp
    finally:
        mcp.close()


@pytest.fixture(scope="session")
def harness(conformance_config: Config, client: McpClient, fake_rvc: FakeRvcServer) -> Harness:
    """Starts tasks on the server under test and watches them through fake_rvc."""
    return Harness(conformance_config, client, fake_rvc)


@pytest.fixture(scope="session")
def tools(client: McpClient) -> dict[str, Any]:
    """The server's tools by name (``mcp.types.Tool``)."""
    return {tool.name: tool for tool in client.list_tools()}


def _accepts_triggers(cfg: Config, tools: dict[str, Any]) -> bool:
    tool = tools.get(cfg.start_tool)
    schema = getattr(tool, "inputSchema", None) or {}
    return "triggers" in (schema.get("properties") or {})


@pytest.fixture(scope="session")
def runs(conformance_config: Config, harness: Harness, tools: dict[str, Any]) -> Runs:
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
