"""The server under test when the suite starts it (``--server-cmd``, or the bundled sleeper).

:class:`ServerProcess` starts the command through :class:`robot_mcp_kit.testing.ServiceProcess`
in its own process group with ``RVC_CALLBACK_URL``, ``RVC_EVENT_SECRET``, ``MCP_TRANSPORT``
(``sse`` unless ``--transport streamable-http``), ``MCP_HOST`` and ``MCP_PORT`` set (the
caller builds that environment), waits until the port answers and stops the group it
started. Its output goes to a temporary log file, quoted when it fails to start.
"""

from __future__ import annotations

import contextlib
import shlex
import tempfile
from pathlib import Path

from robot_mcp_conformance._config import Transport
from robot_mcp_conformance._exceptions import ServerStartError
from robot_mcp_kit.testing import ServiceProcess, ServiceStartError

__all__ = ["ServerProcess"]


class ServerProcess:
    """The server under test started by the suite, in its own process group."""

    def __init__(
        self,
        argv: tuple[str, ...],
        env: dict[str, str],
        port: int,
        transport: Transport = "sse",
    ) -> None:
        self.argv = argv
        self.env = env
        self.port = port
        self.transport: Transport = transport
        path = "/sse" if transport == "sse" else "/mcp"
        self.url = f"http://127.0.0.1:{port}{path}"
        self._log = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed in stop()
            prefix="conformance-server-", suffix=".log", delete=False
        )
        self.log_path = Path(self._log.name)
        self._service = ServiceProcess(
            name="the server under test",
            argv=list(argv),
            port=port,
            env=env,
            inherit_env=False,
            new_process_group=True,
            output=self._log,
        )

    def start(self, timeout_s: float) -> ServerProcess:
        """Start the process and return once its port accepts connections.

        Raises:
            ServerStartError: (a ``RuntimeError``) the process exited, or the port stayed
                closed for ``timeout_s``; the message quotes the end of the server's output.
            OSError: the command cannot be run at all (not found, not executable).
        """
        try:
            self._service.start(ready_timeout_s=timeout_s)
        except ServiceStartError as exc:
            command = shlex.join(self.argv)
            if exc.returncode is not None:
                raise ServerStartError(
                    f"the server under test exited with status {exc.returncode} before "
                    f"answering on port {self.port}; command: {command}\n{self.output_tail()}"
                ) from None
            raise ServerStartError(
                f"the server under test did not answer on 127.0.0.1:{self.port} within "
                f"{timeout_s:.0f} s; command: {command}\n{self.output_tail()}"
            ) from None
        return self

    def output_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines the server printed."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no server output)"
        tail = text.splitlines()[-lines:]
        return "server output (last lines):\n" + "\n".join("  | " + line for line in tail)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the process group this object started (TERM, then KILL). Idempotent."""
        self._service.stop(timeout_s)
        self._service.close()
        if not self._log.closed:
            self._log.close()

    def remove_log(self) -> None:
        """Delete the log file (after a clean run)."""
        with contextlib.suppress(OSError):
            self.log_path.unlink()
