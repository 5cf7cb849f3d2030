"""``robot-mcp-conformance URL [options]``: hold a running server to the contract.

It runs this package's pytest suite (``pytest --pyargs robot_mcp_conformance``) with the
options given, under a configuration of its own (``_script.ini``: no project ``addopts``,
no cache, the user's conftest files not loaded), prints the clause-by-clause report
(``-v``: one line per requirement, each failure citing its clause of ``docs/contract.md``)
and returns pytest's exit code: 0 the server conforms, 1 it does not, 4 the options or the
target are unusable (one line naming the cause). Arguments it does not know are passed
to pytest unchanged (``--junitxml=report.xml``, ``-k cancel``, ``-x``...).

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

__all__ = ["build_pytest_args", "main"]

_HERE = Path(__file__).resolve().parent
_INI = _HERE / "_script.ini"

EXIT_UNUSABLE = 4
"""pytest's ``USAGE_ERROR``: the options, the target or the installation are unusable."""

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
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="robot-mcp-conformance",
        description=(
            "Hold a task-capable MCP server to the Async Task Contract (docs/contract.md): "
            "the suite starts a fake brain (fake_rvc) on --callback-port, drives the server "
            "at URL over SSE or streamable HTTP, and reports clause by clause. The server "
            "must post its events to http://127.0.0.1:PORT/api/agent/events signed with "
            "--secret. Exit 0: conforms; 1: does not; 4: unusable options or target. Other "
            "arguments go to pytest (e.g. --junitxml=report.xml, -k cancel)."
        ),
    )
    parser.add_argument(
        "url", nargs="?", help="the server's endpoint, e.g. http://127.0.0.1:9100/mcp or .../sse"
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    for flag, metavar, text in _FORWARDED:
        parser.add_argument(flag, metavar=metavar, help=text)
    return parser


def build_pytest_args(argv: Sequence[str]) -> list[str]:
    """The pytest command line for ``robot-mcp-conformance argv`` (argv without the name).

    Raises:
        SystemExit: ``--help``, ``--version`` or an argument error (argparse's exits).
    """
    args, rest = _parser().parse_known_args(list(argv))
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
        "robot_mcp_conformance",
    ]
    if args.url:
        out += ["--server-url", args.url]
    for flag, _, _ in _FORWARDED:
        value = getattr(args, flag.lstrip("-").replace("-", "_"))
        if value is not None:
            out += [flag, value]
    return out + rest


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
