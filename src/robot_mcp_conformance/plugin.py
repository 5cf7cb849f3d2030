"""The conformance suite's pytest plugin: options, configuration, ordering, report header.

Registered through the ``pytest11`` entry point ``robot_mcp_conformance``, so it is active
wherever the distribution is installed (as pytest-base-url's plugin is). It only adds
options and hooks; the suite's fixtures live in the package's ``conftest.py``
(:mod:`robot_mcp_conformance._fixtures`) and apply to the suite's own tests only.

Options (each with an environment fallback, the option wins):

=====================  ============================  =======================================
option                 environment                   meaning
=====================  ============================  =======================================
``--server-url``       ``CONFORMANCE_SERVER_URL``    SSE or streamable-HTTP endpoint of a
                                                     running server
``--transport``        ``CONFORMANCE_TRANSPORT``     ``auto`` (default: detected),
                                                     ``sse`` or ``streamable-http``
``--server-cmd``       ``CONFORMANCE_SERVER_CMD``    command that starts the server (the
                                                     suite sets ``RVC_CALLBACK_URL``,
                                                     ``RVC_EVENT_SECRET``,
                                                     ``MCP_TRANSPORT``, ``MCP_HOST``,
                                                     ``MCP_PORT``)
``--secret``           ``CONFORMANCE_SECRET``        HMAC secret (default ``s3cret``)
``--callback-port``    ``CONFORMANCE_CALLBACK_PORT`` fake_rvc's port (default 8765 with
                                                     ``--server-url``, else a free one)
``--server-name``      ``CONFORMANCE_SERVER_NAME``   expected ``X-RVC-Server`` (``sleeper``)
``--start-tool``       ``CONFORMANCE_START_TOOL``    tool that starts a task (``sleep_task``)
``--start-args``       ``CONFORMANCE_START_ARGS``    JSON args: a short task that succeeds
``--fail-args``        ``CONFORMANCE_FAIL_ARGS``     JSON args: a short task that fails
``--cancel-args``      ``CONFORMANCE_CANCEL_ARGS``   JSON args: a task long enough to cancel
``--input-args``       ``CONFORMANCE_INPUT_ARGS``    JSON args: a task that asks for input
                                                     (§11; unset with ``--start-tool``:
                                                     those tests are skipped)
``--task-timeout``     ``CONFORMANCE_TASK_TIMEOUT``  seconds a short task may take (20)
``--bearer-token``     ``CONFORMANCE_BEARER_TOKEN``  bearer token of every request (a
                                                     server with authentication)
``--other-bearer-``    ``CONFORMANCE_OTHER_BEARER_`` another principal's token: judges
``token``              ``TOKEN``                     task ownership (§13; unset: skipped)
=====================  ============================  =======================================

Options are checked when the run targets the suite (``pytest conformance`` in this
repository, ``pytest --pyargs robot_mcp_conformance`` anywhere, or any conformance option
on the command line): contradictory or malformed ones stop the run with exit code 4, and so
does a ``--server-url`` that cannot be reached or does not speak MCP (one GET, before the
session header and any test; ``--collect-only`` does not need the server). In a
checkout, with no target option, the suite starts ``examples/sleeper.py`` itself, so a
plain ``uv run pytest`` holds the sleeper to the contract.

A run of the conformance suite alone judges a server, not this repository's tests, so the
repository's coverage measurement (pytest-cov, from ``addopts``) is switched off for it:
``uv run pytest conformance --server-url URL`` exits 0 when the server conforms.

The receiver suite (``pytest --pyargs robot_mcp_conformance.receiver --receiver-url URL``)
and the reports of both suites (``--report-json``, ``--expected-failures``) have their
options and setup in :mod:`._receiver_plugin`; a receiver run skips the server logic here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from robot_mcp_conformance import _receiver_plugin as receiver
from robot_mcp_conformance._checks import catalogue, clauses
from robot_mcp_conformance._config import Config, Transport
from robot_mcp_conformance._exceptions import ConfigError, TargetError
from robot_mcp_conformance._receiver_checks import receiver_clauses

__all__ = [
    "CONFIG_KEY",
    "OPTIONS",
    "SUITE_DIRS",
    "build_config",
    "detected_transport",
    "is_suite_item",
]

PACKAGE = "robot_mcp_conformance"
PACKAGE_DIR = Path(__file__).resolve().parent
SUITE_DIRS: tuple[Path, ...] = (PACKAGE_DIR, PACKAGE_DIR.parents[1] / "conformance")
"""Where the suite's test modules are: the package, and a checkout's thin ``conformance/``."""

CONFIG_KEY = pytest.StashKey[Config]()
_ERROR_KEY = pytest.StashKey[str]()
_TRANSPORT_KEY = pytest.StashKey[Transport]()

OPTIONS: tuple[tuple[str, str, str], ...] = (
    (
        "--server-url",
        "CONFORMANCE_SERVER_URL",
        "SSE or streamable-HTTP endpoint of a running server under test",
    ),
    (
        "--transport",
        "CONFORMANCE_TRANSPORT",
        "auto (default: detected from the endpoint), sse or streamable-http",
    ),
    (
        "--server-cmd",
        "CONFORMANCE_SERVER_CMD",
        "command that starts the server under test; the suite sets RVC_CALLBACK_URL, "
        "RVC_EVENT_SECRET, MCP_TRANSPORT, MCP_HOST and MCP_PORT",
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
        "--input-args",
        "CONFORMANCE_INPUT_ARGS",
        "JSON arguments of a task that asks for input (contract §11; default for the "
        "sleeper, none with --start-tool)",
    ),
    (
        "--task-timeout",
        "CONFORMANCE_TASK_TIMEOUT",
        "seconds a short task may take to finish (default 20)",
    ),
    (
        "--bearer-token",
        "CONFORMANCE_BEARER_TOKEN",
        "bearer token sent on every request of the suite (a server with authentication)",
    ),
    (
        "--other-bearer-token",
        "CONFORMANCE_OTHER_BEARER_TOKEN",
        "bearer token of another principal: the task-ownership clause (contract §13) "
        "looks at the suite's tasks as that principal (needs --bearer-token; unset: skipped)",
    ),
)


def _dest(option: str) -> str:
    return "conformance_" + option.lstrip("-").replace("-", "_")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("conformance", "Async Task Contract conformance suite")
    for option, env, text in OPTIONS:
        group.addoption(option, dest=_dest(option), default=None, help=f"{text} [env {env}]")
    receiver.add_options(parser)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The receiver suite's folder is collected only when the run is the receiver suite's."""
    return receiver.ignore_collect(collection_path, config)


