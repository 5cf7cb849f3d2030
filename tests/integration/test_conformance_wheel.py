"""Issue 12: the suite and the kit, used from a project that only installed the wheel.

Once per session: build the wheel, make a temporary project outside the repository with a
fresh venv holding ``robot-mcp-kit[conformance]`` from that wheel (and mypy), copy the
sleeper and one broken server into it, and run everything from there, with no checkout on
``sys.path``. Whatever mcp the venv resolved (today 2.x) serves the sleeper and the suite's
client; the repository's own environment covers mcp 1.x.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from robot_mcp_kit import __version__
from robot_mcp_kit.testing import ServiceProcess, free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]
UV = shutil.which("uv") or str(Path.home() / ".local" / "bin" / "uv")

SHORT_TASKS = [
    "--start-args",
    '{"duration_s": 0.5, "tick_s": 0.1}',
    "--fail-args",
    '{"duration_s": 0.3, "tick_s": 0.1, "fail": true}',
    "--cancel-args",
    '{"duration_s": 30, "tick_s": 0.1}',
]

CONSUMER = '''\
"""A capability server's code, as its author writes it against the installed kit."""

from __future__ import annotations

from robot_mcp_kit import EventPoster, TaskContext, TaskError, TaskInfo, TaskManager
from robot_mcp_kit.fastmcp_ext import ToolErrorReply, detect_framework
from robot_mcp_kit.testing import RecordingPoster


async def body(ctx: TaskContext) -> dict[str, object]:
    await ctx.progress({"percent": 50.0})
    if not ctx.triggers:
        raise TaskError("NO_ROUTE", "There is no route.", suggestions=["ask_operator"])
    return {"arrived": True}


def start(manager: TaskManager) -> TaskInfo | ToolErrorReply:
    return manager.start("navigate_to", body, est_duration_s=3.0)


