"""What the suite drives and how: :class:`Config`, built from the command line.

Exactly one target: ``--server-url`` (a running server) or ``--server-cmd`` (the suite
starts it); neither means the bundled sleeper of a checkout. The sleeper's tool and
argument sets are the defaults of the task options.
"""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from robot_mcp_conformance._exceptions import ConfigError

__all__ = [
    "CALL_BUDGET_S",
    "DEFAULT_CALLBACK_PORT",
    "DEFAULT_SECRET",
    "DEFAULT_SERVER_NAME",
    "SLEEPER_CANCEL_ARGS",
    "SLEEPER_FAIL_ARGS",
    "SLEEPER_INPUT_ARGS",
    "SLEEPER_PATH",
    "SLEEPER_START_ARGS",
    "SLEEPER_START_TOOL",
    "TRANSPORTS",
    "Config",
    "Transport",
    "parse_json_object",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
SLEEPER_PATH = REPO_ROOT / "examples" / "sleeper.py"
"""The bundled sleeper of a checkout of this repository (absent from an installed wheel)."""

Transport = Literal["sse", "streamable-http"]
TRANSPORTS: tuple[Transport, ...] = ("sse", "streamable-http")

DEFAULT_SECRET = "s3cret"
DEFAULT_SERVER_NAME = "sleeper"
DEFAULT_CALLBACK_PORT = 8765
"""Where fake_rvc listens when ``--server-url`` is given without ``--callback-port``."""

SLEEPER_START_TOOL = "sleep_task"
SLEEPER_START_ARGS: dict[str, Any] = {"duration_s": 1, "tick_s": 0.2}
SLEEPER_FAIL_ARGS: dict[str, Any] = {"duration_s": 0.4, "tick_s": 0.2, "fail": True}
SLEEPER_CANCEL_ARGS: dict[str, Any] = {"duration_s": 30, "tick_s": 0.2}
SLEEPER_INPUT_ARGS: dict[str, Any] = {"duration_s": 0.4, "tick_s": 0.2, "confirm": True}

CALL_BUDGET_S = 30.0
"""The consumer's per-call timeout (kit spec Appendix A: "expect a ~30 s call timeout")."""


def parse_json_object(option: str, text: str | None) -> dict[str, Any] | None:
    """Parse an option's JSON object, or None when the option is unset.

    Raises:
        ConfigError: the text is not JSON, or not a JSON object.
    """
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{option} must be a JSON object, got {text!r}: {exc}.") from None
    if not isinstance(value, dict):
        raise ConfigError(
            f"{option} must be a JSON object like '{{\"duration_s\": 1}}', got {text!r}."
        )
    return value


@dataclass(frozen=True)
class Config:
    """What the suite drives and how (built from the command line by ``conftest.py``).

    Exactly one of ``server_url`` and ``server_cmd`` is set: a running server the suite
    connects to, or the argv of one the suite starts (the sleeper by default).
    ``callback_port`` 0 means a free port (only with ``server_cmd``).
    """

    server_url: str | None
    server_cmd: tuple[str, ...] | None
    secret: str
    callback_port: int
    server_name: str
    start_tool: str
    start_args: dict[str, Any]
    fail_args: dict[str, Any] | None
    cancel_args: dict[str, Any] | None
    input_args: dict[str, Any] | None = None
    """Arguments of a task that asks for input (contract §11); None: not judged."""
    startup_timeout_s: float = 30.0
    task_timeout_s: float = 20.0
    defaulted: bool = field(default=False)
    """True when no target was given and the suite runs the bundled sleeper."""
    transport: Transport | None = None
    """``--transport``: None means detect it from the URL (``--server-cmd``: SSE)."""
    bearer_token: str | None = None
    """``--bearer-token``: sent as ``Authorization: Bearer ...`` on every request of the
    suite (a server with authentication); None: no header."""
    other_bearer_token: str | None = None
    """``--other-bearer-token``: a second principal's token, for the task-ownership clause
    (§13); None: that clause is not judged."""

    def auth_headers(self, *, other: bool = False) -> dict[str, str]:
        """The ``Authorization`` header of the suite's principal (or the other one)."""
        token = self.other_bearer_token if other else self.bearer_token
        return {} if token is None else {"Authorization": f"Bearer {token}"}

    @classmethod
    def build(
        cls,
        *,
        server_url: str | None,
        server_cmd: str | None,
        secret: str | None,
        callback_port: str | int | None,
        server_name: str | None,
        start_tool: str | None,
        start_args: str | None,
        fail_args: str | None,
        cancel_args: str | None,
        input_args: str | None = None,
        task_timeout_s: str | float | None = None,
        transport: str | None = None,
        sleeper_path: Path | None = None,
        bearer_token: str | None = None,
        other_bearer_token: str | None = None,
    ) -> Config:
        """Validate the raw option values and fill in the documented defaults.

        Without ``start_tool`` the sleeper's tool and argument sets are the defaults;
        with it, ``start_args`` defaults to ``{}`` and the failure/cancel sets to none.

        ``sleeper_path`` is where the bundled sleeper is looked for (default
        :data:`SLEEPER_PATH`; a test passes a missing file to play an installed wheel).

        Raises:
            ConfigError: contradictory or malformed options, with what is valid.
        """
        sleeper = SLEEPER_PATH if sleeper_path is None else sleeper_path
        server_url = (server_url or "").strip() or None
        cmd_text = (server_cmd or "").strip() or None
        if server_url and cmd_text:
            raise ConfigError(
                "--server-url and --server-cmd are alternatives: give the URL of a running "
                "server, or the command the suite should start, not both."
            )
        if server_url and not server_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"--server-url must be the server's SSE or streamable-HTTP endpoint, e.g. "
                f"http://127.0.0.1:9100/sse or http://127.0.0.1:9100/mcp; got {server_url!r}."
            )
        chosen = (transport or "").strip().lower() or "auto"
        if chosen not in ("auto", *TRANSPORTS):
            raise ConfigError(
                f"--transport must be auto, sse or streamable-http, got {transport!r}."
            )
        defaulted = not server_url and not cmd_text
        if defaulted and not sleeper.is_file():
            raise ConfigError(
                "no server to test: give --server-url URL (a running server, SSE or "
                "streamable HTTP) or --server-cmd CMD (the suite starts it)."
            )
        argv: tuple[str, ...] | None = None
        if cmd_text:
            argv = tuple(shlex.split(cmd_text))
            if not argv:
                raise ConfigError("--server-cmd is empty.")
        elif defaulted:
            argv = (sys.executable, str(sleeper))

        if callback_port is None or callback_port == "":
            port = DEFAULT_CALLBACK_PORT if server_url else 0
        else:
            try:
                port = int(callback_port)
            except ValueError:
                raise ConfigError(
                    f"--callback-port must be a port number, got {callback_port!r}."
                ) from None
            if not 0 <= port < 65536:
                raise ConfigError(f"--callback-port must be 0-65535, got {port}.")
        if server_url and port == 0:
            raise ConfigError(
                "--callback-port 0 (a free port) only works with --server-cmd: a server "
                "started by someone else must already know where fake_rvc listens."
            )

        tool = (start_tool or "").strip() or None
        if tool is None:
            start = parse_json_object("--start-args", start_args) or dict(SLEEPER_START_ARGS)
            fail = parse_json_object("--fail-args", fail_args)
            cancel = parse_json_object("--cancel-args", cancel_args)
            fail = dict(SLEEPER_FAIL_ARGS) if fail is None else fail
            cancel = dict(SLEEPER_CANCEL_ARGS) if cancel is None else cancel
            asks = parse_json_object("--input-args", input_args)
            asks = dict(SLEEPER_INPUT_ARGS) if asks is None else asks
            tool = SLEEPER_START_TOOL
        else:
            start = parse_json_object("--start-args", start_args) or {}
            fail = parse_json_object("--fail-args", fail_args)
            cancel = parse_json_object("--cancel-args", cancel_args)
            asks = parse_json_object("--input-args", input_args)

        timeout = 20.0
        if task_timeout_s not in (None, ""):
            try:
                timeout = float(task_timeout_s)
            except ValueError:
                raise ConfigError(
                    f"--task-timeout must be seconds, got {task_timeout_s!r}."
                ) from None
            if not timeout > 0:
                raise ConfigError(f"--task-timeout must be > 0, got {timeout}.")

        token = (bearer_token or "").strip() or None
        other = (other_bearer_token or "").strip() or None
        for option, value in (("--bearer-token", token), ("--other-bearer-token", other)):
            if value is not None and not (value.isascii() and value.isprintable()):
                raise ConfigError(
                    f"{option} must be printable ASCII without spaces (it is sent in an "
                    "Authorization header); check for a pasted line break or non-ASCII "
                    "character."
                )
            if value is not None and " " in value:
                raise ConfigError(
                    f"{option} must be the bare token: no spaces, no 'Bearer ' prefix."
                )
        if other is not None and token is None:
            raise ConfigError(
                "--other-bearer-token needs --bearer-token: the task-ownership clause starts "
                "tasks as one principal and looks at them as another."
            )
        if other is not None and other == token:
            raise ConfigError(
                "--other-bearer-token is the same token as --bearer-token; give a token of "
                "another principal (another client or subject)."
            )

        return cls(
            server_url=server_url,
            server_cmd=argv,
            secret=secret or DEFAULT_SECRET,
            callback_port=port,
            server_name=(server_name or "").strip() or DEFAULT_SERVER_NAME,
            start_tool=tool,
            start_args=start,
            fail_args=fail,
            cancel_args=cancel,
            input_args=asks,
            task_timeout_s=timeout,
            defaulted=defaulted,
            transport=None if chosen == "auto" else cast("Transport", chosen),
            bearer_token=token,
            other_bearer_token=other,
        )

    @property
    def long_args(self) -> dict[str, Any]:
        """Arguments for a task that runs long enough to be cancelled."""
        return dict(self.cancel_args if self.cancel_args is not None else self.start_args)

    def describe_target(self) -> str:
        """One line naming the server under test."""
        if self.server_url:
            return self.server_url
        assert self.server_cmd is not None
        what = "the bundled sleeper" if self.defaulted else "--server-cmd"
        return f"{shlex.join(self.server_cmd)} ({what}, started by the suite)"