def build_config(config: pytest.Config) -> Config:
    """The suite's configuration from the command line and the environment.

    Raises:
        ConfigError: the options contradict each other or do not parse.
    """
    raw: dict[str, Any] = {}
    for option, env, _ in OPTIONS:
        value = config.getoption(_dest(option))
        raw[option.lstrip("-").replace("-", "_")] = os.environ.get(env) if value is None else value
    raw["task_timeout_s"] = raw.pop("task_timeout")
    return Config.build(**raw)


def _inside_suite(path: Path) -> bool:
    return any(path == d or d in path.parents for d in SUITE_DIRS)


def _suite_args(config: pytest.Config) -> tuple[bool, bool]:
    """(some argument names the suite, every argument names the suite)."""
    base = Path(config.invocation_params.dir)
    hits: list[bool] = []
    for arg in config.args:
        text = str(arg).split("::", 1)[0]
        if config.option.pyargs and (text == PACKAGE or text.startswith(PACKAGE + ".")):
            hits.append(True)
        else:
            hits.append(_inside_suite((base / text).resolve()))
    return any(hits), bool(hits) and all(hits)


def _switch_coverage_off(config: pytest.Config) -> None:
    # pytest-cov (on through this repository's addopts) has already started measuring
    # before any plugin configures. Stop it and mark it disabled, as --no-cov would have:
    # no data file, no table. Guarded, so another pytest-cov version just keeps going.
    plugin = config.pluginmanager.get_plugin("_cov")
    controller = getattr(plugin, "cov_controller", None)
    if plugin is None or not hasattr(plugin, "_disabled"):
        return
    if controller is not None and getattr(controller, "started", False):
        controller.pause()
    plugin._disabled = True


def _option_given(config: pytest.Config) -> bool:
    return any(config.getoption(_dest(option)) is not None for option, _, _ in OPTIONS)


