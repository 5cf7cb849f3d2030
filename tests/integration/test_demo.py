"""``robot-mcp-demo``, the README's first command, run as a user runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from robot_mcp_demo import Scenario, run_demo
from robot_mcp_demo._run import main


def test_demo_runs_every_scenario_and_exits_zero() -> None:
    """The console script starts the three services, runs eight scenarios and exits 0.

    Three of them are the fleet's: robot tokens in two groups, a document and fleet
    administration refused across groups, a lesson shared with a group-mate only. The last
    runs the README's brain (examples/brain.py), kills it with -9 while a task runs, and
    sees its restart reconcile the task's events.
    """
    done = subprocess.run(
        [sys.executable, "-m", "robot_mcp_demo"],
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "8 passed, 0 failed" in done.stdout
    assert "brain killed -9 after #" in done.stdout
    assert "in order, the server's sequence" in done.stdout
    assert "fetch-package-mailroom ranked first" in done.stdout
    assert "rap-1: get_process not_found" in done.stdout
    assert "set_group and set_self_improve not listed to it and forbidden" in done.stdout
    # Nothing but the README's sample: no MCP client warning ("Tool set_group not listed
    # by server, cannot validate any structured content") on either stream.
    for stream in (done.stdout, done.stderr):
        assert "not listed by server" not in stream
        assert "cannot validate" not in stream
    assert done.stderr == ""
    assert "rap-2 recalled it" in done.stdout
    assert "rap-3 got none" in done.stdout


def test_demo_reports_a_failing_scenario(tmp_path: Path) -> None:
    """A sleeper that fails every task fails the trigger scenario; the others still hold.

    The cancel scenario cancels before the body reaches its failure, so it still passes.
    """
    broken = tmp_path / "always_fails.py"
    sleeper = Path(__file__).resolve().parents[2] / "examples" / "sleeper.py"
    # The same sleeper, but every task is asked to fail: the demo must notice.
    broken.write_text(
        sleeper.read_text(encoding="utf-8").replace("fail: bool = False", "fail: bool = True"),
        encoding="utf-8",
    )
    assert "fail: bool = True" in broken.read_text(encoding="utf-8")
    outcomes: list[Scenario] = run_demo(broken)
    verdicts = {o.name.split(":")[1].strip(): o.passed for o in outcomes}
    assert verdicts["eta_below trigger, signed events in order"] is False
    assert verdicts["cancel is idempotent, no task_failed"] is True
    assert verdicts["failure carries a structured TaskFailure"] is True
    assert verdicts["save the mailroom process, find it first"] is True
    assert verdicts["two groups, three robot tokens, self-improve on"] is True
    assert verdicts["another group's document and administration refused"] is True
    assert verdicts["a lesson is recalled by a group-mate, not another group"] is True
    # The brain's scenario holds for a task that fails too: its events are its events.
    assert verdicts["a restart while a task runs is reconciled"] is True
    assert len(outcomes) == 8


def test_demo_refuses_a_missing_sleeper(tmp_path: Path, capsys) -> None:
    """A wrong --sleeper path is one line on stderr and exit code 2."""
    assert main(["--sleeper", str(tmp_path / "nope.py")]) == 2
    err = capsys.readouterr().err
    assert "nope.py" in err
    assert "--sleeper" in err
