"""The public test helpers of ``robot_mcp_kit.testing``: FakeClock, RecordingPoster and
ServiceProcess."""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import UTC, datetime

import pytest

from robot_mcp_kit import Clock, RobotMcpKitError, TaskEvent
from robot_mcp_kit.testing import (
    FakeClock,
    RecordingPoster,
    ServiceProcess,
    ServiceStartError,
    free_port,
)

HTTP_SERVER = (
    "import http.server, sys; "
    "http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), "
    "http.server.SimpleHTTPRequestHandler).serve_forever()"
)


class TestFakeClock:
    async def test_sleep_records_the_pause_and_advances_both_clocks(self):
        """sleep() returns at once, records the pause, and moves time and monotonic."""
        clock = FakeClock(wall0=100.0)
        assert isinstance(clock, Clock)
        await clock.sleep(0.5)
        await clock.sleep(2.0)
        clock.advance(1.0)
        assert clock.sleeps == [0.5, 2.0]
        assert clock.monotonic() == 3.5
        assert clock.time() == 103.5


class TestRecordingPoster:
    async def test_waiting_counts_the_pending_waits(self):
        """waiting is 1 while a wait_for is pending and 0 once the event arrived."""
        poster = RecordingPoster()
        waiter = asyncio.create_task(poster.wait_for("t-1", "task_done"))
        await asyncio.sleep(0)
        assert poster.waiting == 1
        event = TaskEvent(
            event_id="e-1",
            task_id="t-1",
            seq=1,
            type="task_done",
            server="s",
            tool="x",
            ts=datetime(2026, 1, 1, tzinfo=UTC),
            payload={},
        )
        await poster.post(event)
        assert await waiter is event
        assert poster.waiting == 0


class TestServiceProcess:
    def test_url_probe_waits_for_a_2xx_and_stop_reaps_the_child(self, tmp_path):
        """ready=URL: start() returns once GET answers 2xx; stop() reaps; idempotent."""
        port = free_port()
        server = ServiceProcess(
            "http",
            [sys.executable, "-c", HTTP_SERVER, str(port)],
            port,
            cwd=tmp_path,
            ready=f"http://127.0.0.1:{port}/",
            new_process_group=True,
        )
        with server.start(ready_timeout_s=20):
            assert server.pid is not None
            assert os.getpgid(server.pid) == server.pid  # its own process group
        assert server.proc is None
        server.stop()

    def test_callable_probe_and_a_child_that_exits_early(self):
        """A child that exits before the probe passes raises ServiceStartError with its
        exit status and output, which is also a RobotMcpKitError and a RuntimeError."""
        argv = [sys.executable, "-c", "print('bad config'); raise SystemExit(3)"]
        server = ServiceProcess("crash", argv, free_port(), ready=lambda: False)
        with pytest.raises(ServiceStartError) as info:
            server.start(ready_timeout_s=20)
        assert info.value.returncode == 3
        assert "bad config" in info.value.output
        assert isinstance(info.value, RobotMcpKitError)
        assert isinstance(info.value, RuntimeError)
        server.close()

    def test_launch_does_not_wait_and_kill_reaps(self):
        """launch() returns at once; kill() SIGKILLs and reaps the child."""
        argv = [sys.executable, "-c", "import time; time.sleep(60)"]
        server = ServiceProcess("sleeper", argv, free_port()).launch()
        proc = server.proc
        assert proc is not None
        server.kill()
        assert proc.returncode == -9
        server.close()
