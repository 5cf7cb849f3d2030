"""``robot-mcp-conformance URL [options]``: hold a running server to the contract.

It runs this package's pytest suite (``pytest --pyargs robot_mcp_conformance``) with the
options given, under a configuration of its own (``_script.ini``: no project ``addopts``,
no cache, the user's conftest files not loaded), prints the clause-by-clause report
(``-v``: one line per requirement, each failure citing its clause of ``docs/contract.md``)
and returns pytest's exit code (:data:`EXIT_CODES`): 0 the server conforms, 1 it does not,
4 the options or the target are unusable (one line naming the cause). Arguments it does not
know are passed to pytest unchanged (``--junitxml=report.xml``, ``-k cancel``, ``-x``...).

``robot-mcp-conformance receiver URL [options]`` does the same for a receiver of events
(the brain's ``POST /api/agent/events``): it runs ``pytest --pyargs
robot_mcp_conformance.receiver --receiver-url URL``.

Both take ``--report-json FILE`` (one entry per clause id) and ``--expected-failures FILE``
(clause ids that may fail); see :mod:`._report`.

Installed without the ``conformance`` extra (pytest, an MCP client, fake_rvc's FastAPI and
uvicorn), it prints one line naming the extra and returns 4: nothing was judged, so the
exit code must not read as "does not conform".
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

from robot_mcp_kit import __version__

__all__ = ["EXIT_CODES", "build_pytest_args", "main"]

_HERE = Path(__file__).resolve().parent
_INI = _HERE / "_script.ini"

EXIT_UNUSABLE = 4
"""pytest's ``USAGE_ERROR``: the options, the target or the installation are unusable."""

EXIT_CODES: tuple[tuple[int, str], ...] = (
    (
        0,
        "conforms: every clause passed or failed as --expected-failures allows (warnings "
        "do not count)",
    ),
    (1, "does not conform: a clause failed, or a clause listed in --expected-failures passed"),
    (2, "interrupted (Ctrl-C, or -x after the first failure)"),
    (3, "internal error of pytest or of the suite"),
    (
        4,
        "unusable: bad options, a target that cannot be reached, an unreadable "
        "--expected-failures file, or the conformance extra not installed",
    ),
    (5, "no test ran (-k or --deselect left nothing)"),
)
"""What each exit code means (pytest's codes; the suite adds the meaning of 1 and 4)."""

_EXTRA_MODULES = ("pytest", "mcp", "fastapi", "uvicorn", "structlog", "yaml")
"""What the ``conformance`` extra brings: the runner, the suite's MCP client, fake_rvc."""

# (flag, metavar, help): each is forwarded to the plugin's option of the same name.
_FORWARDED: tuple[tuple[str, str, str], ...] = (
    ("--transport", "auto|sse|streamable-http", "how to talk to URL (default: detected)"),
    ("--server-cmd", "CMD", "start the server with this command instead of giving a URL"),
    ("--secret", "SECRET", "HMAC secret the server signs with (default s3cret)"),
    ("--callback-port", "PORT", "where fake_rvc listens for the server's events (8765)"),
    ("--server-name", "NAME", "the server's X-RVC-Server name (default sleeper)"),
    ("--start-tool", "TOOL", "the tool that starts a long-running task (sleep_task)"),
    ("--start-args", "JSON", "arguments of a short task that succeeds"),
    ("--fail-args", "JSON", "arguments of a short task that fails"),
    ("--cancel-args", "JSON", "arguments of a task long enough to be cancelled"),
    ("--input-args", "JSON", "arguments of a task that asks for input (contract §11)"),
    ("--task-timeout", "SECONDS", "seconds a short task may take (default 20)"),
    ("--bearer-token", "TOKEN", "bearer token of every request (a server with auth)"),
    (
        "--other-bearer-token",
        "TOKEN",
        "another principal's token: judges task ownership (contract §13)",
    ),
)

# Both suites: forwarded to the plugin's options of the same name.
_REPORT_FLAGS: tuple[tuple[str, str, str], ...] = (
    ("--report-json", "FILE", "write the JSON report, one entry per clause id, to FILE"),
    (
        "--expected-failures",
        "FILE",
        "clause ids that may fail, one per line; a listed clause that passes fails the run",
    ),
)

