"""The data directory's lock: one process serves or rewrites ``MEMORY_DATA_DIR`` at a time.

The server takes ``MEMORY_DATA_DIR/memory.lock`` (``flock(LOCK_EX | LOCK_NB)``) before it
opens ``index.db`` and holds it until it stops; ``restore`` and ``load`` take it too, so
neither can rewrite a store a server is serving. The holder writes ``pid=… host=…`` into
the file for the next refusal's message. The OS drops the lock when the holder's
descriptor closes, so a server killed with SIGKILL releases it; the file itself is never
deleted (unlinking a lock file another process waits on would let two holders lock two
files under one name). ``backup`` and ``dump`` never take it: they read a consistent
snapshot while the server serves.

Why a sidecar and ``flock``: SQLite locks ``index.db`` with POSIX ``fcntl`` locks, which a
second descriptor on the same file would silently drop when closed; ``flock`` on another
file is independent of them.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

from robot_mcp_memory._exceptions import OperationRefused, StoreInUse

__all__ = ["LOCK_FILENAME", "DataDirLock"]

LOCK_FILENAME = "memory.lock"
"""The lock file inside ``MEMORY_DATA_DIR``."""

_HOLDER_MAX_BYTES = 512


class DataDirLock:
    """The exclusive lock on ``data_dir/memory.lock``. Not thread-safe; a context manager.

    Args:
        data_dir: the data directory (created if missing when the lock is taken).
        remedy: the sentence a refusal ends with (what the operator can do).
    """

    def __init__(self, data_dir: Path, *, remedy: str) -> None:
        self.data_dir = data_dir
        self.path = data_dir / LOCK_FILENAME
        self.remedy = remedy
        self._fd: int | None = None

    def __repr__(self) -> str:
        return f"<DataDirLock {str(self.path)!r} {'held' if self._fd is not None else 'free'}>"

    @property
    def held(self) -> bool:
        """True while this object holds the lock."""
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock or raise at once (never waits).

        Raises:
            StoreInUse: another process holds it (the message names it and the remedy).
            OperationRefused: the lock file cannot be created or locked.
        """
        if self._fd is not None:
            return
        if sys.platform == "win32":  # pragma: no cover - the server runs on POSIX
            raise OperationRefused(f"locking {self.path} needs flock(), which Windows lacks")
        import fcntl  # POSIX only, hence here

        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise OperationRefused(
                f"cannot create the lock file {self.path}: {exc.strerror}; check that "
                "MEMORY_DATA_DIR exists and is writable by this user",
                path=str(self.path),
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, _HOLDER_MAX_BYTES, 0).decode(errors="replace").strip()
            os.close(fd)
            who = f"the process with {holder}" if holder else "another process"
            raise StoreInUse(
                f"the store in {self.data_dir} is in use: {who} holds {self.path}. {self.remedy}",
                path=str(self.data_dir),
                holder=holder or None,
            ) from None
        except OSError as exc:
            os.close(fd)
            raise OperationRefused(
                f"cannot lock {self.path}: {exc.strerror}; use a local filesystem for "
                "MEMORY_DATA_DIR",
                path=str(self.path),
            ) from exc
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid={os.getpid()} host={socket.gethostname()}\n".encode(), 0)
        except OSError:
            pass  # the holder's name is a courtesy for the next message; the lock is what counts
        self._fd = fd

    def release(self) -> None:
        """Drop the lock (the file stays). Idempotent."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __enter__(self) -> DataDirLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
