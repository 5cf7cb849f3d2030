"""The ``fake-rvc`` console script: serve the fake and print one line per event.

Secrets come from repeated ``--secret name=value`` and/or ``--config FILE``, an
``mcp.yaml``-style file::

    servers:
      sleeper:
        url: http://127.0.0.1:9100/sse   # ignored by fake-rvc; the brain's entry
        secret: s3cret
      navigation:
        secret_env: NAV_SECRET           # or read the secret from this variable

``--secret`` wins over the file for the same name. Output lines::

    ✓ sleeper slee-1a2b3c #3 progress {"eta_s": 2}
    = sleeper slee-1a2b3c #3 progress duplicate (event_id 5a0e…)
    ✗ 401 bad_signature server=sleeper — X-RVC-Signature does not match …
    ⚡ 503 injected fault server=sleeper
    ↺ sleeper slee-1a2b3c #5 progress repaired through get_task_events

``--faults FILE`` queues a scripted sequence of answers (500, 429 with ``Retry-After``, a
slow answer, a dropped connection; see :mod:`fake_rvc._fault_script`) before fake-rvc
answers normally, and ``--events-jsonl FILE`` writes each verified event to FILE as one line
of JSON as it arrives (``GET /api/fake/events.jsonl`` exports them at any time): for an
author testing a server's retries by hand.

``--repair sleeper=http://127.0.0.1:9100/sse`` turns on repair mode for a server: a gap
in one of its tasks is filled through its ``get_task_events`` tool, and ``POST
/api/fake/reconcile`` asks it ``list_tasks``; ``--reconcile-every 2`` asks every 2 s, so
the page shows each task's state (a task cancelled before its first event posts nothing,
so this is the only way the fake brain learns of it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from fake_rvc._exceptions import ConfigError, FaultError
from fake_rvc._fault_script import load_faults
from fake_rvc._faults import Fault
from fake_rvc._recorder import Recorder
from fake_rvc._records import Attempt, json_line
from robot_mcp_kit import __version__

__all__ = ["format_attempt", "load_config", "main", "parse_secret"]

_EXTRA_HINT = (
    "fake-rvc needs the 'fake' extra (fastapi, uvicorn, pyyaml): pip install 'robot-mcp-kit[fake]'"
)


def parse_secret(text: str) -> tuple[str, str]:
    """Split ``name=value``; both parts non-empty.

    Raises:
        ConfigError: no ``=``, or an empty name or value.
    """
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not name or not value:
        raise ConfigError(f"--secret must look like name=value, got {text!r}.")
    return name, value


def load_config(path: Path, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Read server secrets from an ``mcp.yaml``-style file (see the module docstring).

    Raises:
        ConfigError: unreadable file, bad YAML, or an entry without a usable secret.
    """
    import yaml

    env = os.environ if environ is None else environ
    try:
        data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config {str(path)!r}: {exc.strerror}.") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"config {str(path)!r} is not valid YAML: {first}.") from None
    servers = data.get("servers") if isinstance(data, dict) else None
    if not isinstance(servers, dict) or not servers:
        raise ConfigError(
            f"config {str(path)!r} needs a 'servers:' mapping of name -> {{secret: ...}}."
        )
    secrets: dict[str, str] = {}
    for name, entry in servers.items():
        if not isinstance(name, str) or not name:
            raise ConfigError(f"config {str(path)!r}: server name {name!r} is not a string.")
        if not isinstance(entry, dict):
            raise ConfigError(f"config {str(path)!r}: servers.{name} must be a mapping.")
        secret = entry.get("secret")
        if secret is None and isinstance(entry.get("secret_env"), str):
            secret = env.get(entry["secret_env"])
            if not secret:
                raise ConfigError(
                    f"config {str(path)!r}: servers.{name}.secret_env names "
                    f"{entry['secret_env']!r}, which is unset or empty."
                )
        if not isinstance(secret, str) or not secret:
            raise ConfigError(
                f"config {str(path)!r}: servers.{name} needs a non-empty 'secret' "
                "(or 'secret_env')."
            )
        secrets[name] = secret
    return secrets


