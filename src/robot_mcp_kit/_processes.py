"""Start a service as a real child process, wait until it is ready, stop it by pid.

Public through :mod:`robot_mcp_kit.testing`; stdlib only. One starter for every place
that runs a server as a child (the kit's tests, the memory server's tests and benchmark,
the official-conformance script): they differ only in whether the child gets its own
process group and in how readiness is probed, and both are options here (issue 13).
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from robot_mcp_kit._exceptions import ServiceStartError

__all__ = ["ReadyProbe", "ServiceProcess", "ServiceStartError", "free_port", "wait_for_port"]

ReadyProbe = str | Callable[[], bool]
"""How :meth:`ServiceProcess.start` tells the child is ready: a URL (ready once a GET to it
answers with a 2xx status) or a callable answering True once it is."""


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


def http_ok(url: str, timeout_s: float = 1.0) -> bool:
    """True when a GET to ``url`` (http only) answers with a 2xx status; never raises."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=timeout_s)
    try:
        conn.request("GET", parts.path or "/")
        status = conn.getresponse().status
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()
    return 200 <= status < 300


@dataclass
class ServiceProcess:
    """One child service: its argv, environment, port, and how to tell it is ready.

    Args:
        name: names the child in error messages.
        argv: the command.
        port: the port it listens on (the default readiness probe connects to it).
        env: variables set over the inherited environment (over nothing when
            ``inherit_env`` is False).
        host: the host of the default readiness probe.
        new_process_group: start the child in its own session and process group, and
            signal the whole group when stopping it (a child that spawns workers; a
            terminal's Ctrl-C not reaching it). Added in 0.1.0.
        ready: the readiness probe: None (the port accepts a TCP connection), a URL
            (a GET answers 2xx, e.g. ``/healthz``) or a callable returning True once the
            child is ready. Added in 0.1.0.
        inherit_env: False starts the child with ``env`` only (a caller that scrubs
            variables builds the whole environment). Added in 0.1.0.
        cwd: the child's working directory. Added in 0.1.0.
        output: where stdout and stderr go: a binary file the caller opened for writing
            and closes (e.g. a log under ``tmp_path``); by default an anonymous temporary
            file, gone when the process is closed. Added in 0.1.0.

    Output (stdout and stderr together) is kept so a failure can quote it
    (:meth:`log_tail`, :meth:`log_text`). ``stop()`` is idempotent and always reaps the
    child. Not thread-safe.
    """

    name: str
    argv: list[str]
    port: int
    env: dict[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"
    proc: subprocess.Popen[bytes] | None = None
    new_process_group: bool = False
    ready: ReadyProbe | None = None
    inherit_env: bool = True
    cwd: str | os.PathLike[str] | None = None
    output: IO[bytes] | None = None
    _temp_output: IO[bytes] | None = None

    def start(self, ready_timeout_s: float = 30.0) -> ServiceProcess:
        """Start the child and return once it is ready (see ``ready``).

        Raises:
            ServiceStartError: the child exited, or was not ready within the timeout; the
                message ends with its last output lines.
        """
        return self.launch().wait_ready(ready_timeout_s)

    def launch(self) -> ServiceProcess:
        """Start the child and return at once, without waiting for it to be ready.

        For a test of a child that must refuse to start (then ``proc.wait()``), or one that
        probes readiness itself. Added in 0.1.0.
        """
        env = {**os.environ, **self.env} if self.inherit_env else dict(self.env)
        output = self.output
        if output is None:
            if self._temp_output is None:
                self._temp_output = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
            output = self._temp_output
        self.proc = subprocess.Popen(
            self.argv,
            env=env,
            cwd=self.cwd,
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=self.new_process_group,
        )
        return self

    def wait_ready(self, timeout_s: float = 30.0) -> ServiceProcess:
        """Poll the readiness probe until it passes; stop the child if it never does.

        Raises:
            ServiceStartError: the child exited, or was not ready within ``timeout_s``.
        Added in 0.1.0.
        """
        proc = self.proc
        if proc is None:
            raise ServiceStartError(f"{self.name} was not launched; call start() or launch().")
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                tail = self.log_tail()
                raise ServiceStartError(
                    f"{self.name} exited with code {proc.returncode} before it was ready "
                    f"({self._describe_probe()}).\n{tail}",
                    service=self.name,
                    returncode=proc.returncode,
                    output=tail,
                )
            if self._is_ready():
                return self
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        tail = self.log_tail()
        self.stop()
        raise ServiceStartError(
            f"{self.name} was not ready ({self._describe_probe()}) within "
            f"{timeout_s:.0f} s.\n{tail}",
            service=self.name,
            output=tail,
        )

    @property
    def pid(self) -> int | None:
        """The running child's pid; None before ``start()`` and after ``stop()``."""
        return None if self.proc is None else self.proc.pid

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM the child (its group with ``new_process_group``), SIGKILL it after
        ``grace_s``, and reap it. Idempotent."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            self._signal(proc, signal.SIGTERM)
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self._signal(proc, signal.SIGKILL)
                proc.wait(timeout=grace_s)
        else:
            proc.wait()

    def kill(self, timeout_s: float = 10.0) -> None:
        """SIGKILL the child at once (no shutdown code runs) and reap it. Idempotent.

        Added in 0.1.0, for tests of what a crash leaves behind.
        """
        proc, self.proc = self.proc, None
        if proc is not None:
            if proc.poll() is None:
                self._signal(proc, signal.SIGKILL)
            proc.wait(timeout=timeout_s)

    def close(self) -> None:
        """Stop the child and discard the anonymous output file (a caller's ``output`` is
        the caller's to close)."""
        self.stop()
        if self._temp_output is not None:
            self._temp_output.close()
            self._temp_output = None

    def log_text(self) -> str:
        """Everything the child has written so far (stdout and stderr), as text."""
        if self.output is not None:
            self.output.flush()
            name = getattr(self.output, "name", None)
            if not isinstance(name, str):
                return ""
            with contextlib.suppress(OSError):
                return Path(name).read_text(encoding="utf-8", errors="replace")
            return ""
        if self._temp_output is None:
            return ""
        self._temp_output.seek(0)
        return self._temp_output.read().decode("utf-8", errors="replace")

    def log_tail(self, lines: int = 15) -> str:
        """Return the last ``lines`` lines of the child's output."""
        return "\n".join(self.log_text().splitlines()[-lines:]) or "(no output)"

    def __enter__(self) -> ServiceProcess:
        """Start the child unless it is running already (``with sp.start(timeout):``)."""
        return self if self.proc is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------------

    def _is_ready(self) -> bool:
        probe = self.ready
        if probe is None:
            return wait_for_port(self.host, self.port, 0.2)
        if isinstance(probe, str):
            return http_ok(probe)
        return bool(probe())

    def _describe_probe(self) -> str:
        probe = self.ready
        if probe is None:
            return f"listening on {self.host}:{self.port}"
        if isinstance(probe, str):
            return f"GET {probe} answering 2xx"
        return f"{getattr(probe, '__name__', 'the readiness probe')} answering True"

    def _signal(self, proc: subprocess.Popen[bytes], signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            if self.new_process_group:
                os.killpg(proc.pid, signum)
            else:
                proc.send_signal(signum)