# The receiver suite's own options (--secret and --server-name are shared with the server's).
_RECEIVER_FLAGS: tuple[tuple[str, str, str], ...] = (
    ("--secret", "SECRET", "the secret the receiver verifies --server-name with (s3cret)"),
    ("--server-name", "NAME", "an X-RVC-Server the receiver is configured for (sleeper)"),
    (
        "--second-secret",
        "SECRET",
        "the server's other secret, if the receiver is configured with two (a rotation)",
    ),
    (
        "--inspect-url",
        "URL",
        "the receiver's inspection hook (docs/contract.md §5.5), if it offers one",
    ),
    ("--time-budget", "SECONDS", "how long an answer may take (default 5)"),
    ("--max-body-bytes", "BYTES", "the receiver's body limit (default 1048576)"),
    ("--timing-pairs", "N", "pairs the best-effort timing check sends (default 40; 0: off)"),
)


def _epilog() -> str:
    return "exit codes: " + "; ".join(f"{code} {text}" for code, text in EXIT_CODES)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="robot-mcp-conformance",
        description=(
            "Hold a task-capable MCP server to the Async Task Contract (docs/contract.md): "
            "the suite starts a fake brain (fake_rvc) on --callback-port, drives the server "
            "at URL over SSE or streamable HTTP, and reports clause by clause. The server "
            "must post its events to http://127.0.0.1:PORT/api/agent/events signed with "
            "--secret. Other arguments go to pytest (e.g. --junitxml=report.xml, -k cancel). "
            "To test a receiver of events instead: robot-mcp-conformance receiver --help."
        ),
        epilog=_epilog(),
    )
    parser.add_argument(
        "url", nargs="?", help="the server's endpoint, e.g. http://127.0.0.1:9100/mcp or .../sse"
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    for flag, metavar, text in _FORWARDED + _REPORT_FLAGS:
        parser.add_argument(flag, metavar=metavar, help=text)
    return parser


def _receiver_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="robot-mcp-conformance receiver",
        description=(
            "Hold a receiver of events (the brain's POST /api/agent/events) to the Async Task "
            "Contract (docs/contract.md): the suite posts signed events, valid and bad, as "
            "server --server-name signing with --secret (configure the receiver so), and "
            "reports clause by clause. Other arguments go to pytest (e.g. "
            "--junitxml=report.xml, -k refused)."
        ),
        epilog=_epilog(),
    )
    parser.add_argument(
        "url", help="the receiver's events endpoint, e.g. http://127.0.0.1:8000/api/agent/events"
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    for flag, metavar, text in _RECEIVER_FLAGS + _REPORT_FLAGS:
        parser.add_argument(flag, metavar=metavar, help=text)
    return parser


def _forwarded(args: argparse.Namespace, flags: Sequence[tuple[str, str, str]]) -> list[str]:
    out: list[str] = []
    for flag, _, _ in flags:
        value = getattr(args, flag.lstrip("-").replace("-", "_"))
        if value is not None:
            out += [flag, value]
    return out


def build_pytest_args(argv: Sequence[str]) -> list[str]:
    """The pytest command line for ``robot-mcp-conformance argv`` (argv without the name).

    Raises:
        SystemExit: ``--help``, ``--version`` or an argument error (argparse's exits).
    """
    argv = list(argv)
    receiver = bool(argv) and argv[0] == "receiver"
    if receiver:
        args, rest = _receiver_parser().parse_known_args(argv[1:])
    else:
        args, rest = _parser().parse_known_args(argv)
    out = [
        "-c",
        str(_INI),
        "--rootdir",
        str(_HERE),
        "--confcutdir",
        str(_HERE),
        "-p",
        "no:cacheprovider",
        # This script imported the package (and the kit) before pytest could rewrite its
        # asserts; the suite fails through pytest.fail, so the rewrite is not needed.
        "-W",
        "ignore::pytest.PytestAssertRewriteWarning",
        "-v",
        "-rfE",
        "--pyargs",
    ]
    if receiver:
        out += ["robot_mcp_conformance.receiver", "--receiver-url", args.url]
        return out + _forwarded(args, _RECEIVER_FLAGS + _REPORT_FLAGS) + rest
    out.append("robot_mcp_conformance")
    if args.url:
        out += ["--server-url", args.url]
    return out + _forwarded(args, _FORWARDED + _REPORT_FLAGS) + rest


def _missing_extra() -> str | None:
    """The first module of the ``conformance`` extra that cannot be imported, or None."""
    for module in _EXTRA_MODULES:
        try:
            importlib.import_module(module)
        except ImportError:
            return module
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the suite; return pytest's exit code (see the module docstring)."""
    pytest_args = build_pytest_args(sys.argv[1:] if argv is None else argv)
    missing = _missing_extra()
    if missing is not None:
        print(
            f"robot-mcp-conformance: the 'conformance' extra is not installed (cannot import "
            f"{missing!r}); install it with: pip install 'robot-mcp-kit[conformance]'",
            file=sys.stderr,
        )
        return EXIT_UNUSABLE
    import pytest

    return int(pytest.main(pytest_args))