def format_attempt(attempt: Attempt) -> str:
    """One human-readable line for one attempt."""
    if attempt.outcome == "accepted":
        payload = json.dumps(attempt.payload, ensure_ascii=False, separators=(", ", ": "))
        if len(payload) > 200:
            payload = payload[:197] + "..."
        line = f"✓ {attempt.server} {attempt.task_id} #{attempt.seq} {attempt.type} {payload}"
        for anomaly in attempt.anomalies:
            evidence = ", ".join(
                f"{k}={v}" for k, v in anomaly.items() if k not in ("kind", "event_id")
            )
            line += f"  ⚠ {anomaly['kind']} ({evidence})"
        return line
    if attempt.outcome == "duplicate":
        return (
            f"= {attempt.server} {attempt.task_id} #{attempt.seq} {attempt.type} "
            f"duplicate (event_id {attempt.event_id})"
        )
    if attempt.outcome == "fault":
        return f"⚡ {attempt.status} injected fault server={attempt.server}"
    if attempt.outcome == "repaired":
        return (
            f"↺ {attempt.server} {attempt.task_id} #{attempt.seq} {attempt.type} "
            "repaired through get_task_events"
        )
    if attempt.outcome == "dropped":
        return f"⚡ dropped connection (injected fault) server={attempt.server}"
    server = ascii(attempt.server)[1:-1] if attempt.server is not None else "-"
    return f"✗ {attempt.status} {attempt.reason} server={server} — {attempt.detail}"


