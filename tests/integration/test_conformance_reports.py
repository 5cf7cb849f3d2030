"""The server suite's reports a CI keeps: the JSON report and --expected-failures.

(The receiver suite's are proven by ``test_receiver_conformance.py``; the JSON report of the
server suite against every broken server by ``test_conformance_catches_broken_servers.py``.)
Each case runs two clauses of the suite against a broken server in a child process, with
an expected-failures file naming the clause its defect breaks.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
BROKEN = REPO / "tests" / "conformance_broken"
TWO_CLAUSES = "test_seq_is_contiguous_from_1 or test_event_ids_are_unique_uuid4"


def _run(server: str, tmp_path: Path, timeout_scale: float) -> tuple[int, dict, str]:
    listed = tmp_path / "expected-failures.txt"
    listed.write_text("# the seq gap is being fixed (issue 123)\n- server.seq-contiguous\n")
    report = tmp_path / "report.json"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CONFORMANCE_", "COVERAGE_PROCESS_"))
    }
    argv = [sys.executable, "-m", "pytest", "conformance", "-p", "no:cacheprovider", "--no-cov"]
    argv += ["-n", "0", "-q", "-k", TWO_CLAUSES]
    argv += ["--server-cmd", shlex.join([sys.executable, str(BROKEN / f"{server}.py")])]
    argv += ["--start-args", '{"duration_s": 0.5, "tick_s": 0.1}']
    argv += ["--expected-failures", str(listed), "--report-json", str(report)]
    proc = subprocess.run(
        argv,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240 * timeout_scale,
        check=False,
    )
    output = proc.stdout[-5000:] + proc.stderr[-2000:]
    assert report.is_file(), output
    return proc.returncode, json.loads(report.read_text()), output


@pytest.mark.parametrize("server", ["seq_gap", "control"])
def test_expected_failures_pass_the_run_and_a_stale_entry_fails_it(
    server: str, tmp_path: Path, timeout_scale: float
) -> None:
    """seq_gap fails the listed clause: exit 0, "expected_failure". control passes it: the
    entry is stale, exit 1, and the summary says to remove it."""
    code, report, output = _run(server, tmp_path, timeout_scale)
    statuses = {c["id"]: c["status"] for c in report["clauses"]}
    assert report["suite"] == "server"
    assert statuses["server.event-id-unique"] == "passed"
    assert {
        s
        for i, s in statuses.items()
        if i not in ("server.seq-contiguous", "server.event-id-unique")
    } == {"not_run"}
    if server == "seq_gap":
        assert code == 0, output
        assert statuses["server.seq-contiguous"] == "expected_failure"
        entry = next(c for c in report["clauses"] if c["id"] == "server.seq-contiguous")
        assert "got seqs [1, 2, 4" in entry["summary"]
        assert entry["evidence"]["seqs"][:3] == [1, 2, 4]
        assert "1 xfailed" in output
    else:
        assert code == 1, output
        assert statuses["server.seq-contiguous"] == "unexpected_pass"
        assert report["expected_failures"]["stale"] == ["server.seq-contiguous"]
        assert "server.seq-contiguous passes now: remove it from" in output
    assert report["exit_code"] == code
