"""Reports a CI keeps: the JSON report by clause id, expected failures, warnings.

Both suites (the server suite and the receiver suite) key their results on the stable clause
ids of ``docs/contract.md`` ("Clause ids"). A :class:`ClauseReporter` is registered as a
pytest plugin for every run of a suite: it prints the warnings in the terminal summary, and
acts on two options:

* ``--expected-failures FILE`` names clause ids that may fail (one per line, ``#``
  comments, a leading ``- `` allowed so a YAML list reads too; ids of the other suite are
  ignored, so one file may serve both). A failing test of such a clause is reported as an
  expected failure (pytest's xfail: ``x`` in the progress line, ``<skipped
  type="pytest.xfail">`` in JUnit XML). A listed clause whose tests all passed makes the
  run fail (exit code 1) and the summary says to remove it: the list only shrinks, as the
  official MCP conformance suite's baseline does. An id that is no clause of
  ``docs/contract.md`` is a usage error (exit code 4).
* ``--report-json FILE`` writes one entry per clause of the suite's catalogue (status,
  the tests that checked it, the failure's summary and evidence), the exit code and the
  counts; the format is :data:`REPORT_FORMAT`, described in ``conformance/README.md``.

Clause statuses (:class:`ClauseStatus`): ``passed``, ``failed``, ``error`` (a test of it
could not run: a fixture failed), ``expected_failure``, ``unexpected_pass`` (listed as
expected to fail but passed), ``warning`` (passed, with a best-effort finding such as the
receiver's timing check: never a failure), ``not_checked`` (every test of it skipped, e.g.
an optional hook the target does not offer) and ``not_run`` (no test of it was selected).

The per-test facts travel in each test report's ``user_properties`` (``clause``, and for a
failure or a warning ``conformance_evidence``), so they also reach pytest's JUnit XML and
a pytest-xdist controller.
"""

from __future__ import annotations

import difflib
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

import pytest

from robot_mcp_conformance._checks import CLAUSE_MARKER, CONTRACT, Clause, ClauseFailure
from robot_mcp_conformance._exceptions import ConfigError
from robot_mcp_kit import __version__

__all__ = [
    "CLAUSE_PROPERTY",
    "EVIDENCE_PROPERTY",
    "REPORT_FORMAT",
    "WARNING_PROPERTY",
    "ClauseReporter",
    "ClauseStatus",
    "ExpectedFailures",
    "clause_of",
    "load_expected_failures",
    "record_warning",
]

REPORT_FORMAT = "robot-mcp-conformance-report/1"
"""The ``format`` field of the JSON report; a change that breaks a reader bumps it."""

CLAUSE_PROPERTY = "clause"
"""``user_properties`` key of the clause id a test enforces (also in JUnit XML)."""
EVIDENCE_PROPERTY = "conformance_evidence"
"""``user_properties`` key of a failure's summary and evidence, as JSON."""
WARNING_PROPERTY = "conformance_warning"
"""``user_properties`` key of a warning's summary and evidence, as JSON."""

_EVIDENCE_CHARS = 20_000
"""Evidence longer than this (as JSON) is kept as text cut to this length."""
_MESSAGE_CHARS = 4_000


class ClauseStatus(StrEnum):
    """One clause's verdict in the JSON report."""

    PASSED = "passed"  # every test of the clause that ran passed
    FAILED = "failed"  # a test of the clause failed
    ERROR = "error"  # a test of the clause could not run (a fixture failed)
    EXPECTED_FAILURE = "expected_failure"  # failed, and listed in --expected-failures
    UNEXPECTED_PASS = "unexpected_pass"  # listed in --expected-failures, but passed
    WARNING = "warning"  # passed, with a best-effort finding (never a failure)
    NOT_CHECKED = "not_checked"  # every test of the clause skipped (e.g. no hook offered)
    NOT_RUN = "not_run"  # no test of the clause was selected


FAILING = frozenset({ClauseStatus.FAILED, ClauseStatus.ERROR, ClauseStatus.UNEXPECTED_PASS})
"""The statuses that make the run fail (exit code 1)."""