_DESCRIPTION = (
    "A fake of the brain's POST /api/agent/events. Verifies HMAC-signed "
    "TaskEvents, dedupes them, tracks seq per task and prints one line per event. "
    "Point a capability server at it with RVC_CALLBACK_URL="
    "http://HOST:PORT/api/agent/events and RVC_EVENT_SECRET=<its secret>. "
    "Live page at http://HOST:PORT/, JSON inspection under /api/fake/ (see /docs)."
)
_EPILOG = (
    "config file format (mcp.yaml style):  servers: {sleeper: {url: ..., "
    "secret: s3cret}}  — or secret_env: VAR to read the secret from the environment."
)


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fake-rvc", description=_DESCRIPTION, epilog=_EPILOG)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)"
    )
    parser.add_argument(
        "--secret",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a server name and its HMAC secret; repeat for more servers, or for one "
        "server to accept several secrets during a rotation",
    )
    parser.add_argument("--config", type=Path, help="an mcp.yaml-style file of servers")
    parser.add_argument(
        "--repair",
        action="append",
        default=[],
        metavar="NAME=MCP_URL",
        help="repair mode for a server: fill seq gaps through its get_task_events tool at "
        "this MCP URL (…/sse for SSE, else streamable HTTP), and let POST "
        "/api/fake/reconcile ask it list_tasks; repeat for more servers",
    )
    parser.add_argument(
        "--reconcile-every",
        type=float,
        metavar="SECONDS",
        help="with --repair: ask each of those servers list_tasks this often, so the page "
        "shows every task's state, a task cancelled before its first event included",
    )
    parser.add_argument(
        "--faults",
        type=Path,
        metavar="FILE",
        help="a fault script (YAML or JSON): the answers to give, in order, before answering "
        "normally, e.g. faults: [{status: 500}, {status: 429, retry_after_s: 2}, "
        "{delay_s: 3}, {drop: true}]",
    )
    parser.add_argument(
        "--events-jsonl",
        type=Path,
        metavar="FILE",
        help="write each verified event to FILE as one line of JSON as it arrives "
        "(the file is replaced)",
    )
    parser.add_argument(
        "--log-level",
        default="warning",
        choices=["critical", "error", "warning", "info", "debug"],
        help="uvicorn's log level (default warning; event lines are always printed)",
    )
    return parser


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    """Run the ``fake-rvc`` console script; return the exit code."""
    stream = out if out is not None else sys.stdout
    err = sys.stderr
    if hasattr(stream, "reconfigure"):  # never die on a terminal that cannot print ✓
        stream.reconfigure(errors="backslashreplace", line_buffering=True)
    args = _build_parser().parse_args(argv)
    try:
        import fastapi  # noqa: F401
        import uvicorn
        import yaml  # noqa: F401
    except ImportError:
        print(_EXTRA_HINT, file=err)
        return 1

    secrets: dict[str, str | list[str]] = {}
    repair_urls: dict[str, str] = {}
    faults: list[Fault] = []
    try:
        if args.faults is not None:
            faults = load_faults(args.faults)
        if args.config is not None:
            secrets.update(load_config(args.config))
        given: dict[str, list[str]] = {}
        for text in args.secret:
            name, value = parse_secret(text)
            given.setdefault(name, []).append(value)
        for name, values in given.items():
            # Repeated for one server: all are current (a rotation window).
            secrets[name] = values[0] if len(values) == 1 else values
        for text in args.repair:
            name, url = parse_secret(text)
            if not url.startswith(("http://", "https://")):
                raise ConfigError(
                    f"--repair must look like name=http://host:port/sse, got {text!r}."
                )
            repair_urls[name] = url
    except (ConfigError, FaultError) as exc:
        print(f"fake-rvc: {exc}", file=err)
        return 2
    if not secrets:
        print(
            "fake-rvc: no servers configured; pass --secret name=value or --config FILE.",
            file=err,
        )
        return 2
    if not 0 <= args.port <= 65535:
        print(f"fake-rvc: --port must be 0-65535, got {args.port}.", file=err)
        return 2
    if args.reconcile_every is not None and not (repair_urls and args.reconcile_every > 0):
        print(
            "fake-rvc: --reconcile-every needs --repair NAME=MCP_URL and a positive number "
            f"of seconds, got {args.reconcile_every}.",
            file=err,
        )
        return 2

    import uvicorn

    from fake_rvc._app import EVENTS_PATH, create_app
    from fake_rvc._inspect import INSPECT_PATH
    from fake_rvc._server import bind_socket, uvicorn_config

    try:
        sock = bind_socket(args.host, args.port)
    except OSError as exc:
        print(f"fake-rvc: cannot listen on {args.host}:{args.port}: {exc.strerror}.", file=err)
        return 1
    try:
        export = _EventExport(args.events_jsonl) if args.events_jsonl is not None else None
    except OSError as exc:
        sock.close()
        print(
            f"fake-rvc: cannot write --events-jsonl {str(args.events_jsonl)!r}: {exc.strerror}.",
            file=err,
        )
        return 2
    recorder = Recorder()
    recorder.add_listener(lambda attempt: print(format_attempt(attempt), file=stream, flush=True))
    if export is not None:
        recorder.add_listener(lambda attempt: export.write(recorder, attempt))
    recorder.add_faults(faults)
    app = create_app(
        secrets,
        state=recorder,
        repair_urls=repair_urls,
        reconcile_every_s=args.reconcile_every,
    )
    host, port = sock.getsockname()[:2]
    base = f"http://{f'[{host}]' if ':' in host else host}:{port}"
    print(
        f"fake-rvc listening on {base} — events: {base}{EVENTS_PATH} — page: {base}/ — "
        f"servers: {', '.join(sorted(secrets))}",
        file=stream,
        flush=True,
    )
    extras = [f"inspection hook: {base}{INSPECT_PATH}"]
    if faults:
        extras.append(f"{len(faults)} scripted fault(s) queued")
    if export is not None:
        extras.append(f"events to {args.events_jsonl}")
    print("fake-rvc " + " — ".join(extras), file=stream, flush=True)

    class _Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            # End the page's SSE streams at once, or shutdown waits for them to time out.
            recorder.close_streams()
            super().handle_exit(sig, frame)

    server = _Server(uvicorn_config(app, log_level=args.log_level))
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn re-raises the Ctrl-C it handled; we are done
        pass
    finally:
        recorder.close_streams()
        sock.close()
        if export is not None:
            export.close()
    return 0


class _EventExport:
    """``--events-jsonl``: each new verified event, one JSON line, flushed as it arrives."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("w", encoding="utf-8")
        self._lock = threading.Lock()

    def write(self, recorder: Recorder, attempt: Attempt) -> None:
        if attempt.outcome not in ("accepted", "repaired") or attempt.event_id is None:
            return
        event = recorder.event(attempt.event_id)
        if event is None:  # forgotten by a reset meanwhile
            return
        with self._lock:
            if not self._file.closed:
                self._file.write(json_line(event))
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()
