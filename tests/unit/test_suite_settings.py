"""The run's own settings (tests/conftest.py, conftest.py): hang guards, worker groups, -n auto.

Each test runs pytest in a subprocess on a small generated project that carries a copy of
the repository's conftest file under test, so the behaviour is the real hook's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SCALED = """
import pytest

def limit(request):
    marker = request.node.get_closest_marker("timeout")
    if marker is None:
        return None
    return marker.args[0] if marker.args else marker.kwargs["timeout"]

@pytest.mark.timeout(2)
def test_marked(request):
    assert limit(request) == EXPECTED_MARKED

def test_unmarked(request):
    assert limit(request) == EXPECTED_UNMARKED

def test_fixture(timeout_scale):
    assert timeout_scale == EXPECTED_SCALE
"""

GROUPED = """
import pytest

@pytest.fixture(scope="module")
def shared():
    return object()

def test_uses_the_module_fixture(request, shared):
    (group,) = request.node.get_closest_marker("xdist_group").args
    assert group == "test_grouped.py"

def test_uses_function_fixtures_only(request, tmp_path):
    assert request.node.get_closest_marker("xdist_group") is None
"""


def _pytest(
    root: Path, *args: str, scale: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    extra = env or {}
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST_", "COV_", "ROBOT_MCP_TEST_", "PYTHONPYCACHEPREFIX"))
    }
    if scale is not None:
        env["ROBOT_MCP_TEST_TIMEOUT_SCALE"] = scale
    env.update(extra)
    # Only the plugins the hooks work with: a child pytest starts in about a second.
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    plugins = ["-p", "pytest_timeout", "-p", "xdist.plugin", "-p", "no:cacheprovider"]
    return subprocess.run(
        [sys.executable, "-m", "pytest", *plugins, *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _project(tmp_path: Path, source: Path, files: dict[str, str]) -> Path:
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (tmp_path / "conftest.py").write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tmp_path


def _scaled(marked: float, unmarked: float | None, scale: float) -> str:
    return (
        f"EXPECTED_MARKED = {marked!r}\nEXPECTED_UNMARKED = {unmarked!r}\n"
        f"EXPECTED_SCALE = {scale!r}\n" + SCALED
    )


def test_the_scale_multiplies_marked_and_default_limits(tmp_path):
    """ROBOT_MCP_TEST_TIMEOUT_SCALE=3: a 2 s marker becomes 6 s, --timeout=5 becomes 15 s."""
    root = _project(
        tmp_path, REPO / "tests" / "conftest.py", {"test_scaled.py": _scaled(6.0, 15.0, 3.0)}
    )
    proc = _pytest(root, "--timeout=5", "-q", scale="3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 passed" in proc.stdout


def test_without_the_scale_the_limits_stay_as_written(tmp_path):
    """No variable: the marker keeps its 2 s, an unmarked test gets no marker, the factor is 1."""
    root = _project(
        tmp_path, REPO / "tests" / "conftest.py", {"test_scaled.py": _scaled(2, None, 1.0)}
    )
    proc = _pytest(root, "--timeout=5", "-q")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 passed" in proc.stdout


def test_a_scale_that_is_not_a_positive_number_is_a_usage_error(tmp_path):
    """A bad factor stops the run before any test, naming the variable."""
    root = _project(
        tmp_path, REPO / "tests" / "conftest.py", {"test_scaled.py": _scaled(2, None, 1.0)}
    )
    for bad in ("fast", "-2"):
        proc = _pytest(root, "-q", scale=bad)
        assert proc.returncode == 4, (bad, proc.stdout + proc.stderr)
        assert "ROBOT_MCP_TEST_TIMEOUT_SCALE" in proc.stderr


def test_tests_sharing_a_module_fixture_share_an_xdist_group(tmp_path):
    """A module-scoped fixture puts its users in the module's group; other tests go free."""
    root = _project(tmp_path, REPO / "tests" / "conftest.py", {"test_grouped.py": GROUPED})
    proc = _pytest(root, "-q")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed" in proc.stdout


def test_auto_starts_no_workers_for_a_run_of_only_the_conformance_suite(tmp_path):
    """`-n auto` over conformance/ alone runs in one process; other runs keep their workers."""
    files = {
        "conformance/test_suite.py": "def test_here():\n    pass\n",
        "tests/test_own.py": "def test_here():\n    pass\n",
    }
    root = _project(tmp_path, REPO / "conftest.py", files)
    suite = _pytest(root, "-n", "auto", "conformance")
    assert suite.returncode == 0, suite.stdout + suite.stderr
    assert "created:" not in suite.stdout
    own = _pytest(root, "-n", "auto", "tests", "conformance")
    assert own.returncode == 0, own.stdout + own.stderr
    assert "created:" in own.stdout


def test_auto_starts_two_workers_per_core_unless_xdist_s_variable_says(tmp_path):
    """The suite waits as much as it computes: `-n auto` is two workers per core (at most
    16); PYTEST_XDIST_AUTO_NUM_WORKERS, xdist's own setting, still decides when set."""
    files = {"tests/test_own.py": "def test_here():\n    pass\n"}
    root = _project(tmp_path, REPO / "conftest.py", files)
    expected = min(2 * len(os.sched_getaffinity(0)), 16)
    own = _pytest(root, "-n", "auto", "tests")
    assert own.returncode == 0, own.stdout + own.stderr
    assert f"created: {expected}/{expected} workers" in own.stdout
    env = {"PYTEST_XDIST_AUTO_NUM_WORKERS": "3"}
    told = _pytest(root, "-n", "auto", "tests", env=env)
    assert told.returncode == 0, told.stdout + told.stderr
    assert "created: 3/3 workers" in told.stdout


BYTECODE = """
import os
import subprocess
import sys

def test_bytecode_is_cached_here_and_in_children():
    assert "PYTHONDONTWRITEBYTECODE" not in os.environ
    assert sys.dont_write_bytecode is False
    child = subprocess.run(
        [sys.executable, "-c", "import sys; print(sys.dont_write_bytecode, sys.pycache_prefix)"],
        capture_output=True, text=True, check=True,
    )
    assert child.stdout.split() == ["False", os.environ["PYTHONPYCACHEPREFIX"]]
"""


def test_under_dontwritebytecode_the_run_caches_bytecode_under_one_prefix(tmp_path):
    """PYTHONDONTWRITEBYTECODE=1: the run and its children write bytecode, but only under
    .pytest_cache/pycache (the rewritten test module's lands there too)."""
    root = _project(tmp_path, REPO / "conftest.py", {"tests/test_bytecode.py": BYTECODE})
    proc = _pytest(root, "-q", "-n", "0", "tests", env={"PYTHONDONTWRITEBYTECODE": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cached = list((root / ".pytest_cache" / "pycache").rglob("*.pyc"))
    assert any("test_bytecode" in p.name for p in cached), cached
    assert not list((root / "tests").rglob("__pycache__"))