@dataclass(frozen=True)
class ExpectedFailures:
    """The clause ids a run may fail, read from ``--expected-failures FILE``."""

    path: Path
    ids: frozenset[str]


def load_expected_failures(path: Path, known: Iterable[str]) -> ExpectedFailures:
    """Read an expected-failures file: one clause id per line (see the module docstring).

    Raises:
        ConfigError: the file cannot be read, or a line names no clause of ``known``.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
        raise ConfigError(f"--expected-failures {str(path)!r} cannot be read: {reason}.") from None
    valid = frozenset(known)
    ids: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        entry = line.split("#", 1)[0].strip()
        entry = entry.removeprefix("- ").strip().strip("'\"")
        if not entry:
            continue
        if entry not in valid:
            close = difflib.get_close_matches(entry, sorted(valid), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(
                f"--expected-failures {str(path)!r} line {number}: {entry[:80]!r} is not a "
                f"clause id of {CONTRACT}{hint}; the ids are listed there under 'Clause ids'."
            )
        ids.add(entry)
    return ExpectedFailures(path, frozenset(ids))


def clause_of(item: pytest.Item) -> Clause | None:
    """The clause a test declares with :func:`~robot_mcp_conformance._checks.enforces`."""
    marker = item.get_closest_marker(CLAUSE_MARKER)
    if marker is None or not marker.args or not isinstance(marker.args[0], Clause):
        return None
    clause: Clause = marker.args[0]
    return clause


def record_warning(item: pytest.Item, clause: Clause, summary: str, evidence: Any) -> None:
    """Record a warning on the running test: it passes, and its clause reads ``warning``.

    Shown in the terminal summary ("conformance warnings"), in JUnit XML as the test's
    ``conformance_warning`` property and in the JSON report; never changes the exit code.
    """
    entry = {"clause": clause.id, "summary": summary, "evidence": _bounded(evidence)}
    item.user_properties.append((WARNING_PROPERTY, json.dumps(entry, default=str)))


def _bounded(evidence: Any) -> Any:
    """``evidence`` as JSON-ready data, or its text cut to :data:`_EVIDENCE_CHARS`."""
    try:
        text = json.dumps(evidence, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        text = json.dumps(repr(evidence))
    if len(text) > _EVIDENCE_CHARS:
        return text[:_EVIDENCE_CHARS] + f"... ({len(text) - _EVIDENCE_CHARS} more characters)"
    loaded: Any = json.loads(text)
    return loaded


def _property(report: pytest.TestReport, name: str) -> str | None:
    """The last value recorded under ``name`` in the report's ``user_properties``."""
    found: str | None = None
    for key, value in report.user_properties:
        if key == name:
            found = str(value)
    return found


@dataclass
class _TestResult:
    """What one test of the suite came to, across its setup, call and teardown."""

    nodeid: str
    clause_id: str | None
    outcome: str = "passed"  # passed, failed, error, skipped, xfailed
    duration_s: float = 0.0
    summary: str | None = None
    evidence: Any = None
    warning: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "test": self.nodeid,
            "outcome": self.outcome,
            "duration_s": round(self.duration_s, 3),
        }
        if self.summary is not None:
            out["summary"] = self.summary
        return out


@dataclass
class _Tally:
    """The results gathered so far (on the process that reports: pytest-xdist's controller)."""

    tests: dict[str, _TestResult] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)


