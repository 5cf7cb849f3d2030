"""The receiver suite passes fake_rvc and fails each broken receiver on exactly its clause.

Every module of ``tests/conformance_broken_receivers/`` is the same small receiver, written
from ``docs/contract.md`` alone (``_receiver_base.py``: the standard library and uvicorn),
with one defect (``control.py`` has none). For each case the receiver is served in this
process (uvicorn in a thread, on a free loopback port) and ``robot-mcp-conformance
receiver URL`` runs in a child process, as an author would run it, writing its JSON report
and JUnit XML. The clauses the JSON report calls failed must be exactly the ones the
defect breaks: no more (a sloppy check blaming the wrong clause), no less (a check that
cannot fail); likewise the clauses it could not check and the ones it warned about.
fake_rvc, the reference receiver, passes every clause.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import uvicorn

from robot_mcp_conformance._checks import catalogue
from robot_mcp_conformance._receiver_checks import receiver_clauses

# One run takes 3-5 s (the slow receiver's too: the suite stops after its timed posts);
# the guard is for a hang.
RUN_HANG_GUARD_S = 180.0
pytestmark = [pytest.mark.slow, pytest.mark.timeout(RUN_HANG_GUARD_S + 60)]

REPO = Path(__file__).resolve().parents[2]
BROKEN = REPO / "tests" / "conformance_broken_receivers"
SECRETS = {"sleeper": ["s3cret", "n3xt"]}
SUITE_ARGS = ["--secret", "s3cret", "--server-name", "sleeper", "--second-secret", "n3xt"]
# Short enough that the slow receiver (1 s per event) takes only a few seconds to fail,
# long enough that a healthy receiver on a loaded machine never does (median of 5 posts).
TIME_BUDGET = "0.5"

ALL = frozenset(c.id for c in catalogue(receiver_clauses))
HOOK_CLAUSES = frozenset(
    {
        "receiver.duplicate-processed-once",
        "receiver.acknowledged-is-stored",
        "receiver.refused-not-processed",
        "receiver.gap-reported",
    }
)


@dataclass(frozen=True)
class Case:
    """What the suite must say of one receiver."""

    failed: frozenset[str] = frozenset()
    not_checked: frozenset[str] = frozenset()
    warned: frozenset[str] = frozenset()
    module: str | None = None
    """The receiver module (default: the case's name); "fake_rvc" is the reference."""
    hook: bool = True
    expected_failures: tuple[str, ...] = ()
    """Clause ids written to an --expected-failures file for the run."""
    exit_code: int | None = None
    """Default: 1 when a clause fails, else 0."""
    statuses: dict[str, str] = field(default_factory=dict)
    """Statuses other than failed / not_checked / warning / passed that are expected."""


def _fails(*ids: str) -> frozenset[str]:
    return frozenset(f"receiver.{i}" for i in ids)


CASES: dict[str, Case] = {
    "fake_rvc": Case(module="fake_rvc"),
    # robot_mcp_kit.receiver, built from its public API only (with its inspection hook).
    "kit_receiver": Case(module="kit_receiver"),
    "control": Case(),
    "control_without_hook": Case(module="control", hook=False, not_checked=HOOK_CLAUSES),
    # It accepts the signatures wrong in their last digit, so the timing is not judged.
    "prefix_compare": Case(
        failed=_fails("bad-signature-refused"), not_checked=_fails("constant-time-compare")
    ),
    "empty_old_secret": Case(failed=_fails("wrong-secret-refused")),
    "any_server": Case(failed=_fails("unknown-server-refused")),
    "unsigned_accepted": Case(failed=_fails("missing-header-refused")),
    "no_future_limit": Case(failed=_fails("future-timestamp-refused")),
    "no_age_limit": Case(failed=_fails("stale-timestamp-refused")),
    "narrow_window": Case(failed=_fails("timestamp-window-accepted")),
    "lenient_timestamp": Case(failed=_fails("malformed-timestamp-refused")),
    "reserialized_body": Case(failed=_fails("tampered-body-refused")),
    "non_json_crashes": Case(failed=_fails("non-json-refused")),
    "lax_event": Case(failed=_fails("non-task-event-refused")),
    "unknown_type_refused": Case(failed=_fails("unknown-type-acknowledged")),
    # It acknowledges the unknown type's post with a bad signature and the one without seq.
    "unknown_type_unverified": Case(
        failed=_fails("bad-signature-refused", "non-task-event-refused")
    ),
    "server_mismatch_accepted": Case(failed=_fails("server-mismatch-refused")),
    "no_size_limit": Case(failed=_fails("oversize-refused")),
    "recursive_parser": Case(failed=_fails("deeply-nested-refused")),
    "duplicate_conflict": Case(failed=_fails("duplicate-acknowledged")),
    "duplicate_reprocessed": Case(failed=_fails("duplicate-processed-once")),
    "single_secret": Case(failed=_fails("rotation-accepted")),
    # Its refusal of seq 3 leaves no late event and no gap to judge.
    "gap_refused": Case(
        failed=_fails("gap-accepted"), not_checked=_fails("out-of-order-accepted", "gap-reported")
    ),
    "reorder_refused": Case(failed=_fails("out-of-order-accepted")),
    "gaps_unreported": Case(failed=_fails("gap-reported")),
    "lossy_store": Case(failed=_fails("acknowledged-is-stored")),
    "stores_before_verifying": Case(failed=_fails("refused-not-processed")),
    # Over its time budget: that clause fails and nothing else is checked (the suite stops
    # rather than wait on every post; test_a_receiver_over_its_budget_stops_the_suite).
    "slow": Case(
        failed=_fails("answers-within-budget"),
        not_checked=ALL - _fails("answers-within-budget"),
    ),
    # A warning, never a failure: exit code 0.
    "leaky_compare": Case(warned=_fails("constant-time-compare")),
    # --expected-failures: the listed failure is expected (exit 0) ...
    "prefix_compare_expected": Case(
        module="prefix_compare",
        expected_failures=("receiver.bad-signature-refused",),
        exit_code=0,
        not_checked=_fails("constant-time-compare"),
        statuses={"receiver.bad-signature-refused": "expected_failure"},
    ),
    # ... and a listed clause that passes fails the run, so the list only shrinks.
    "control_with_a_stale_expectation": Case(
        module="control",
        expected_failures=("receiver.bad-signature-refused", "server.seq-contiguous"),
        exit_code=1,
        statuses={"receiver.bad-signature-refused": "unexpected_pass"},
    ),
}


def _load(name: str) -> ModuleType:
    """Import ``tests/conformance_broken_receivers/<name>.py`` (its dir on sys.path)."""
    if str(BROKEN) not in sys.path:
        sys.path.insert(0, str(BROKEN))
    spec = importlib.util.spec_from_file_location(f"broken_receiver_{name}", BROKEN / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def served(app: Any) -> Iterator[str]:
    """Serve an ASGI app on a free loopback port in a thread; yield its base URL."""
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say they are TCP,
    # and without it every answer's body waits ~40 ms for the client's delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="critical", lifespan="auto"))
    thread = threading.Thread(
        target=lambda: server.run(sockets=[sock]), name=f"receiver:{port}", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive(), "the receiver's thread ended before it started"
        assert time.monotonic() < deadline, "the receiver did not start in 20 s"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@contextlib.contextmanager
def receiver(case: Case, name: str) -> Iterator[tuple[str, str]]:
    """The case's receiver, running: (events URL, hook URL)."""
    module = case.module or name
    if module == "fake_rvc":
        from fake_rvc import FakeRvcServer

        with FakeRvcServer(SECRETS) as rvc:  # type: ignore[arg-type]  # lists: a rotation
            yield rvc.events_url, rvc.url + "/api/fake/inspect"
        return
    if module == "kit_receiver":
        with (
            tempfile.TemporaryDirectory(prefix="kit-receiver-") as state,
            served(kit_receiver_app(Path(state) / "receiver.db")) as url,
        ):
            yield url + "/api/agent/events", url + "/inspect"
        return
    app = _load(module).make(SECRETS)
    with served(app) as url:
        yield url + "/api/agent/events", url + "/inspect"


def kit_receiver_app(state: Path) -> Any:
    """The kit's receiver as a brain would build it, with a handler that keeps nothing."""
    from robot_mcp_kit.receiver import Receiver, ServerConfig, TaskUpdate

    async def handle(update: TaskUpdate) -> None:
        return None

    servers = [ServerConfig(name, tuple(keys)) for name, keys in SECRETS.items()]
    return Receiver(servers, handle, state=state).asgi_app(inspect_path="/inspect")


@dataclass(frozen=True)
class Run:
    returncode: int
    report: dict[str, Any]
    junit_failed: frozenset[str]
    output: str

    def statuses(self) -> dict[str, str]:
        return {c["id"]: c["status"] for c in self.report["clauses"]}

    def having(self, status: str) -> frozenset[str]:
        return frozenset(i for i, s in self.statuses().items() if s == status)


def run_suite(url: str, args: list[str], tmp_path: Path, timeout_s: float) -> Run:
    """``robot-mcp-conformance receiver URL args`` in a child process."""
    report, junit = tmp_path / "report.json", tmp_path / "junit.xml"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CONFORMANCE_", "COVERAGE_PROCESS_"))
    }
    # The suite's own plugin only: the dev environment's other pytest plugins (hypothesis,
    # schemathesis, xdist, cov, ...) cost each run about 1 s of CPU and judge nothing here.
    # test_a_receiver_outside_this_repository_is_checked_with_one_command runs the CLI as is.
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    argv = [sys.executable, "-m", "robot_mcp_conformance", "receiver", url, *args]
    argv += ["-p", "robot_mcp_conformance.plugin"]
    argv += ["--report-json", str(report), f"--junitxml={junit}", "-q"]
    with subprocess.Popen(
        argv,
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    ) as proc:
        try:
            output, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            pytest.fail(f"the receiver suite did not finish in {timeout_s:.0f} s\n{output[-6000:]}")
    assert report.is_file(), f"no JSON report (exit {proc.returncode}):\n{output[-6000:]}"
    failed = set()
    # S314: the report is the one our own child process just wrote.
    for testcase in ET.parse(junit).getroot().iter("testcase"):  # noqa: S314
        if testcase.find("failure") is not None or testcase.find("error") is not None:
            failed.add(testcase.get("name", "?"))
    return Run(proc.returncode, json.loads(report.read_text()), frozenset(failed), output[-8000:])


def test_every_broken_receiver_is_in_the_table():
    """Each module of tests/conformance_broken_receivers/ has a case, and vice versa."""
    modules = {p.stem for p in BROKEN.glob("*.py") if not p.stem.startswith("_")}
    used = {case.module or name for name, case in CASES.items()} - {"fake_rvc", "kit_receiver"}
    assert modules == used


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_receiver_suite_fails_exactly_the_clauses_the_defect_breaks(
    name: str, tmp_path: Path, timeout_scale: float
) -> None:
    """The JSON report's failed, not-checked and warned clauses are exactly the case's."""
    case = CASES[name]
    args = [*SUITE_ARGS, "--time-budget", TIME_BUDGET]
    if case.expected_failures:
        listed = tmp_path / "expected-failures.txt"
        listed.write_text("# known failures\n" + "\n".join(case.expected_failures) + "\n")
        args += ["--expected-failures", str(listed)]
    with receiver(case, name) as (url, hook):
        if case.hook:
            args += ["--inspect-url", hook]
        run = run_suite(url, args, tmp_path, RUN_HANG_GUARD_S * timeout_scale)
    statuses = run.statuses()
    assert set(statuses) == ALL, "the report must have one entry per receiver clause"
    expected = dict.fromkeys(ALL, "passed")
    expected.update(dict.fromkeys(case.failed, "failed"))
    expected.update(dict.fromkeys(case.not_checked, "not_checked"))
    expected.update(dict.fromkeys(case.warned, "warning"))
    expected.update(case.statuses)
    wrong = {i: (statuses[i], want) for i, want in expected.items() if statuses[i] != want}
    assert not wrong, f"{name}: clause: (reported, expected) {wrong}\n{run.output}"
    code = case.exit_code if case.exit_code is not None else (1 if case.failed else 0)
    assert run.returncode == code, run.output
    assert run.report["exit_code"] == code
    # JUnit XML agrees: the failing tests are the failed clauses' tests.
    failing_tests = {
        t["test"].rsplit("::", 1)[-1]
        for c in run.report["clauses"]
        if c["status"] == "failed"
        for t in c["tests"]
        if t["outcome"] == "failed"
    }
    assert run.junit_failed == failing_tests, run.output
    for clause_id in case.warned:  # shown in the terminal summary too, not only the JSON
        assert f"WARNING {clause_id}: " in run.output, run.output
    for entry in run.report["clauses"]:
        if entry["status"] in ("failed", "warning"):
            assert entry["summary"], f"{entry['id']}: a failure or warning says what broke"
            assert entry["evidence"] is not None, entry["id"]


def test_a_receiver_outside_this_repository_is_checked_with_one_command(tmp_path: Path) -> None:
    """The contract-only receiver as its own process, and the console script as installed.

    ``_receiver_base.py`` imports nothing of this repository; ``robot-mcp-conformance
    receiver URL ...`` (with every pytest plugin of the environment) passes it, clause by
    clause, exit code 0.
    """
    from robot_mcp_kit.testing import ServiceProcess, free_port

    port = free_port()
    child = ServiceProcess(
        "contract-only receiver",
        [sys.executable, str(BROKEN / "control.py")],
        port,
        env={"RECEIVER_PORT": str(port), "RECEIVER_SECRETS": "navigation=nav-1,nav-2"},
    )
    script = Path(sys.executable).with_name("robot-mcp-conformance")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONFORMANCE_")}
    base = f"http://127.0.0.1:{port}"
    argv = [str(script), "receiver", f"{base}/api/agent/events", "--secret", "nav-1"]
    argv += ["--server-name", "navigation", "--second-secret", "nav-2"]
    argv += ["--inspect-url", f"{base}/inspect", "--report-json", "report.json"]
    try:
        child.start(ready_timeout_s=30)
        proc = subprocess.run(
            argv,
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=RUN_HANG_GUARD_S,
            check=False,
        )
    finally:
        child.close()
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "conformance receiver: " + base in proc.stdout
    assert "test_a_bad_signature_is_refused[last-digit-flipped] PASSED" in proc.stdout
    report = json.loads((tmp_path / "report.json").read_text())
    assert {c["status"] for c in report["clauses"]} == {"passed"}


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONFORMANCE_")}
    return subprocess.run(
        [sys.executable, "-m", "robot_mcp_conformance", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_an_unreachable_receiver_is_one_line_and_exit_code_4(tmp_path: Path) -> None:
    """Nothing listening at the URL: one line naming it, before any test; nothing judged."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/api/agent/events"
    proc = _cli("receiver", url, cwd=tmp_path)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"ERROR: conformance: cannot reach the receiver at {url}: ")


def test_an_unknown_clause_id_in_the_expected_failures_is_a_usage_error(tmp_path: Path) -> None:
    """A typo in the list stops the run (exit 4) naming the line and the closest id."""
    listed = tmp_path / "expected.txt"
    listed.write_text("receiver.bad-signature-refused\n\nreceiver.bad-signatur-refused  # typo\n")
    from fake_rvc import FakeRvcServer

    with FakeRvcServer({"sleeper": "s3cret"}) as rvc:
        proc = _cli("receiver", rvc.events_url, "--expected-failures", str(listed), cwd=tmp_path)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "line 3: 'receiver.bad-signatur-refused' is not a clause id of docs/contract.md" in (
        proc.stderr
    )
    assert "did you mean 'receiver.bad-signature-refused'?" in proc.stderr


def test_a_receiver_url_given_to_the_server_suite_says_how_to_run_the_receiver_suite(
    tmp_path: Path,
) -> None:
    """`pytest --pyargs robot_mcp_conformance --receiver-url URL`: exit 4, one line saying how."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONFORMANCE_")}
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--no-cov", "-n", "0"]
    argv += ["--pyargs", "robot_mcp_conformance", "--receiver-url", "http://127.0.0.1:9/e"]
    proc = subprocess.run(
        argv,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "--receiver-url runs the receiver suite: pytest --pyargs" in proc.stderr


def test_a_receiver_over_its_budget_stops_the_suite(tmp_path: Path, timeout_scale: float) -> None:
    """A receiver slower than --time-budget gets three timed posts, not the whole suite:
    the budget clause fails, every other clause is not checked for one stated reason, and
    the run says it once, in one line, at its end."""
    app = _load("slow").make(SECRETS)
    with served(app) as url:
        args = [*SUITE_ARGS, "--time-budget", TIME_BUDGET, "--inspect-url", url + "/inspect"]
        run = run_suite(url + "/api/agent/events", args, tmp_path, RUN_HANG_GUARD_S * timeout_scale)
    assert run.returncode == 1, run.output
    assert app.acknowledged == 3, "more than half of the 5 timed posts over budget: stop"
    entries = {c["id"]: c for c in run.report["clauses"]}
    assert entries["receiver.answers-within-budget"]["status"] == "failed"
    reasons = {c["summary"] for i, c in entries.items() if i != "receiver.answers-within-budget"}
    assert len(reasons) == 1, reasons
    (reason,) = reasons
    assert reason.startswith("not checked: the receiver answered slower than its time budget")
    assert "budget 0.5 s" in reason
    said = [line for line in run.output.splitlines() if "receiver suite stopped early" in line]
    assert said == [f"receiver suite stopped early: {reason}"], run.output