poster: EventPoster | RecordingPoster = RecordingPoster()
manager = TaskManager("navigation", RecordingPoster())
info: TaskInfo | ToolErrorReply = start(manager)
name: str = detect_framework.__name__
'''


@dataclass(frozen=True)
class Project:
    """The temporary project: its folder, its venv's bin folder and a clean environment."""

    root: Path
    bin: Path
    env: dict[str, str]

    def run(self, *argv: str, timeout_s: float = 240) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(argv),
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )

    @property
    def python(self) -> str:
        return str(self.bin / "python")


@pytest.fixture(scope="session")
def project(tmp_path_factory: pytest.TempPathFactory, kit_wheel: Path) -> Project:
    """A fresh venv outside the repository with the built wheel's conformance extra."""
    base = tmp_path_factory.mktemp("consumer")
    wheel = kit_wheel
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CONFORMANCE_", "VIRTUAL_ENV", "PYTHONPATH", "COV_", "UV_"))
    }
    root = base / "project"
    root.mkdir()
    venv = root / ".venv"
    for argv in (
        [UV, "venv", "--quiet", "--python", sys.executable, str(venv)],
        [
            UV,
            "pip",
            "install",
            "--quiet",
            "--python",
            str(venv / "bin" / "python"),
            f"{wheel}[conformance]",
            "mypy",
        ],
    ):
        proc = subprocess.run(
            argv, cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False
        )
        assert proc.returncode == 0, proc.stderr
    shutil.copy(REPO / "examples" / "sleeper.py", root / "sleeper.py")
    broken = root / "broken"
    broken.mkdir()
    for name in ("_base.py", "seq_gap.py"):
        shutil.copy(REPO / "tests" / "conformance_broken" / name, broken / name)
    (root / "consumer.py").write_text(CONSUMER, encoding="utf-8")
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return Project(root, venv / "bin", env)


@pytest.fixture(scope="session", params=["sse", "streamable-http"])
def sleeper_url(request: pytest.FixtureRequest, project: Project) -> Iterator[tuple[str, int]]:
    """The copied sleeper, run by the project's python, and the port fake_rvc must use."""
    transport: str = request.param
    port, callback_port = free_port(), free_port()
    proc = ServiceProcess(
        f"sleeper-{transport}",
        [project.python, str(project.root / "sleeper.py")],
        port,
        env={
            **project.env,
            "MCP_TRANSPORT": transport,
            "MCP_HOST": "127.0.0.1",
            "MCP_PORT": str(port),
            "RVC_CALLBACK_URL": f"http://127.0.0.1:{callback_port}/api/agent/events",
            "RVC_EVENT_SECRET": "s3cret",
        },
    ).start(ready_timeout_s=60)
    path = "/sse" if transport == "sse" else "/mcp"
    try:
        yield f"http://127.0.0.1:{port}{path}", callback_port
    finally:
        proc.close()


def test_the_suite_is_imported_from_the_venv_not_a_checkout(project):
    """robot_mcp_conformance and robot_mcp_kit resolve inside the venv's site-packages."""
    proc = project.run(
        project.python,
        "-c",
        "import robot_mcp_conformance, robot_mcp_kit; "
        "print(robot_mcp_conformance.__file__); print(robot_mcp_kit.__file__)",
    )
    assert proc.returncode == 0, proc.stderr
    for line in proc.stdout.split():
        assert "site-packages" in line
        assert str(REPO) not in line


def test_pytest_pyargs_passes_against_the_sleeper(project, sleeper_url):
    """pytest --pyargs robot_mcp_conformance --server-url URL: every clause holds."""
    url, callback_port = sleeper_url
    proc = project.run(
        str(project.bin / "pytest"),
        "--pyargs",
        "robot_mcp_conformance",
        "--server-url",
        url,
        "--callback-port",
        str(callback_port),
        "-p",
        "no:cacheprovider",
        "-q",
        *SHORT_TASKS,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert re.search(r"\b(49|5[01]) passed", _summary(proc.stdout)), proc.stdout[-2000:]


def test_console_script_passes_against_the_sleeper(project, sleeper_url):
    """robot-mcp-conformance URL prints the clause-by-clause report and exits 0."""
    url, callback_port = sleeper_url
    proc = project.run(
        str(project.bin / "robot-mcp-conformance"),
        url,
        "--callback-port",
        str(callback_port),
        *SHORT_TASKS,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "test_seq_is_contiguous_from_1 PASSED" in proc.stdout
    assert re.search(r"\b(49|5[01]) passed", _summary(proc.stdout)), proc.stdout[-2000:]


def _summary(stdout: str) -> str:
    """pytest's closing line (the counts)."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _broken_cmd(project: Project) -> str:
    return shlex.join([project.python, str(project.root / "broken" / "seq_gap.py")])


def test_pytest_pyargs_fails_against_a_broken_server_naming_the_clause(project):
    """Against seq_gap the run fails, naming the test and the contract section it cites."""
    proc = project.run(
        str(project.bin / "pytest"),
        "--pyargs",
        "robot_mcp_conformance",
        "--server-cmd",
        _broken_cmd(project),
        "-p",
        "no:cacheprovider",
        "-q",
        *SHORT_TASKS,
    )
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "FAILED" in proc.stdout
    assert "test_seq_is_contiguous_from_1" in proc.stdout
    assert "docs/contract.md §" in proc.stdout
    assert re.search(r"\b1 failed, (4\d|50) passed", _summary(proc.stdout)), proc.stdout[-2000:]


def test_console_script_fails_against_a_broken_server_with_a_junit_report(project):
    """robot-mcp-conformance exits 1 and its --junitxml report names the failing clause."""
    report = project.root / "report.xml"
    proc = project.run(
        str(project.bin / "robot-mcp-conformance"),
        "--server-cmd",
        _broken_cmd(project),
        f"--junitxml={report}",
        *SHORT_TASKS,
    )
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "test_seq_is_contiguous_from_1 FAILED" in proc.stdout
    # S314: the report is the one our own subprocess just wrote.
    cases = ET.parse(report).getroot().iter("testcase")  # noqa: S314
    failed = {c.get("name"): c.find("failure") for c in cases if c.find("failure") is not None}
    assert set(failed) == {"test_seq_is_contiguous_from_1"}
    message = failed["test_seq_is_contiguous_from_1"].get("message", "")  # type: ignore[union-attr]
    assert "docs/contract.md §" in message


def test_console_script_holds_the_installed_fake_brain_to_the_receiver_suite(project):
    """Issue 23: `robot-mcp-conformance receiver` from the wheel passes the wheel's fake-rvc,
    through its inspection hook, and writes the JSON report (rotation not asked: not checked)."""
    port = free_port()
    fake = ServiceProcess(
        "fake-rvc",
        [str(project.bin / "fake-rvc"), "--port", str(port), "--secret", "nav=nav-secret"],
        port,
        env=project.env,
    ).start(ready_timeout_s=60)
    base = f"http://127.0.0.1:{port}"
    try:
        proc = project.run(
            str(project.bin / "robot-mcp-conformance"),
            "receiver",
            f"{base}/api/agent/events",
            "--secret",
            "nav-secret",
            "--server-name",
            "nav",
            "--inspect-url",
            f"{base}/api/fake/inspect",
            "--report-json",
            "receiver.json",
        )
    finally:
        fake.close()
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    report = json.loads((project.root / "receiver.json").read_text())
    statuses = {c["id"]: c["status"] for c in report["clauses"]}
    assert statuses.pop("receiver.rotation-accepted") == "not_checked"
    assert set(statuses.values()) == {"passed"}, statuses


def test_an_unreachable_url_stops_the_run_with_one_line(project):
    """A dead URL: exit 4, and the one line that says so names the URL and the cause."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    proc = project.run(str(project.bin / "robot-mcp-conformance"), url)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    output = proc.stdout + proc.stderr
    # Nothing else: no session header, no test name, no per-test error, no traceback.
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    assert "cannot reach" in lines[0]
    assert url in lines[0]
    assert "ConnectError" in lines[0]


def test_console_script_reports_the_version(project):
    """--version prints the distribution's one version."""
    proc = project.run(str(project.bin / "robot-mcp-conformance"), "--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"robot-mcp-conformance {__version__}"


def test_mypy_strict_checks_a_consumer_against_the_installed_kit(project):
    """mypy --strict type-checks a consumer with the kit's own types (py.typed, no ignores)."""
    proc = project.run(str(project.bin / "mypy"), "--strict", "consumer.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # The kit is really checked, not Any: a wrong call is caught.
    bad = project.root / "bad_consumer.py"
    bad.write_text(
        "from robot_mcp_kit import TaskManager\n"
        "from robot_mcp_kit.testing import RecordingPoster\n"
        "TaskManager('x', RecordingPoster()).start(42, 'not a body')\n",
        encoding="utf-8",
    )
    proc = project.run(str(project.bin / "mypy"), "--strict", "bad_consumer.py")
    assert proc.returncode == 1, proc.stdout
    assert 'Argument 1 to "start" of "TaskManager" has incompatible type "int"' in proc.stdout


def test_the_plugin_leaves_the_projects_own_tests_alone(project):
    """Installed, the plugin is active in every run: the user's tests (with a fixture named
    like one of the suite's) run as before, with no conformance header and no usage error."""
    own = project.root / "own_tests"
    own.mkdir(exist_ok=True)
    (own / "conftest.py").write_text(
        "import pytest\n\n\n@pytest.fixture\ndef client():\n    return 'mine'\n",
        encoding="utf-8",
    )
    (own / "test_mine.py").write_text(
        "def test_my_client(client):\n    assert client == 'mine'\n", encoding="utf-8"
    )
    proc = project.run(str(project.bin / "pytest"), "own_tests", "-q", "-p", "no:cacheprovider")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout
    assert "conformance" not in proc.stdout + proc.stderr
