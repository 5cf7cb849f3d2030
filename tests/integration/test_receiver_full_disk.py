"""A full disk: the receiver answers 503 for what it cannot store, never a 2xx, and loses
nothing it acknowledged (a child process with its file size limited, ``_full_disk_receiver.py``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

CHILD = Path(__file__).resolve().parent / "_full_disk_receiver.py"


def test_what_cannot_be_stored_is_503_and_every_acknowledged_event_is_handed_over(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, str(CHILD), str(tmp_path / "receiver.db")],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["first"] == [200] * 10
    statuses = set(result["full"].values())
    assert 503 in statuses, result["full"]  # the disk was full for some
    assert statuses <= {200, 503}, statuses  # and nothing else was answered
    assert set(result["again"].values()) == {200}
    # Every event answered 200, in either round, reached the handler, once, in order.
    assert result["got"] == list(range(1, 61))
    assert result["stats"]["unavailable"] == list(result["full"].values()).count(503)
    assert "receiver_commit_failed" in done.stderr + done.stdout
