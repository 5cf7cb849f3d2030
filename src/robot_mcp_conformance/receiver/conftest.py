"""The receiver suite's fixtures: the configuration, the probe, the hook and the scenarios.

They are session-scoped: each scenario posts once and every test that judges a clause of
it reads the same exchanges. The time budget is judged first, before any other post: every
other scenario needs :func:`within_budget`, so a receiver whose median answer is over its
budget fails that clause, every other test is skipped for one reason (printed once more at
the end of the run), and the suite does not wait that long on each of its hundred-odd posts.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from robot_mcp_conformance._hook import InspectionHook
from robot_mcp_conformance._probe import Probe
from robot_mcp_conformance._receiver_config import ReceiverConfig
from robot_mcp_conformance._receiver_plugin import stashed_receiver_config
from robot_mcp_conformance._receiver_runs import (
    Acceptance,
    AnswerTimes,
    Refusals,
    TimingRun,
    accept,
    refuse,
    time_answers,
    time_compares,
)

NO_HOOK = (
    "not checked: the receiver offers no inspection hook (give --inspect-url URL; the hook "
    "is optional, docs/contract.md §5.5)"
)


@pytest.fixture(scope="session")
def receiver_config(pytestconfig: pytest.Config) -> ReceiverConfig:
    """The receiver suite's configuration, from the command line and the environment."""
    return stashed_receiver_config(pytestconfig)


@pytest.fixture(scope="session")
def probe(receiver_config: ReceiverConfig) -> Iterator[Probe]:
    """Signs and posts events to the receiver under test."""
    poster = Probe(receiver_config)
    try:
        yield poster
    finally:
        poster.close()


@pytest.fixture(scope="session")
def hook(receiver_config: ReceiverConfig) -> Iterator[InspectionHook | None]:
    """The receiver's inspection hook, or None when it offers none."""
    if receiver_config.inspect_url is None:
        yield None
        return
    client = InspectionHook(receiver_config.inspect_url, receiver_config.request_timeout_s)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def inspection(hook: InspectionHook | None) -> InspectionHook:
    """The hook, for a test that needs it: skipped ("not checked") without one."""
    if hook is None:
        pytest.skip(NO_HOOK)
    return hook


@pytest.fixture(scope="session")
def answer_times(probe: Probe, receiver_config: ReceiverConfig) -> AnswerTimes:
    """The timed events, posted once, before any other post."""
    return time_answers(probe, receiver_config.time_budget_s)


_STOPPED = pytest.StashKey[str]()


@pytest.fixture(scope="session")
def within_budget(pytestconfig: pytest.Config, answer_times: AnswerTimes) -> None:
    """Skip (once for the session: every scenario depends on it) when the receiver's
    median answer is over its budget; only the budget's own test runs then."""
    reason = answer_times.stop_reason
    if reason is not None:
        pytestconfig.stash[_STOPPED] = reason
        pytest.skip(reason)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say once, at the end, why the receiver suite stopped early (when it did)."""
    reason = terminalreporter.config.stash.get(_STOPPED, None)
    if reason is not None:
        terminalreporter.write_line(f"receiver suite stopped early: {reason}")


@pytest.fixture(scope="session")
def accepted(probe: Probe, answer_times: AnswerTimes, within_budget: None) -> Acceptance:
    """The events the receiver must acknowledge, posted once (with the timed ones)."""
    return accept(probe, answer_times.timed)


@pytest.fixture(scope="session")
def refusals(probe: Probe, within_budget: None) -> Refusals:
    """One post per way a post can be bad, posted once."""
    return refuse(probe)


@pytest.fixture(scope="session")
def timing(probe: Probe, receiver_config: ReceiverConfig, within_budget: None) -> TimingRun:
    """The timing pairs (none when --timing-pairs is 0)."""
    return time_compares(probe, receiver_config.timing_pairs)
