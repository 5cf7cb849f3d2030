"""The conformance suite can fail: each deliberately broken server fails exactly its tests.

Every script in ``tests/conformance_broken/`` is the same small kit-built server with one
defect (``control.py`` has none). For each, the conformance suite runs in a subprocess
with ``--server-cmd``, writing a JUnit report, and the set of conformance tests that
failed must equal the set the defect breaks: no more (a sloppy check blaming the wrong
clause), no less (a check that cannot fail). Each parametrized case runs its own server's
suite, so ``pytest '...test_conformance_catches_broken_servers.py::
test_conformance_fails_exactly_the_tests_the_defect_breaks[seq_gap]'`` runs one suite;
the cases spread over the pytest-xdist workers, so at most one run per worker is going.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# One suite run takes about 15 s on a quiet two-core machine (under coverage). Both limits
# are hang guards, scaled by ROBOT_MCP_TEST_TIMEOUT_SCALE: the child's (which reports the
# run's output) fires first, pytest-timeout's only if the test hangs outside the child.
SUITE_HANG_GUARD_S = 240.0
pytestmark = [pytest.mark.slow, pytest.mark.timeout(SUITE_HANG_GUARD_S + 60)]

REPO = Path(__file__).resolve().parents[2]
BROKEN = REPO / "tests" / "conformance_broken"

# Shorter tasks than the sleeper defaults keep each run to a few seconds.
SUITE_ARGS = [
    "--start-tool",
    "sleep_task",
    "--start-args",
    '{"duration_s": 0.5, "tick_s": 0.1}',
    "--fail-args",
    '{"duration_s": 0.3, "tick_s": 0.1, "fail": true}',
    "--cancel-args",
    '{"duration_s": 30, "tick_s": 0.1}',
    "--input-args",
    '{"duration_s": 0.3, "tick_s": 0.1, "confirm": true}',
    # Every broken server requires these tokens, each its own principal (BROKEN_TOKENS),
    # so the task-ownership clause (§13) is judged against all of them.
    "--bearer-token",
    "suite-token",
    "--other-bearer-token",
    "other-token",
]
BROKEN_TOKENS = "suite-token:suite,other-token:other"

# Every test that needs at least one verified event: with a bad signature, none arrives
# (the delivery tests say delivery cannot be judged).
NEEDS_VERIFIED_EVENTS = {
    "test_events_are_signed_with_the_shared_secret",
    "test_a_traceparent_is_well_formed_when_present",
    "test_event_bodies_are_task_events",
    "test_events_name_their_task_server_and_tool",
    "test_event_ids_are_unique_uuid4",
    "test_event_timestamps_are_utc_and_current",
    "test_event_payloads_match_their_type",
    "test_seq_is_contiguous_from_1",
    "test_a_finished_task_emits_exactly_one_terminal_event",
    "test_nothing_is_emitted_after_the_terminal_event",
    "test_get_task_agrees_with_the_events",
    "test_failing_task_ends_failed_with_its_task_failure",
    "test_every_event_arrives_in_order_despite_500s_and_drops",
    "test_retries_follow_the_backoff_schedule",
    "test_cancel_stops_the_work",
    "test_unknown_trigger_type_is_ignored",
    "test_progress_above_fires_once_when_percent_is_reported",
    "test_a_refused_task_does_not_hold_back_other_tasks",
    "test_input_request_is_announced",
    "test_answered_input_lets_the_task_finish",
}

EXPECTED_FAILURES: dict[str, set[str]] = {
    "control": set(),
    "bad_signature": NEEDS_VERIFIED_EVENTS,
    "seq_gap": {"test_seq_is_contiguous_from_1"},
    "task_failed_after_cancel": {"test_cancelled_task_stays_cancelled_and_emits_no_task_failed"},
    "missing_list_tasks": {
        "test_reconciliation_tool_is_listed[list_tasks]",
        "test_reconciliation_tool_input_schema[list_tasks]",
        "test_reconciliation_tool_description_says_it_does_not_start_work[list_tasks]",
        "test_list_tasks_returns_task_infos",
        "test_list_tasks_filters_by_state[running]",
        "test_list_tasks_filters_by_state[succeeded]",
        "test_list_tasks_filters_by_state[failed]",
        "test_list_tasks_filters_by_state[cancelled]",
        "test_reconciliation_tool_output_schema_describes_an_object[list_tasks]",
        "test_reconciliation_answers_are_objects_not_json_strings[list_tasks]",
    },
    "non_idempotent_cancel": {"test_cancel_task_is_idempotent"},
    "no_retry": {
        "test_every_event_arrives_in_order_despite_500s_and_drops",
        "test_retries_follow_the_backoff_schedule",
    },
    "events_after_terminal": {"test_nothing_is_emitted_after_the_terminal_event"},
    # Issue 21, optional clause: a traceparent, when sent, is a W3C one.
    "bad_traceparent": {"test_a_traceparent_is_well_formed_when_present"},
    "wrong_backoff": {"test_retries_follow_the_backoff_schedule"},
    # Issue 12: answers that are JSON strings reach structured clients double-encoded.
    "string_results": {
        "test_reconciliation_tool_output_schema_describes_an_object[get_task]",
        "test_reconciliation_tool_output_schema_describes_an_object[cancel_task]",
        "test_reconciliation_tool_output_schema_describes_an_object[list_tasks]",
        "test_reconciliation_answers_are_objects_not_json_strings[get_task]",
        "test_reconciliation_answers_are_objects_not_json_strings[list_tasks]",
    },
    "cancel_keeps_running": {"test_cancel_stops_the_work"},
    # Issue 19: one FIFO for the process keeps each task in order, but a refused event
    # then holds back every other task's events.
    "one_fifo": {"test_a_refused_task_does_not_hold_back_other_tasks"},
    # Issue 14, optional clause: the gap-repair tool must honour after_seq.
    "task_events_ignore_after_seq": {"test_get_task_events_answers_each_finished_task_s_events"},
    # Issue 24, optional clauses: input during a task (contract §11).
    "input_not_announced": {
        "test_input_request_is_announced",
        "test_answered_input_lets_the_task_finish",
    },
    "input_answer_ignored": {"test_answered_input_lets_the_task_finish"},
    # The reused id is flagged; dedupe then loses progress seq 3, which shows as a gap,
    # makes the progress_above trigger look early (the 60 % report it answered is gone) and,
    # for the failing task (33, 67, 100 %), leaves get_task's last progress unmatched.
    "reused_event_id": {
        "test_event_ids_are_unique_uuid4",
        "test_seq_is_contiguous_from_1",
        "test_progress_above_fires_once_when_percent_is_reported",
        "test_get_task_agrees_with_the_events",
    },
    # Issue 32, optional clause: with authentication, another principal's task is unknown.
    "tasks_shared": {"test_another_principal_s_task_is_an_unknown_id_to_it"},
}


# Broken servers whose defect is in the MCP tasks extension, which only mcp 2.x serves:
# tests/frameworks/run.sh runs each in an mcp 2.x environment and checks that exactly its
# test fails. Here (mcp 1.x) that test is skipped: the server advertises no extension.
MCP2_ONLY: dict[str, set[str]] = {
    "native_disagrees": {"test_native_task_agrees_with_the_events"},
}
SKIPPED_ON_MCP1 = {"test_native_task_agrees_with_the_events"}


@dataclass(frozen=True)
class Verdict:
    """What one conformance run against one server reported."""

    returncode: int
    passed: frozenset[str]
    failed: frozenset[str]
    skipped: frozenset[str]
    output: str
    report: dict[str, Any] | None = None
    """The run's JSON report (--report-json), one entry per clause id."""


def _run_suite(script: str, report: Path, timeout_s: float) -> Verdict:
    server_cmd = shlex.join([sys.executable, str(BROKEN / f"{script}.py")])
    # Not measured by coverage either (no COVERAGE_PROCESS_*): the matrix proves the suite
    # can fail; the lines its children run are the sleeper's and the suite's, which the
    # conformance run of the main suite measures. Unmeasured, each run costs about a third
    # less CPU, and fourteen of them are the longest part of the full run.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CONFORMANCE_", "COVERAGE_PROCESS_"))
    }
    env["BROKEN_SERVER_TOKENS"] = BROKEN_TOKENS  # the server inherits the suite's env
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "conformance",
        "--server-cmd",
        server_cmd,
        *SUITE_ARGS,
        "-p",
        "no:cacheprovider",
        # The child must not run pytest-cov: it would erase and combine the parent's
        # coverage data files.
        "--no-cov",
        # One process: the suite's session (one fake_rvc, one server) exists once.
        "-n",
        "0",
        "-q",
        f"--junitxml={report}",
        f"--report-json={report.with_suffix('.json')}",
    ]
    # Its own session, so a hang guard that fires ends the child's server too.
    with subprocess.Popen(
        argv,
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            pytest.fail(
                f"{script}: the suite did not finish in {timeout_s:.0f} s\n"
                f"{stdout[-6000:]}{stderr[-3000:]}"
            )
    passed: set[str] = set()
    failed: set[str] = set()
    skipped: set[str] = set()
    if report.is_file():
        # S314: the report is the one our own subprocess just wrote.
        for case in ET.parse(report).getroot().iter("testcase"):  # noqa: S314
            name = case.get("name", "?")
            if case.find("failure") is not None or case.find("error") is not None:
                failed.add(name)
            elif case.find("skipped") is not None:
                skipped.add(name)
            else:
                passed.add(name)
    by_clause = report.with_suffix(".json")
    return Verdict(
        proc.returncode,
        frozenset(passed),
        frozenset(failed),
        frozenset(skipped),
        stdout[-6000:] + stderr[-3000:],
        json.loads(by_clause.read_text()) if by_clause.is_file() else None,
    )


def test_every_broken_server_script_is_covered():
    """Each script in tests/conformance_broken/ has an expected verdict, and vice versa."""
    scripts = {p.stem for p in BROKEN.glob("*.py") if not p.stem.startswith("_")}
    assert scripts == set(EXPECTED_FAILURES) | set(MCP2_ONLY)
    run_sh = (REPO / "tests" / "frameworks" / "run.sh").read_text(encoding="utf-8")
    for script, tests in MCP2_ONLY.items():
        assert f"tests/conformance_broken/{script}.py" in run_sh
        assert all(test in run_sh for test in tests)


@pytest.mark.parametrize("server", sorted(EXPECTED_FAILURES))
def test_conformance_fails_exactly_the_tests_the_defect_breaks(
    server: str, tmp_path: Path, timeout_scale: float
) -> None:
    """The suite's failing tests against this server are exactly the expected ones."""
    verdict = _run_suite(server, tmp_path / f"{server}.xml", SUITE_HANG_GUARD_S * timeout_scale)
    expected = EXPECTED_FAILURES[server]
    ran = verdict.passed | verdict.failed | verdict.skipped
    assert len(ran) >= 44, f"the suite collected only {len(ran)} tests:\n{verdict.output}"
    assert verdict.skipped <= SKIPPED_ON_MCP1, f"unexpected skips {sorted(verdict.skipped)}"
    assert verdict.failed == expected, (
        f"{server}: unexpectedly failed {sorted(verdict.failed - expected)}, "
        f"unexpectedly passed {sorted(expected - verdict.failed)}\n{verdict.output}"
    )
    assert verdict.returncode == (1 if expected else 0), verdict.output
    # The JSON report agrees, clause by clause: the failed clauses' tests are the failures.
    assert verdict.report is not None, verdict.output
    assert verdict.report["exit_code"] == verdict.returncode
    failing = {
        test["test"].rsplit("::", 1)[-1]
        for clause in verdict.report["clauses"]
        if clause["status"] == "failed"
        for test in clause["tests"]
        if test["outcome"] == "failed"
    }
    assert failing == expected, verdict.report
    assert not verdict.report["unmapped_tests"], "every suite test names its clause"
