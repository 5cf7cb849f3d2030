"""fake-rvc's argument handling and line format, in process (the real process is integration)."""

from __future__ import annotations

import io
import socket

import pytest

from fake_rvc import Attempt, format_attempt
from fake_rvc.__main__ import main


def attempt(**kw) -> Attempt:
    fields = {
        "n": 1,
        "received_wall": 0.0,
        "received_mono": 0.0,
        "server": "sleeper",
        "status": 200,
        "outcome": "accepted",
        "event_id": "e1",
        "task_id": "slee-1a2b3c",
        "seq": 3,
        "type": "progress",
        "payload": {"eta_s": 2},
    }
    fields.update(kw)
    return Attempt(**fields)


@pytest.mark.parametrize(
    ("kw", "line"),
    [
        ({}, '✓ sleeper slee-1a2b3c #3 progress {"eta_s": 2}'),
        ({"outcome": "duplicate"}, "= sleeper slee-1a2b3c #3 progress duplicate (event_id e1)"),
        ({"outcome": "fault", "status": 503}, "⚡ 503 injected fault server=sleeper"),
        (
            {"outcome": "dropped", "status": None},
            "⚡ dropped connection (injected fault) server=sleeper",
        ),
        (
            {"outcome": "rejected", "status": 401, "reason": "bad_signature", "detail": "No."},
            "✗ 401 bad_signature server=sleeper — No.",
        ),
        (
            {
                "outcome": "rejected",
                "status": 400,
                "reason": "invalid_header",
                "server": "a\x01",
                "detail": "d",
            },
            "✗ 400 invalid_header server=a\\x01 — d",
        ),
    ],
)
def test_each_outcome_prints_one_readable_line(kw, line):
    """Accepted, duplicate, fault, dropped and rejected attempts each print one line."""
    assert format_attempt(attempt(**kw)) == line


def test_long_payload_is_shortened():
    """A payload longer than 200 characters is cut with an ellipsis."""
    line = format_attempt(attempt(payload={"x": "y" * 500}))
    assert line.endswith("...")
    assert len(line) < 260


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--secret", "=x"], "--secret must look like name=value"),
        (["--secret", "a=b", "--port", "70000"], "--port must be 0-65535"),
        (["--secret", "a=b", "--reconcile-every", "2"], "--reconcile-every needs --repair"),
        (
            ["--secret", "a=b", "--repair", "a=http://h:1/sse", "--reconcile-every", "0"],
            "a positive number of seconds, got 0.0",
        ),
    ],
)
def test_bad_arguments_exit_2_with_one_line(argv, message, capsys):
    """Bad --secret or --port values exit 2 with one line on stderr."""
    assert main(argv, out=io.StringIO()) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert message in err[0]


def test_busy_port_exits_1_with_one_line(capsys):
    """A port already in use is reported in one line, exit 1."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["--secret", "a=b", "--port", str(port)], out=io.StringIO()) == 1
    assert "cannot listen on 127.0.0.1" in capsys.readouterr().err
