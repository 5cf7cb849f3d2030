"""The SQLite storage: a data directory holding ``index.db`` and ``lessons.db``.

:class:`SqliteStorage` is the directory before anything is opened: its lock
(``memory.lock``, held by a serving server, ``restore`` and ``load``), its consistent copy
(:mod:`._backup`) and the snapshot ``dump`` reads (a copy into a temporary directory,
never the live file). :class:`SqliteBackend` is the opened store: ``index.db`` holds the
process documents, their index and the fleet registry (:mod:`._processes`, and the SQL
both backends share); ``lessons.db`` beside it the lessons, created by the first recorded
lesson.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from robot_mcp_kit.params import SqliteBackend as SqliteLessons
from robot_mcp_kit.store import SqliteStore
from robot_mcp_memory.backends._fleet import SqlFleetRepo
from robot_mcp_memory.backends._ports import BackupReport, CopyRows
from robot_mcp_memory.backends._tokens import Tokenizer
from robot_mcp_memory.backends.sqlite._backup import (
    LESSONS_FILENAME,
    backup_store,
    restore_store,
)
from robot_mcp_memory.backends.sqlite._lock import DataDirLock
from robot_mcp_memory.backends.sqlite._processes import SqliteProcessRepo
from robot_mcp_memory.backends.sqlite._rows import SqliteLessonRows, SqliteProcessRows
from robot_mcp_memory.backends.sqlite._schema import INDEX_FILENAME, open_index
from robot_mcp_memory.backends.sqlite._sessions import SqliteSessions

__all__ = ["SqliteBackend", "SqliteFiles", "SqliteStorage"]

Progress = Callable[[str], None]


class SqliteFiles:
    """The consistent copy of a data directory's files (``backup`` and ``restore``).

    Args:
        data_dir: the data directory.
    """

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir

    def backup(self, dest: Path, *, progress: Progress) -> BackupReport:
        """Copy the store into the new directory ``dest`` (:func:`._backup.backup_store`)."""
        return backup_store(self.data_dir, dest, progress=progress)

    def restore(self, src: Path, *, force: bool, progress: Progress) -> BackupReport:
        """Put the backup ``src`` back (:func:`._backup.restore_store`)."""
        return restore_store(src, self.data_dir, force=force, progress=progress)


class SqliteBackend:
    """An opened data directory.

    Args:
        data_dir: the directory.
        index: ``index.db``, opened; the backend owns it from here.
    """

    ping: Callable[[], bool] | None = None

    def __init__(self, data_dir: Path, index: SqliteStore) -> None:
        self.data_dir = data_dir
        self.index = index
        self.processes = SqliteProcessRepo(index, Tokenizer())
        self.fleet = SqlFleetRepo(SqliteSessions(index), str(data_dir))
        self.lessons = SqliteLessons(data_dir / LESSONS_FILENAME)

    @property
    def where(self) -> str:
        """The directory, for messages."""
        return str(self.data_dir)

    def copy_rows(self) -> CopyRows:
        """The rows the copy command reads and writes."""
        return CopyRows(
            SqliteProcessRows(self.index, self.processes),
            self.fleet,
            SqliteLessonRows(self.data_dir / LESSONS_FILENAME),
        )

    def close(self) -> None:
        """Close the lessons and ``index.db`` (flushing queued hot writes). Idempotent."""
        self.lessons.close()
        self.index.close()

    def __repr__(self) -> str:
        return f"<SqliteBackend {self.where!r}>"


class SqliteStorage:
    """A data directory, before anything is opened; ``described`` and ``identity`` name
    it (the directory, resolved for ``identity``).

    Args:
        data_dir: ``MEMORY_DATA_DIR`` (created when the store is opened).
    """

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.files = SqliteFiles(data_dir)
        self.described = f"{data_dir} (SQLite)"
        self.named = str(data_dir)
        self.identity = f"sqlite:{data_dir.resolve()}"

    def log_fields(self) -> dict[str, str | None]:
        """What the startup line says of the storage."""
        return {"data_dir": str(self.data_dir), "database": None}

    def unusable(self, *, source: bool) -> str | None:
        """Why the directory cannot be a copy's source (it holds no ``index.db``) or side
        (it is a file); None when it can. Creates nothing."""
        directory = self.data_dir
        if source and not (directory / INDEX_FILENAME).is_file():
            return (
                f"{str(directory)!r} holds no {INDEX_FILENAME}: give --from the "
                "MEMORY_DATA_DIR of the server to copy, or a postgresql:// URL"
            )
        if directory.exists() and not directory.is_dir():
            return f"{str(directory)!r} is not a directory"
        return None

    def open(self) -> SqliteBackend:
        """Open (creating the directory and ``index.db`` if missing, migrating an older
        file) the store.

        Raises:
            robot_mcp_kit.store.StoreError: ``index.db`` cannot be opened.
        """
        self.data_dir.mkdir(parents=True, exist_ok=True)
        return SqliteBackend(self.data_dir, open_index(self.data_dir))

    def lock(self, remedy: str) -> DataDirLock:
        """The data directory's lock (``memory.lock``), refused with ``remedy``."""
        return DataDirLock(self.data_dir, remedy=remedy)

    @contextlib.contextmanager
    def snapshot(self, *, progress: Progress) -> Iterator[SqliteBackend]:
        """The store as of one moment: a consistent copy into a temporary directory
        (safe beside a serving server), opened, removed at exit."""
        with tempfile.TemporaryDirectory(prefix="robot-mcp-memory-dump-") as tmp:
            copy = Path(tmp) / "store"
            backup_store(self.data_dir, copy, progress=progress)
            backend = SqliteStorage(copy).open()
            try:
                yield backend
            finally:
                backend.close()

    def __repr__(self) -> str:
        return f"<SqliteStorage {str(self.data_dir)!r}>"
