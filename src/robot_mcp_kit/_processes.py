"""Start a service as a real child process, wait until it listens, stop it by pid.

Public through :mod:`robot_mcp_kit.testing`; stdlib only.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import IO

__all__ = ["ServiceProcess", "ServiceStartError", "free_port", "wait_for_port"]


class ServiceStartError(RuntimeError):
    """A child service exited or never listened; the message ends with its last log lines."""


def free_port(host: str = "127.0.0.1") -> int:
    """Return a port the OS just reported free on ``host`` (bind to port 0, then release)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for_port(host: str, port: int, timeout_s: float) -> bool:
    """Poll until ``host:port`` accepts a TCP connection; False after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


@dataclass
class ServiceProcess:
    """One child service: its argv, extra environment and port.

    Output (stdout and stderr) goes to an anonymous temporary file (gone when the process
    is stopped) so a failure can quote it. ``stop()`` is idempotent and always reaps the child.
    """

    name: str
    argv: list[str]
    port: int
    env: dict[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"
    proc: subprocess.Popen[bytes] | None = None
    _output: IO[bytes] | None = None

    def start(self, ready_timeout_s: float = 30.0) -> ServiceProcess:
        """Start the child and return once its port accepts connections.

        Raises:
            ServiceStartError: the child exited, or did not listen within the timeout.
        """
        env = {**os.environ, **self.env}
        self._output = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            self.argv,
            env=env,
            stdout=self._output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + ready_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServiceStartError(
                    f"{self.name} exited with code {self.proc.returncode} before listening "
                    f"on {self.host}:{self.port}.\n{self.log_tail()}"
                )
            if wait_for_port(self.host, self.port, 0.2):
                return self
        self.stop()
        raise ServiceStartError(
            f"{self.name} did not listen on {self.host}:{self.port} within "
            f"{ready_timeout_s:.0f} s.\n{self.log_tail()}"
        )

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM the child, SIGKILL it after ``grace_s``, and reap it."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=grace_s)

    def close(self) -> None:
        """Stop the child and discard its captured output."""
        self.stop()
        if self._output is not None:
            self._output.close()
            self._output = None

    def log_tail(self, lines: int = 15) -> str:
        """Return the last ``lines`` lines of the child's output."""
        if self._output is None:
            return "(no output)"
        self._output.seek(0)
        text = self._output.read().decode("utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:]) or "(no output)"