def pytest_configure(config: pytest.Config) -> None:
    receiver.register_marker(config)
    if receiver.receiver_targeted(config):
        _switch_coverage_off(config)
        receiver_cfg = receiver.configure_receiver(config)
        receiver.configure_reports(
            config,
            suite="receiver",
            suite_catalogue=catalogue(receiver_clauses),
            target=receiver_cfg.describe_target(),
            is_suite_item=receiver.is_receiver_item,
        )
        return
    targeted, only = _suite_args(config)
    if only:
        _switch_coverage_off(config)
    try:
        cfg = build_config(config)
    except ConfigError as exc:
        if targeted or _option_given(config):
            raise pytest.UsageError(f"conformance: {exc}") from None
        # Not a run of the suite (say the user's own tests): say nothing now; if suite
        # tests are collected after all, the first one stops the run with this message.
        config.stash[_ERROR_KEY] = str(exc)
        return
    config.stash[CONFIG_KEY] = cfg
    if targeted or _option_given(config):
        _check_target(config, cfg)
        receiver.configure_reports(
            config,
            suite="server",
            suite_catalogue=catalogue(clauses),
            target=cfg.describe_target(),
            is_suite_item=is_suite_item,
        )


def _check_target(config: pytest.Config, cfg: Config) -> None:
    """Reach ``--server-url`` once, now: a dead or non-MCP URL is one line and exit 4.

    Done here rather than in the first test's fixture so that the line comes before the
    session header and any test name (issue 19). Skipped for ``--collect-only`` (which
    needs no server) and in pytest-xdist workers (their controller checked already).
    """
    if cfg.server_url is None or config.option.collectonly or hasattr(config, "workerinput"):
        return
    from robot_mcp_conformance._client import detect_transport

    try:
        config.stash[_TRANSPORT_KEY] = detect_transport(cfg.server_url, headers=cfg.auth_headers())
    except TargetError as exc:
        raise pytest.UsageError(f"conformance: {exc}") from None


def detected_transport(config: pytest.Config) -> Transport | None:
    """The transport the start-of-run check detected at ``--server-url``, if it ran."""
    return config.stash.get(_TRANSPORT_KEY, None)


def stashed_config(config: pytest.Config) -> Config:
    """The configuration ``pytest_configure`` built; exits with code 4 when it had failed."""
    cfg = config.stash.get(CONFIG_KEY, None)
    if cfg is None:
        message = config.stash.get(_ERROR_KEY, "the conformance plugin is not configured")
        pytest.exit(f"conformance: {message}", returncode=pytest.ExitCode.USAGE_ERROR)
    return cfg


def is_suite_item(item: pytest.Item) -> bool:
    """Whether ``item`` is one of the suite's tests (in the package or a thin re-export)."""
    function = getattr(item, "function", None)
    module = getattr(function, "__module__", "") or ""
    return module.startswith(PACKAGE + ".test_")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the delivery tests before the other conformance tests.

    fake_rvc injects its faults into the next POSTs of the server, whichever task they
    belong to. Before any other test has started a task, nothing else of the suite can
    be posting (not even a task whose cancel failed to stop it), so the faults land on
    the delivery task's own events. ``trylast``: after any plugin that shuffles.
    """
    ours = [i for i, item in enumerate(items) if is_suite_item(item)]
    if not ours:
        return
    delivery = [i for i in ours if Path(items[i].path).name == "test_delivery.py"]
    first = ours[0]
    moved = [items[i] for i in delivery]
    skip = set(delivery)
    rest = [item for i, item in enumerate(items) if i not in skip]
    items[:] = rest[:first] + moved + rest[first:]


def pytest_report_header(config: pytest.Config) -> list[str]:
    rcfg = config.stash.get(receiver.RECEIVER_KEY, None)
    if rcfg is not None:
        return [
            f"conformance receiver: {rcfg.describe_target()}",
            f"conformance limits: answer within {rcfg.time_budget_s:g} s, body limit "
            f"{rcfg.max_body_bytes} bytes, {rcfg.timing_pairs} timing pairs",
        ]
    cfg = config.stash.get(CONFIG_KEY, None)
    if cfg is None or not (_suite_args(config)[0] or _option_given(config)):
        return []
    port = cfg.callback_port or "a free port"
    transport = cfg.transport or ("detected" if cfg.server_url else "sse")
    return [
        f"conformance target: {cfg.describe_target()} (transport: {transport})",
        f"conformance fake_rvc: 127.0.0.1:{port}, X-RVC-Server {cfg.server_name!r}",
        f"conformance start: {cfg.start_tool}({cfg.start_args})",
    ]
