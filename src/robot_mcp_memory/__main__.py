"""``robot-mcp-memory``: run the memory MCP server, or one of its operator commands.

With no command it serves. The commands act on the store of ``MEMORY_DATA_DIR``:
``backup DEST`` (a consistent copy, safe while the server serves), ``restore SRC`` (refused
while a server holds the directory), ``dump DIR`` and ``load DIR`` (every document as its
markdown, the registry and the lessons as readable files). Each prints one line per step
on stdout and, when refused, one line on stderr with exit status :data:`EXIT_CONFIG`.

Configuration is environment variables only (``--help`` lists them). Startup failures that
restarting cannot fix — an invalid setting, a corrupt or too-new ``index.db`` — print one
line on stderr and exit with :data:`EXIT_CONFIG` (2), which the systemd unit lists in
``RestartPreventExitStatus`` so a broken file does not crash-loop the service; a hard
file-descriptor limit too low for ``MEMORY_MAX_CONNECTIONS`` is one of them. A missing
``memory`` extra is one line naming it, not a traceback.

``robot-mcp-memory copy --from SRC --to DST`` copies a whole store between backends (a
data directory or a ``postgresql://`` URL on each side) and verifies it
(:mod:`robot_mcp_memory.transfer`): exit 0 when every table matches, 2 when the copy is
refused (one line: a missing source, a destination that is not empty...), 3 when the
destination does not match the source.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from robot_mcp_memory.settings import Settings

__all__ = ["EXIT_CONFIG", "EXIT_MISMATCH", "EXIT_MISSING_EXTRA", "main"]

EXIT_CONFIG = 2
EXIT_MISSING_EXTRA = 1
EXIT_MISMATCH = 3
"""``copy``: the destination does not match the source (the transfer module's value)."""

_PROG = "robot-mcp-memory"
_EXTRA_MODULES = ("mcp", "structlog", "yaml", "pydantic_settings", "uvicorn", "numpy")


def _missing_extra() -> str | None:
    """The first module of the ``memory`` extra that cannot be imported, or None."""
    for module in _EXTRA_MODULES:
        try:
            importlib.import_module(module)
        except ImportError:
            return module
    return None


def _parser() -> argparse.ArgumentParser:
    from robot_mcp_kit import __version__
    from robot_mcp_memory.http import ACCEPT_BACKLOG, FD_RESERVE
    from robot_mcp_memory.settings import ENV_VARS

    width = max(len(name) for name in ENV_VARS)
    rows = "\n".join(
        f"  {name:<{width}}  {meaning} (default: {default})"
        for name, (_, default, meaning) in ENV_VARS.items()
    )
    parser = argparse.ArgumentParser(
        prog=_PROG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "The fleet's process memory as an MCP server named 'memory': stores markdown "
            "process documents distilled from past missions and finds the relevant ones "
            "for a new instruction (SQLite FTS5 in MEMORY_DATA_DIR/index.db, lessons in "
            "lessons.db beside it). The commands below back up, restore, dump and load that "
            "store."
        ),
        epilog=(
            "configuration (environment variables only):\n"
            f"{rows}\n\n"
            "HTTP transports serve GET /healthz without auth; with MEMORY_TOKEN set every\n"
            "other request needs 'Authorization: Bearer <token>'. They need\n"
            f"MEMORY_MAX_CONNECTIONS + {ACCEPT_BACKLOG + FD_RESERVE} file descriptors: the "
            "soft limit is raised up to the\nhard one (ulimit -Hn; systemd LimitNOFILE=, "
            "docker run --ulimit nofile=), else exit 2.\n"
            f"exit status: 0 stopped (a command: done), {EXIT_CONFIG} invalid setting, "
            "unreadable index.db, a data directory another server holds, or a refused "
            "command (fix it, do not just restart).\n\n"
            f"{_PROG} copy --from SRC --to DST copies a store between backends "
            f"(see {_PROG} copy --help)."
        ),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(
        dest="command",
        title="operator commands (on the store of MEMORY_DATA_DIR; none: serve)",
        metavar="COMMAND",
    )
    backup = commands.add_parser(
        "backup",
        help="copy the store consistently into DEST, safe while the server serves",
        description="Copy index.db and lessons.db of MEMORY_DATA_DIR into the new directory "
        "DEST with SQLite's online backup API (one consistent point per file, WAL "
        "included), check each copy and write DEST/backup.json (sha256, counts, schema "
        "version). Safe while the server serves; never writes to MEMORY_DATA_DIR. With "
        "MEMORY_DATABASE_URL (PostgreSQL): a logical export of one snapshot of the "
        "database in the dump format (DEST/manifest.json), safe while the replicas serve.",
    )
    backup.add_argument("dest", metavar="DEST", help="a new (or empty) directory")
    restore = commands.add_parser(
        "restore",
        help="put a backup back into MEMORY_DATA_DIR (the server must be stopped)",
        description="Check the backup in SRC against its manifest and SQLite's integrity "
        "check, then put its files into MEMORY_DATA_DIR. Refused while a server holds "
        "the directory (stop it first). With MEMORY_DATABASE_URL (PostgreSQL): load the "
        "export SRC made by 'backup' into the database, which must be empty.",
    )
    restore.add_argument("src", metavar="SRC", help="a directory made by 'backup'")
    restore.add_argument(
        "--force",
        action="store_true",
        help="restore over an existing store, renaming its files *.before-restore-<time>",
    )
    dump = commands.add_parser(
        "dump",
        help="write every document as markdown, the registry and lessons as JSON, into DIR",
        description="Write the store as files a person can read and diff: "
        "processes/<id>.md (each document's exact markdown), fleet/groups.json, "
        "fleet/robots.json, fleet/settings.json, lessons.json and manifest.json (counts, "
        "sha256 of each file, schema version). Reads a consistent snapshot; safe while "
        "the server serves. dump -> load -> dump is byte-identical.",
    )
    dump.add_argument("dir", metavar="DIR", help="a new (or empty) directory")
    load = commands.add_parser(
        "load",
        help="load a dump into MEMORY_DATA_DIR (the server must be stopped)",
        description="Load a directory made by 'dump' into the store (empty or not). Same id "
        "and same content: skipped. Same id, other content: a conflict; by default the "
        "whole load is refused (nothing written) and each conflict named. Refused while "
        "a server holds the directory.",
    )
    load.add_argument("dir", metavar="DIR", help="a directory made by 'dump'")
    load.add_argument(
        "--on-conflict",
        choices=("refuse", "suffix"),
        default="refuse",
        help="refuse (default): load nothing when anything conflicts; suffix: store a "
        "conflicting document under the next free id (-2, -3...) and keep the store's "
        "registry entries, settings and lessons",
    )
    return parser


class _Terminated(Exception):
    """SIGTERM arrived; unwinds ``serve`` so the store is closed (hot writes flushed)."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise _Terminated


def _copy_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"{_PROG} copy",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Copy a whole memory store between backends and verify it: the process\n"
            "documents (ids, counters, timestamps, revision numbers exactly) with their\n"
            "revision history (the kept earlier versions, deleted documents' included),\n"
            "the fleet registry (groups, robots, settings and self-improve toggles) and\n"
            "the lessons. The destination rebuilds its search index from the copied\n"
            "documents (vectors are computed by the server that opens it with an\n"
            "embedder). Stop the servers writing to the source first."
        ),
        epilog=(
            "SRC and DST are each a data directory (SQLite: its index.db and lessons.db, "
            "the\nserver's MEMORY_DATA_DIR) or a PostgreSQL URL "
            "(postgresql://user:pass@host:5432/db;\nthe 'postgres' extra). The "
            "destination must be empty: a new directory or an empty\ndatabase. Every "
            "table is read back from the destination and its row count and\nsha256 (over "
            "a canonical serialization) compared with the source's; both are printed.\n"
            f"exit status: 0 copied and verified, {EXIT_CONFIG} refused (nothing written "
            f"unless said),\n{EXIT_MISMATCH} the destination does not match the source.\n"
            "examples:\n"
            f"  {_PROG} copy --from /var/lib/robot-mcp-memory "
            "--to postgresql://memory@db/memory\n"
            f"  {_PROG} copy --from postgresql://memory@db/memory --to /srv/memory-backup"
        ),
    )
    parser.add_argument(
        "--from",
        dest="source",
        required=True,
        metavar="SRC",
        help="the store to copy: a data directory or a postgresql:// URL",
    )
    parser.add_argument(
        "--to",
        dest="destination",
        required=True,
        metavar="DST",
        help="where to copy it: a new or empty data directory, or an empty database's URL",
    )
    return parser


def _copy(argv: Sequence[str]) -> int:
    args = _copy_parser().parse_args(argv)
    from robot_mcp_kit.store import StoreError
    from robot_mcp_memory.transfer import CopyRefused, copy_store

    # No log handler: the stores' INFO lines stay quiet, so a refusal is one line on
    # stderr and stdout holds only the table (Python's last-resort handler still prints
    # a warning).
    try:
        return copy_store(args.source, args.destination, sys.stdout)
    except CopyRefused as exc:
        return _refuse(f"copy: {exc}")
    except StoreError as exc:
        return _refuse(f"copy: {exc}")
    except OSError as exc:
        if exc.filename is None:
            raise
        return _refuse(f"copy: cannot use {str(exc.filename)!r}: {exc.strerror}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the server until it is stopped (or, with ``copy``, copy a store); returns the
    process exit status."""
    argv_list = list(sys.argv[1:] if argv is None else argv)
    missing = _missing_extra()
    if missing is not None:
        print(
            f"{_PROG}: the 'memory' extra is not installed (cannot import {missing!r}); "
            "install it with: pip install 'robot-mcp-kit[memory]'",
            file=sys.stderr,
        )
        return EXIT_MISSING_EXTRA
    if argv_list[:1] == ["copy"]:
        return _copy(argv_list[1:])
    args = _parser().parse_args(argv_list)

    from robot_mcp_kit.store import StoreError
    from robot_mcp_memory._exceptions import OperationRefused, SettingsError
    from robot_mcp_memory.http import serve
    from robot_mcp_memory.logs import configure_logging
    from robot_mcp_memory.settings import load_settings

    try:
        settings = load_settings()
    except SettingsError as exc:
        return _refuse(str(exc))
    if args.command is not None:
        try:
            return _operate(args, settings)
        except (OperationRefused, StoreError) as exc:
            return _refuse(str(exc))
    # Before build_server: FastMCP's constructor calls logging.basicConfig, a no-op once
    # the root logger has our handler.
    configure_logging()
    # Python's default SIGTERM action kills the process on the spot, and uvicorn re-raises
    # the SIGTERM it captured once its graceful shutdown is done — either way `serve`'s
    # finally (closing the store) would never run. Turn it into an exception instead.
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        serve(settings)
    except (_Terminated, KeyboardInterrupt):
        pass
    except SettingsError as exc:  # the fd limit is too low for MEMORY_MAX_CONNECTIONS
        return _refuse(str(exc))
    except (StoreError, OperationRefused) as exc:  # OperationRefused: another server holds it
        return _refuse(str(exc))
    except OSError as exc:
        if exc.filename is None:
            raise
        return _refuse(f"cannot use MEMORY_DATA_DIR={str(settings.data_dir)!r}: {exc}")
    return 0


def _say(line: str) -> None:
    print(f"{_PROG}: {line}", flush=True)


def _operate(args: argparse.Namespace, settings: Settings) -> int:
    """Run the operator command ``args.command`` on ``settings.data_dir``; 0 when done."""
    from pathlib import Path

    from robot_mcp_memory import operations
    from robot_mcp_memory.backends import open_storage

    named = open_storage(settings).named  # the store, for the last line (never a password)
    if args.command == "backup":
        dest = Path(args.dest)
        backed_up = operations.backup(settings, dest, progress=_say)
        if isinstance(backed_up, operations.DumpReport):
            counts = ", ".join(f"{n} {kind}" for kind, n in backed_up.counts.items())
            _say(
                f"backup done: {counts} from one snapshot of {named} in {dest} (manifest "
                f"{dest}/manifest.json; 'restore {dest}' loads it into an empty database)"
            )
        else:
            _say(
                f"backup done: {len(backed_up.files)} file(s) in {dest} "
                f"(manifest {dest}/backup.json)"
            )
        return 0
    if args.command == "restore":
        restored = operations.restore(settings, Path(args.src), force=args.force, progress=_say)
        if isinstance(restored, operations.DumpReport):
            actions = ", ".join(f"{n} {action}" for action, n in sorted(restored.actions.items()))
            _say(f"restore done into {named}: {actions or 'nothing to do'}")
        else:
            aside = (
                f"; moved aside: {', '.join(restored.moved_aside)}" if restored.moved_aside else ""
            )
            _say(f"restore done: {len(restored.files)} file(s) into {settings.data_dir}{aside}")
        return 0
    if args.command == "dump":
        dest = Path(args.dir)
        with operations.memory_to_dump(settings, progress=_say) as memory:
            dumped = operations.dump_memory(memory, dest, progress=_say)
        counts = ", ".join(f"{n} {kind}" for kind, n in dumped.counts.items())
        _say(f"dump done: {counts} in {dest} (manifest {dest}/manifest.json)")
        return 0
    if args.command == "load":
        from robot_mcp_memory.services import open_memory
        from robot_mcp_memory.settings import SearchMode

        # A data directory: the server must be stopped (its lock). A database server: its
        # replicas keep serving; each item is its own transaction, and conflicts are found
        # before the first write.
        with open_storage(settings).lock(
            "Stop the server first (systemctl stop robot-mcp-memory, or docker stop), then "
            "run load again."
        ):
            # Lexical: no model is loaded here; a hybrid server embeds what it lacks at open.
            memory = open_memory(settings.model_copy(update={"search": SearchMode.LEXICAL}))
            try:
                loaded = operations.load_memory(
                    memory, Path(args.dir), on_conflict=args.on_conflict, progress=_say
                )
            finally:
                memory.close()
        actions = ", ".join(f"{n} {action}" for action, n in sorted(loaded.actions.items()))
        _say(
            f"load done into {named}: {actions or 'nothing to do'}; "
            f"{len(loaded.conflicts)} conflict(s)"
        )
        return 0
    raise AssertionError(f"unknown command {args.command!r}")  # argparse refuses it first


def _refuse(message: str) -> int:
    print(f"{_PROG}: {' '.join(message.split())}", file=sys.stderr)
    return EXIT_CONFIG


if __name__ == "__main__":
    sys.exit(main())
