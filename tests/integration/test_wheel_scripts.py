"""Issue 19: the wheel's console scripts, run where only the wheel (and an extra) is installed.

Each test runs ``uv run --isolated --no-project --with WHEEL[extra] SCRIPT`` from a temp
dir outside the checkout, as someone who only installed the distribution would.
``robot-mcp-conformance`` without its extra says so in one line and exits 4 (1 would read
"does not conform"); ``robot-mcp-demo`` runs all its scenarios from the wheel with the
``all`` extra (the wheel carries the sleeper, the brain example and the mailroom document,
decision 0017), and without it names the extra.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from robot_mcp_kit.testing import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

CONFORMANCE_EXTRA_LINE = (
    "robot-mcp-conformance: the 'conformance' extra is not installed (cannot import "
    "'pytest'); install it with: pip install 'robot-mcp-kit[conformance]'"
)


def _lines(proc) -> list[str]:
    return [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]


@pytest.mark.parametrize(
    "argv",
    [("robot-mcp-conformance",), ("python", "-m", "robot_mcp_conformance")],
    ids=["console-script", "python-m"],
)
def test_conformance_without_its_extra_is_one_line_and_exit_4(kit_wheel, uv_isolated, argv):
    """The bare wheel: one line naming the extra and how to install it, exit 4, no traceback."""
    url = f"http://127.0.0.1:{free_port()}/mcp"
    proc = uv_isolated(str(kit_wheel), *argv, url)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert _lines(proc) == [CONFORMANCE_EXTRA_LINE]


def test_conformance_help_works_without_its_extra(kit_wheel, uv_isolated):
    """--help needs nothing but the wheel: it is how one finds out what to install."""
    proc = uv_isolated(str(kit_wheel), "robot-mcp-conformance", "--help")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "usage: robot-mcp-conformance" in proc.stdout


def test_demo_runs_every_scenario_from_the_wheel(kit_wheel, uv_isolated, tmp_path: Path):
    """robot-mcp-demo from the wheel with the all extra, outside any checkout: 8 passed."""
    proc = uv_isolated(f"{kit_wheel}[all]", "robot-mcp-demo", timeout_s=540)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "8 passed, 0 failed" in proc.stdout
    assert "brain killed -9 after #" in proc.stdout  # the wheel's examples/brain.py ran
    assert "fetch-package-mailroom ranked first" in proc.stdout
    # It ran the installed package, not this checkout's.
    where = uv_isolated(
        f"{kit_wheel}[all]",
        "python",
        "-c",
        "import robot_mcp_demo._run as r; print(r.__file__); print(r._DEFAULT_SLEEPER)",
    )
    assert where.returncode == 0, where.stderr
    module, sleeper = where.stdout.split()
    assert "site-packages" in module
    assert Path(sleeper).parent.name == "_examples"
    assert str(Path(__file__).resolve().parents[2]) not in module + sleeper


def test_demo_without_the_all_extra_names_it(kit_wheel, uv_isolated):
    """The bare wheel: robot-mcp-demo says which extra to install, one line, exit 2."""
    proc = uv_isolated(str(kit_wheel), "robot-mcp-demo")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert _lines(proc) == [
        "robot-mcp-demo needs the 'all' extra (fastapi is missing): "
        "uv sync, or pip install 'robot-mcp-kit[all]'"
    ]
