"""The plugin's options and setup for the receiver suite and for the reports of both suites.

:mod:`robot_mcp_conformance.plugin` calls :func:`add_options`, :func:`configure_receiver`,
:func:`configure_reports` and :func:`ignore_collect` from its hooks.

Receiver options (each with an environment fallback, the option wins; ``--secret`` and
``--server-name`` are the server suite's options, shared):

======================  ==============================  ===================================
option                  environment                     meaning
======================  ==============================  ===================================
``--receiver-url``      ``CONFORMANCE_RECEIVER_URL``    the receiver's events endpoint
``--second-secret``     ``CONFORMANCE_SECOND_SECRET``   the server's other secret during a
                                                        rotation (checks it is accepted)
``--inspect-url``       ``CONFORMANCE_INSPECT_URL``     the receiver's inspection hook
``--time-budget``       ``CONFORMANCE_TIME_BUDGET``     seconds an answer may take (5)
``--max-body-bytes``    ``CONFORMANCE_MAX_BODY_BYTES``  the receiver's body limit (1 MiB)
``--timing-pairs``      ``CONFORMANCE_TIMING_PAIRS``    pairs the timing check sends (40;
                                                        0 turns it off)
======================  ==============================  ===================================

Report options, both suites: ``--report-json FILE`` (``CONFORMANCE_REPORT_JSON``) and
``--expected-failures FILE`` (``CONFORMANCE_EXPECTED_FAILURES``); see :mod:`._report`.

The receiver suite runs when the command line names its package
(``pytest --pyargs robot_mcp_conformance.receiver``, as ``robot-mcp-conformance receiver``
does); otherwise its folder is not even collected, so ``pytest --pyargs
robot_mcp_conformance`` runs the server suite alone (and ``--receiver-url`` there is a
usage error saying how to run the receiver suite).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from robot_mcp_conformance._checks import CLAUSE_MARKER, Clause, catalogue, clauses
from robot_mcp_conformance._exceptions import ConfigError
from robot_mcp_conformance._receiver_checks import receiver_clauses
from robot_mcp_conformance._receiver_config import ReceiverConfig
from robot_mcp_conformance._report import ClauseReporter, ExpectedFailures, load_expected_failures

__all__ = [
    "RECEIVER_DIR",
    "RECEIVER_KEY",
    "RECEIVER_OPTIONS",
    "REPORT_OPTIONS",
    "add_options",
    "configure_receiver",
    "configure_reports",
    "ignore_collect",
    "is_receiver_item",
    "receiver_targeted",
    "stashed_receiver_config",
]

PACKAGE = "robot_mcp_conformance"
RECEIVER_PACKAGE = PACKAGE + ".receiver"
RECEIVER_DIR = Path(__file__).resolve().parent / "receiver"
RECEIVER_KEY = pytest.StashKey[ReceiverConfig]()
_RECEIVER_ERROR_KEY = pytest.StashKey[str]()
REPORTER_NAME = "robot_mcp_conformance_reporter"

RECEIVER_OPTIONS: tuple[tuple[str, str, str], ...] = (
    (
        "--receiver-url",
        "CONFORMANCE_RECEIVER_URL",
        "the receiver's POST /api/agent/events URL: run the receiver suite against it",
    ),
    (
        "--second-secret",
        "CONFORMANCE_SECOND_SECRET",
        "the server's other current secret, when the receiver is configured with two "
        "(rotation); without it the rotation clause is not checked",
    ),
    (
        "--inspect-url",
        "CONFORMANCE_INSPECT_URL",
        "the receiver's optional inspection hook (docs/contract.md §5.5); without it the "
        "clauses that need it are not checked",
    ),
    ("--time-budget", "CONFORMANCE_TIME_BUDGET", "seconds the receiver may take to answer (5)"),
    (
        "--max-body-bytes",
        "CONFORMANCE_MAX_BODY_BYTES",
        "the receiver's body limit; the suite posts a body past it (default 1048576)",
    ),
    (
        "--timing-pairs",
        "CONFORMANCE_TIMING_PAIRS",
        "pairs of wrong signatures the timing check sends (default 40; 0: not checked)",
    ),
)

REPORT_OPTIONS: tuple[tuple[str, str, str], ...] = (
    (
        "--report-json",
        "CONFORMANCE_REPORT_JSON",
        "write the JSON report (one entry per clause id of docs/contract.md) to this file",
    ),
    (
        "--expected-failures",
        "CONFORMANCE_EXPECTED_FAILURES",
        "a file of clause ids that may fail (one per line); a listed clause that passes "
        "fails the run, so the list only shrinks",
    ),
)


def _dest(option: str) -> str:
    return "conformance_" + option.lstrip("-").replace("-", "_")


def _value(config: pytest.Config, option: str, env: str) -> str | None:
    value = config.getoption(_dest(option), None)
    return os.environ.get(env) if value is None else str(value)


def add_options(parser: pytest.Parser) -> None:
    """Add the receiver and report options (see the module docstring)."""
    group = parser.getgroup("conformance", "Async Task Contract conformance suite")
    for option, env, text in RECEIVER_OPTIONS + REPORT_OPTIONS:
        group.addoption(option, dest=_dest(option), default=None, help=f"{text} [env {env}]")


def receiver_targeted(config: pytest.Config) -> bool:
    """Whether this run is the receiver suite's: the command line names its package or folder.

    Raises:
        pytest.UsageError: ``--receiver-url`` without the receiver suite to run.
    """
    named = _names_receiver(config)
    if not named and config.getoption(_dest("--receiver-url"), None) is not None:
        raise pytest.UsageError(
            "conformance: --receiver-url runs the receiver suite: pytest --pyargs "
            "robot_mcp_conformance.receiver --receiver-url URL (or robot-mcp-conformance "
            "receiver URL)"
        )
    return named


def _names_receiver(config: pytest.Config) -> bool:
    base = Path(config.invocation_params.dir)
    for arg in config.args:
        text = str(arg).split("::", 1)[0]
        if config.option.pyargs and (
            text == RECEIVER_PACKAGE or text.startswith(RECEIVER_PACKAGE + ".")
        ):
            return True
        path = (base / text).resolve()
        if path == RECEIVER_DIR or RECEIVER_DIR in path.parents:
            return True
    return False


def ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Skip the receiver suite's folder unless the run is the receiver suite's."""
    if collection_path == RECEIVER_DIR and not _names_receiver(config):
        return True
    return None