class ClauseReporter:
    """The pytest plugin object behind ``--report-json`` and ``--expected-failures``.

    Args:
        suite: ``"server"`` or ``"receiver"``: which suite's tests it judges.
        catalogue: every clause of that suite, in the order of the report.
        target: one line naming what is under test (the report's ``target``).
        report_path: where to write the JSON report, or None.
        expected: the expected failures, or None.
        is_suite_item: which collected tests belong to the suite.
    """

    def __init__(
        self,
        *,
        suite: str,
        catalogue: Sequence[Clause],
        target: str,
        report_path: Path | None,
        expected: ExpectedFailures | None,
        is_suite_item: Callable[[pytest.Item], bool],
    ) -> None:
        self.suite = suite
        self.catalogue = list(catalogue)
        self.target = target
        self.report_path = report_path
        self.expected = expected
        self._is_suite_item = is_suite_item
        self._known = {clause.id for clause in self.catalogue}
        self._tally = _Tally()
        self._started_wall = time.time()
        self._started = time.monotonic()
        self.statuses: dict[str, ClauseStatus] = {}
        self.stale: list[str] = []
        self.warnings: list[dict[str, Any]] = []
        self.exit_code: int | None = None

    def __repr__(self) -> str:
        return (
            f"ClauseReporter(suite={self.suite!r}, clauses={len(self.catalogue)}, "
            f"tests={len(self._tally.tests)}, report={str(self.report_path)!r})"
        )

    # ----------------------------------------------------------------- in every process

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            if not self._is_suite_item(item):
                continue
            clause = clause_of(item)
            # Every suite test carries the property; "" until a failure names its clause.
            item.user_properties.append((CLAUSE_PROPERTY, clause.id if clause else ""))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        report: pytest.TestReport = yield
        if not self._is_suite_item(item):
            return report
        failure = call.excinfo.value if call.excinfo is not None else None
        clause = clause_of(item)
        if clause is None and isinstance(failure, ClauseFailure) and failure.clause.id:
            clause = failure.clause
            report.user_properties.append((CLAUSE_PROPERTY, clause.id))
        if report.failed and isinstance(failure, ClauseFailure):
            entry = {"summary": failure.summary, "evidence": _bounded(failure.evidence)}
            report.user_properties.append((EVIDENCE_PROPERTY, json.dumps(entry, default=str)))
        expected = self.expected.ids if self.expected is not None else frozenset()
        if report.when == "call" and report.failed and clause is not None and clause.id in expected:
            assert self.expected is not None
            report.outcome = "skipped"
            report.wasxfail = (  # pytest's xfail protocol
                f"expected failure: {clause.id} is listed in {self.expected.path}"
            )
        return report

    # ----------------------------------------------------------------- in the reporting process

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        clause_id = _property(report, CLAUSE_PROPERTY)
        if clause_id is None:  # not a test of the suite
            return
        result = self._tally.tests.get(report.nodeid)
        if result is None:
            result = _TestResult(report.nodeid, clause_id or None)
            self._tally.tests[report.nodeid] = result
            self._tally.order.append(report.nodeid)
        if clause_id:
            result.clause_id = clause_id
        result.duration_s += report.duration
        warning = _property(report, WARNING_PROPERTY)
        if warning is not None and result.warning is None:
            result.warning = json.loads(warning)
        if report.passed:
            return
        if hasattr(report, "wasxfail"):
            result.outcome = "xfailed"
            result.summary = result.summary or str(report.wasxfail)
        elif report.skipped:
            if result.outcome == "passed":
                result.outcome = "skipped"
                longrepr = report.longrepr
                reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
                result.summary = reason.removeprefix("Skipped: ")[:_MESSAGE_CHARS]
        else:
            result.outcome = "failed" if report.when == "call" else "error"
        evidence = _property(report, EVIDENCE_PROPERTY)
        if evidence is not None:
            loaded = json.loads(evidence)
            result.summary, result.evidence = loaded["summary"], loaded["evidence"]
        elif report.failed and result.summary is None:
            result.summary = report.longreprtext[-_MESSAGE_CHARS:]

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if hasattr(session.config, "workerinput"):  # an xdist worker: the controller reports
            return
        self._judge()
        code = int(exitstatus)
        if self.stale and code == pytest.ExitCode.OK:
            code = int(pytest.ExitCode.TESTS_FAILED)
            session.exitstatus = code
        self.exit_code = code
        if self.report_path is not None:
            self._write(self.report_path)

    def _judge(self) -> None:
        by_clause: dict[str, list[_TestResult]] = {}
        for nodeid in self._tally.order:
            result = self._tally.tests[nodeid]
            if result.clause_id is not None:
                by_clause.setdefault(result.clause_id, []).append(result)
            if result.warning is not None:
                self.warnings.append({"test": nodeid, **result.warning})
        expected = self.expected.ids if self.expected is not None else frozenset()
        for clause in self.catalogue:
            status = _status(by_clause.get(clause.id, []))
            if clause.id in expected and status in (ClauseStatus.PASSED, ClauseStatus.WARNING):
                status = ClauseStatus.UNEXPECTED_PASS
                self.stale.append(clause.id)
            self.statuses[clause.id] = status

    def _write(self, path: Path) -> None:
        by_clause: dict[str, list[_TestResult]] = {}
        unmapped: list[dict[str, Any]] = []
        for nodeid in self._tally.order:
            result = self._tally.tests[nodeid]
            if result.clause_id in self._known:
                by_clause.setdefault(str(result.clause_id), []).append(result)
            else:
                unmapped.append({**result.to_dict(), "clause": result.clause_id})
        expected = self.expected.ids if self.expected is not None else frozenset()
        entries = []
        for clause in self.catalogue:
            results = by_clause.get(clause.id, [])
            first = next((r for r in results if r.outcome in ("failed", "error", "xfailed")), None)
            warned = next((r for r in results if r.warning is not None), None)
            summary: str | None = None
            evidence: Any = None
            if first is not None:
                summary, evidence = first.summary, first.evidence
            elif warned is not None and warned.warning is not None:
                summary, evidence = warned.warning.get("summary"), warned.warning.get("evidence")
            elif results and all(r.outcome == "skipped" for r in results):
                summary = results[0].summary
            entries.append(
                {
                    "id": clause.id,
                    "section": clause.section,
                    "requirement": clause.text,
                    "status": str(self.statuses[clause.id]),
                    "expected_to_fail": clause.id in expected,
                    "summary": summary,
                    "evidence": evidence,
                    "tests": [r.to_dict() for r in results],
                }
            )
        counts = {str(status): 0 for status in ClauseStatus}
        for status in self.statuses.values():
            counts[str(status)] += 1
        document = {
            "format": REPORT_FORMAT,
            "suite": self.suite,
            "target": self.target,
            "contract": CONTRACT,
            "kit_version": __version__,
            "started_at": _utc(self._started_wall),
            "duration_s": round(time.monotonic() - self._started, 3),
            "exit_code": self.exit_code,
            "expected_failures": None
            if self.expected is None
            else {"file": str(self.expected.path), "ids": sorted(expected), "stale": self.stale},
            "counts": counts,
            "clauses": entries,
            "unmapped_tests": unmapped,
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", "utf-8")
        tmp.replace(path)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if hasattr(terminalreporter.config, "workerinput"):
            return
        write = terminalreporter.write_line
        if self.warnings:
            terminalreporter.section("conformance warnings (best effort, never a failure)")
            for warning in self.warnings:
                write(f"WARNING {warning['clause']}: {warning['summary']}")
        if self.stale and self.expected is not None:
            terminalreporter.section("expected failures that passed")
            for clause_id in self.stale:
                write(
                    f"{clause_id} passes now: remove it from {self.expected.path} "
                    "(the run fails until you do, so the list only shrinks)"
                )
        if self.report_path is not None:
            write(f"conformance report (JSON, by clause id): {self.report_path}")


def _status(results: list[_TestResult]) -> ClauseStatus:
    outcomes = {r.outcome for r in results}
    if not results:
        return ClauseStatus.NOT_RUN
    if "failed" in outcomes:
        return ClauseStatus.FAILED
    if "error" in outcomes:
        return ClauseStatus.ERROR
    if "xfailed" in outcomes:
        return ClauseStatus.EXPECTED_FAILURE
    if outcomes == {"skipped"}:
        return ClauseStatus.NOT_CHECKED
    if any(r.warning is not None for r in results):
        return ClauseStatus.WARNING
    return ClauseStatus.PASSED


def _utc(wall: float) -> str:
    return (
        datetime.fromtimestamp(wall, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )
