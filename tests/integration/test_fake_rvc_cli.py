"""The ``fake-rvc`` console script as a real process: startup, printed lines, bad config."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from fake_rvc import Attempt, ConfigError, format_attempt, load_config, parse_secret
from robot_mcp_kit.models import TaskEvent, new_event_id
from robot_mcp_kit.signing import signed_headers
from robot_mcp_kit.testing import free_port

SCRIPT = Path(sys.executable).parent / "fake-rvc"


class Running:
    """A started fake-rvc process whose stdout lines are read by a thread."""

    def __init__(self, *args: str) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONIOENCODING": "utf-8"}
        self.proc = subprocess.Popen(
            [str(SCRIPT), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            encoding="utf-8",
            env=env,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def expect(self, prefix: str, timeout_s: float = 10.0) -> str:
        deadline = time.monotonic() + timeout_s
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                break
            self.seen.append(line)
            if line.startswith(prefix):
                return line
        raise AssertionError(f"no line starting with {prefix!r}; saw {self.seen!r}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._reader.join(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode


@pytest.fixture
def run_cli():
    started: list[Running] = []

    def start(*args: str) -> Running:
        running = Running(*args)
        started.append(running)
        return running

    yield start
    for running in started:
        running.stop()


SECRET = "s3cret"


def signed_event(seq: int = 3, secret: str = SECRET) -> tuple[bytes, dict[str, str]]:
    event = TaskEvent.model_validate(
        {
            "event_id": new_event_id(),
            "task_id": "slee-1a2b3c",
            "server": "sleeper",
            "tool": "sleep",
            "type": "progress",
            "seq": seq,
            "ts": "2025-12-12T09:33:20.000Z",
            "payload": {"eta_s": 2},
        }
    )
    body = event.model_dump_json().encode()
    return body, signed_headers("sleeper", secret, body, int(time.time()))


def test_cli_prints_a_line_per_verified_and_rejected_event(run_cli):
    """A signed event prints a ✓ line; a bad signature prints ✗ 401 bad_signature."""
    port = free_port()
    cli = run_cli("--port", str(port), "--secret", "sleeper=s3cret")
    banner = cli.expect("fake-rvc listening")
    assert f"http://127.0.0.1:{port}/api/agent/events" in banner
    url = f"http://127.0.0.1:{port}/api/agent/events"

    body, headers = signed_event(seq=1)
    assert httpx.post(url, content=body, headers=headers, timeout=10).status_code == 200
    assert cli.expect("✓") == '✓ sleeper slee-1a2b3c #1 progress {"eta_s": 2}'

    body, headers = signed_event(seq=3, secret="wrong")
    assert httpx.post(url, content=body, headers=headers, timeout=10).status_code == 401
    assert cli.expect("✗").startswith("✗ 401 bad_signature server=sleeper")
    assert cli.stop() == 0
    assert not [line for line in cli.lines.queue if "Traceback" in line]


def test_cli_reads_secrets_from_a_config_file(run_cli, tmp_path):
    """--config with an mcp.yaml-style servers map is enough to verify events."""
    config = tmp_path / "mcp.yaml"
    config.write_text(
        "servers:\n  sleeper:\n    url: http://127.0.0.1:9100/sse\n    secret: s3cret\n"
    )
    port = free_port()
    cli = run_cli("--port", str(port), "--config", str(config))
    cli.expect("fake-rvc listening")
    body, headers = signed_event(seq=1)
    url = f"http://127.0.0.1:{port}/api/agent/events"
    assert httpx.post(url, content=body, headers=headers, timeout=10).status_code == 200
    assert cli.expect("✓").startswith("✓ sleeper slee-1a2b3c #1")


def test_cli_plays_a_fault_script_and_exports_the_events(run_cli, tmp_path):
    """--faults: 500, 429 with Retry-After, a drop, a slow answer, in that order, then the
    normal answers; --events-jsonl: the one event stored, one JSON line, as it arrived."""
    script = tmp_path / "faults.yaml"
    script.write_text(
        "faults:\n"
        "  - status: 500\n"
        "  - {status: 429, retry_after_s: 7}\n"
        "  - drop: true\n"
        "  - delay_s: 0.5\n"
    )
    export = tmp_path / "events.jsonl"
    port = free_port()
    cli = run_cli(
        "--port", str(port), "--secret", "sleeper=s3cret",
        "--faults", str(script), "--events-jsonl", str(export),
    )  # fmt: skip
    cli.expect("fake-rvc listening")
    extras = cli.expect("fake-rvc inspection hook")
    assert "4 scripted fault(s) queued" in extras
    url = f"http://127.0.0.1:{port}/api/agent/events"
    body, headers = signed_event(seq=1)
    with httpx.Client(timeout=10) as client:
        first = client.post(url, content=body, headers=headers)
        second = client.post(url, content=body, headers=headers)
        with pytest.raises(httpx.TransportError):
            client.post(url, content=body, headers=headers)
        started = time.monotonic()
        slow = client.post(url, content=body, headers=headers)
        slow_s = time.monotonic() - started
        again = client.post(url, content=body, headers=headers)
    assert (first.status_code, second.status_code) == (500, 429)
    assert second.headers["retry-after"] == "7"
    assert (slow.status_code, slow.json()["accepted"]) == (200, True)
    assert slow_s >= 0.5
    assert again.json()["duplicate"] is True
    cli.expect("✓ sleeper slee-1a2b3c #1")
    lines = export.read_text().splitlines()
    assert len(lines) == 1
    line = json.loads(lines[0])
    assert line["event"]["seq"] == 1
    assert line["event"]["task_id"] == "slee-1a2b3c"
    assert line["server"] == "sleeper"
    assert cli.stop() == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--secret", "sleeper"], "--secret must look like name=value"),
        ([], "no servers configured"),
        (["--config", "/nonexistent/mcp.yaml"], "cannot read config"),
        (
            ["--secret", "a=b", "--faults", "/nonexistent/faults.yaml"],
            "cannot read the fault script",
        ),
    ],
)
def test_cli_refuses_bad_configuration_in_one_line(args, message):
    """A malformed --secret, no secrets or a missing config file exits 2 with one line."""
    result = subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, timeout=30, check=False
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert message in lines[0]


def test_cli_names_the_extra_when_fastapi_is_missing():
    """Without fastapi, fake-rvc exits 1 with one line naming the 'fake' extra."""
    code = (
        "import sys; sys.modules['fastapi'] = None; "
        "from fake_rvc.__main__ import main; sys.exit(main(['--secret', 'a=b']))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=False
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "fake-rvc needs the 'fake' extra (fastapi, uvicorn, pyyaml): "
        "pip install 'robot-mcp-kit[fake]'"
    ]


class TestConfigParsing:
    def test_parse_secret_keeps_equals_in_the_value(self):
        """Only the first '=' splits name from secret."""
        assert parse_secret("nav=a=b") == ("nav", "a=b")

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("servers: [1, 2]", "needs a 'servers:' mapping"),
            ("servers:\n  nav: 3\n", "must be a mapping"),
            ("servers:\n  nav: {url: x}\n", "needs a non-empty 'secret'"),
            ("servers:\n  nav: {secret_env: NOPE}\n", "unset or empty"),
            ("servers: {nav: [\n", "not valid YAML"),
        ],
    )
    def test_bad_config_files_are_named(self, tmp_path, text, message):
        """Each malformed config raises ConfigError saying what is wrong."""
        path = tmp_path / "mcp.yaml"
        path.write_text(text)
        with pytest.raises(ConfigError, match=message):
            load_config(path, environ={})

    def test_secret_env_reads_the_environment(self, tmp_path):
        """secret_env takes the secret from the named variable."""
        path = tmp_path / "mcp.yaml"
        path.write_text("servers:\n  nav: {secret_env: NAV_SECRET}\n")
        assert load_config(path, environ={"NAV_SECRET": "n4v"}) == {"nav": "n4v"}

    def test_gap_is_shown_on_the_printed_line(self):
        """An accepted event with a gap anomaly prints the evidence after the payload."""
        attempt = Attempt(
            n=2,
            received_wall=0.0,
            received_mono=0.0,
            server="sleeper",
            status=200,
            outcome="accepted",
            task_id="slee-1a2b3c",
            seq=3,
            type="progress",
            payload={},
            anomalies=({"kind": "gap", "expected": 2, "got": 3, "event_id": "e"},),
        )
        assert format_attempt(attempt) == (
            "✓ sleeper slee-1a2b3c #3 progress {}  ⚠ gap (expected=2, got=3)"
        )
