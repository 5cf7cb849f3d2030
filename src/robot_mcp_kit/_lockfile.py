"""One process per file: an exclusive advisory lock on a sidecar ``<file>.lock``.

:class:`LockFile` takes ``flock(LOCK_EX | LOCK_NB)`` on ``<file>.lock`` and writes the
holder's pid and host into it; a second taker (another process, or another open in the
same process) is refused at once with :class:`~robot_mcp_kit.OutboxLocked`, which names
the file and that holder. The OS drops the lock when the holder's descriptor closes, so a
process killed with SIGKILL releases it too; the descriptor is not inherited by child
processes (``os.open`` makes it non-inheritable).

Why a sidecar and ``flock``: SQLite locks the database file itself with POSIX ``fcntl``
locks, which a second descriptor on the same file would silently release when closed;
``flock`` on another file is independent of them. The lock file is never deleted:
unlinking it while another process waits on it would let two holders lock two different
files under one name.
"""

from __future__ import annotations

import os
import re
import socket
import sys
from pathlib import Path

from robot_mcp_kit._exceptions import OutboxLocked, StoreError

__all__ = ["LockFile", "lock_path_for"]

_HOLDER = re.compile(rb"pid=(\d+) host=(\S+)")
_HOLDER_MAX_BYTES = 512


def lock_path_for(path: Path) -> Path:
    """The lock file beside ``path``: ``outbox.db`` → ``outbox.db.lock``."""
    return path.with_name(f"{path.name}.lock")


class LockFile:
    """The exclusive lock on ``<path>.lock`` while ``path`` is in use. Not thread-safe.

    Args:
        path: the file the lock guards (named in messages; its directory is created).
        what: how messages name that file (``"outbox"``).
        remedy: the sentence a refusal ends with (what the operator can do).

    Raises:
        OutboxLocked: another holder has it (from :meth:`acquire`).
        StoreError: the lock file cannot be created or locked (a read-only directory,
            a filesystem without locks).
    """

    def __init__(self, path: Path, *, what: str, remedy: str) -> None:
        self.path = path
        self.lock_path = lock_path_for(path)
        self.what = what
        self.remedy = remedy
        self._fd: int | None = None

    def __repr__(self) -> str:
        state = "held" if self._fd is not None else "free"
        return f"<LockFile {str(self.lock_path)!r} {state}>"

    @property
    def held(self) -> bool:
        """True while this object holds the lock."""
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock or raise at once (never waits); write this process as the holder."""
        if self._fd is not None:
            return
        if sys.platform == "win32":  # pragma: no cover - the kit's servers run on POSIX
            raise StoreError(
                f"The {self.what} {self.path} needs flock(), which Windows lacks; run "
                "without it (unset RVC_OUTBOX) or on Linux.",
                path=str(self.path),
            )
        import fcntl  # POSIX only, hence here

        try:
            self.lock_path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise self._unusable(exc) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, _HOLDER_MAX_BYTES, 0)
            os.close(fd)
            raise self._refused(holder) from None
        except OSError as exc:
            os.close(fd)
            raise self._unusable(exc) from exc
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid={os.getpid()} host={socket.gethostname()}\n".encode(), 0)
        except OSError:
            pass  # who holds it is a courtesy for the next message; the lock is what counts
        self._fd = fd

    def release(self) -> None:
        """Drop the lock (the file stays). Idempotent."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        os.close(fd)  # closing the only descriptor of the open file drops its flock

    def _refused(self, holder: bytes) -> OutboxLocked:
        found = _HOLDER.search(holder)
        pid = int(found.group(1)) if found else None
        host = found.group(2).decode(errors="replace") if found else None
        who = f"process {pid} on {host}" if found else "another process (it wrote no pid yet)"
        return OutboxLocked(
            f"The {self.what} {self.path} is in use by {who}, which holds "
            f"{self.lock_path}; one {self.what} file serves one process. {self.remedy}",
            path=str(self.path),
            lock_path=str(self.lock_path),
            holder_pid=pid,
            holder_host=host,
        )

    def _unusable(self, exc: OSError) -> StoreError:
        return StoreError(
            f"Cannot lock the {self.what} {self.path}: {self.lock_path}: "
            f"{exc.strerror or exc}. The directory must be writable and its filesystem "
            "must support file locks (flock).",
            path=str(self.path),
        )