def configure_receiver(config: pytest.Config) -> ReceiverConfig:
    """Build, check and stash the receiver suite's configuration.

    Raises:
        pytest.UsageError: the options do not parse, or the receiver cannot be reached.
    """
    try:
        cfg = ReceiverConfig.build(
            url=_value(config, "--receiver-url", "CONFORMANCE_RECEIVER_URL"),
            secret=_value(config, "--secret", "CONFORMANCE_SECRET"),
            server_name=_value(config, "--server-name", "CONFORMANCE_SERVER_NAME"),
            second_secret=_value(config, "--second-secret", "CONFORMANCE_SECOND_SECRET"),
            inspect_url=_value(config, "--inspect-url", "CONFORMANCE_INSPECT_URL"),
            time_budget_s=_value(config, "--time-budget", "CONFORMANCE_TIME_BUDGET"),
            max_body_bytes=_value(config, "--max-body-bytes", "CONFORMANCE_MAX_BODY_BYTES"),
            timing_pairs=_value(config, "--timing-pairs", "CONFORMANCE_TIMING_PAIRS"),
        )
    except ConfigError as exc:
        raise pytest.UsageError(f"conformance: {exc}") from None
    config.stash[RECEIVER_KEY] = cfg
    if not config.option.collectonly and not hasattr(config, "workerinput"):
        _check_receiver(cfg)
    return cfg


def _check_receiver(cfg: ReceiverConfig) -> None:
    """Reach the receiver once, before any test: a dead URL is one line and exit code 4."""
    try:
        httpx.get(cfg.url, timeout=10.0)
    except httpx.HTTPError as exc:
        raise pytest.UsageError(
            f"conformance: cannot reach the receiver at {cfg.url}: {type(exc).__name__}: {exc}"
        ) from None


def stashed_receiver_config(config: pytest.Config) -> ReceiverConfig:
    """The receiver configuration :func:`configure_receiver` stashed; exit 4 without one."""
    cfg = config.stash.get(RECEIVER_KEY, None)
    if cfg is None:
        pytest.exit(
            "conformance: the receiver suite needs --receiver-url URL (the receiver's "
            "POST /api/agent/events endpoint)",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )
    return cfg


def is_receiver_item(item: pytest.Item) -> bool:
    """Whether ``item`` is one of the receiver suite's tests."""
    function = getattr(item, "function", None)
    module = getattr(function, "__module__", "") or ""
    return module.startswith(RECEIVER_PACKAGE + ".test_")


def all_clause_ids() -> list[str]:
    """Every clause id of both suites (what an expected-failures file may name)."""
    return [c.id for c in catalogue(clauses) + catalogue(receiver_clauses)]


def configure_reports(
    config: pytest.Config,
    *,
    suite: str,
    suite_catalogue: list[Clause],
    target: str,
    is_suite_item: Callable[[pytest.Item], bool],
) -> None:
    """Register the :class:`ClauseReporter` for a run of a suite: it shows the warnings in
    the terminal summary and, when asked, writes ``--report-json`` and applies
    ``--expected-failures``.

    Raises:
        pytest.UsageError: the expected-failures file cannot be read or names no clause.
    """
    report = _value(config, "--report-json", "CONFORMANCE_REPORT_JSON")
    expected_path = _value(config, "--expected-failures", "CONFORMANCE_EXPECTED_FAILURES")
    expected: ExpectedFailures | None = None
    if expected_path:
        try:
            expected = load_expected_failures(Path(expected_path), all_clause_ids())
        except ConfigError as exc:
            raise pytest.UsageError(f"conformance: {exc}") from None
    if config.pluginmanager.has_plugin(REPORTER_NAME):
        return
    config.pluginmanager.register(
        ClauseReporter(
            suite=suite,
            catalogue=suite_catalogue,
            target=target,
            report_path=Path(report) if report else None,
            expected=expected,
            is_suite_item=is_suite_item,
        ),
        REPORTER_NAME,
    )


def register_marker(config: pytest.Config) -> None:
    """Declare the ``clause`` marker (the suite runs under ``--strict-markers``)."""
    config.addinivalue_line(
        "markers", f"{CLAUSE_MARKER}(clause): the docs/contract.md clause a conformance test checks"
    )
