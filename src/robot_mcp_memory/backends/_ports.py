"""What a backend offers the services and the operator commands: the ports of :mod:`.`.

Protocols only: the adapters (:mod:`.sqlite`, :mod:`.postgres`) match them structurally;
:mod:`robot_mcp_memory.backends` re-exports them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from robot_mcp_kit.params import Lesson, ParamBackend
from robot_mcp_memory.fleet import FleetRepo, FleetRows
from robot_mcp_memory.processes import ProcessRepo

__all__ = [
    "Backend",
    "BackupReport",
    "CopyRows",
    "FileBackup",
    "LessonRows",
    "ProcessRows",
    "Progress",
    "RegistryRows",
    "Storage",
]

Progress = Callable[[str], None]
"""Where a long operation says what it is doing, one line at a time."""


@dataclass
class BackupReport:
    """What a storage's copy of its files (``backup``, ``restore``) did, file by file.

    ``files`` maps each file name to its manifest entry (``sha256``, ``bytes``,
    ``schema_version``, ``counts``); ``moved_aside`` lists the files a restore moved away.
    """

    directory: Path
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    moved_aside: list[str] = field(default_factory=list)


class ProcessRows(Protocol):
    """The process documents' stored tables read and written whole (the copy command): the
    rows of ``processes`` and ``processes_revisions`` with every column the table has
    (``columns``; a boolean as SQLite stores it, 0 or 1) out, and in, into an empty store
    in one transaction, after which the store recomputes what is derived (its ``reindex``)
    and says how many documents it indexed (None: nothing is derived)."""

    def count_process_rows(self) -> int: ...

    def columns(self, table: str) -> tuple[str, ...]: ...

    def export_table(self, table: str) -> list[dict[str, Any]]: ...

    def import_tables(self, tables: Mapping[str, Sequence[dict[str, Any]]]) -> int | None: ...


class RegistryRows(Protocol):
    """The whole fleet registry out and in."""

    def export_rows(self) -> FleetRows: ...

    def import_rows(self, rows: FleetRows) -> None: ...


class LessonRows(Protocol):
    """Every lesson out (the kit's ``ParamBackend.lessons``) and in, in one transaction."""

    def lessons(self, scope: str | None = None, key: str | None = None) -> list[Lesson]: ...

    def import_lessons(self, lessons: list[Lesson]) -> None: ...


class CopyRows(NamedTuple):
    """What the copy command reads and writes of an opened backend."""

    processes: ProcessRows
    registry: RegistryRows
    lessons: LessonRows


class Backend(Protocol):
    """An opened store: what the services stand on — the process documents' and the
    registry's repositories and the lessons' kit backend.

    ``ping`` asks a database server whether it answers (``/healthz``); None where the store
    is a file the process holds open. :meth:`close` closes what the backend opened;
    idempotent.
    """

    @property
    def where(self) -> str: ...

    @property
    def processes(self) -> ProcessRepo: ...

    @property
    def fleet(self) -> FleetRepo: ...

    @property
    def lessons(self) -> ParamBackend: ...

    @property
    def ping(self) -> Callable[[], bool] | None: ...

    def copy_rows(self) -> CopyRows: ...

    def close(self) -> None: ...


class FileBackup(Protocol):
    """A storage's own consistent copy of its files (``backup``, ``restore``)."""

    def backup(self, dest: Path, *, progress: Progress) -> BackupReport: ...

    def restore(self, src: Path, *, force: bool, progress: Progress) -> BackupReport: ...


class Storage(Protocol):
    """Where a store lives, before anything is opened.

    ``described`` names it in messages (``/srv/memory (SQLite)``, ``memory@db:5432/memory
    (PostgreSQL)``; never a password), ``named`` in an operator command's last line
    (``/srv/memory``, ``the PostgreSQL database memory@db:5432/memory``); ``identity``
    tells two storages apart (the copy refuses one store on both sides). :meth:`unusable`
    says, without creating anything, why this storage cannot be a copy's source (or
    destination), or None. :meth:`lock` holds the storage for one process where the
    storage needs that (the data directory's lock); :meth:`snapshot` opens it read as of
    one moment, for ``dump`` and ``backup``. ``files`` copies the storage's files, where
    the store is files.
    """

    @property
    def described(self) -> str: ...

    @property
    def named(self) -> str: ...

    @property
    def identity(self) -> str: ...

    @property
    def files(self) -> FileBackup | None: ...

    def log_fields(self) -> dict[str, str | None]: ...

    def unusable(self, *, source: bool) -> str | None: ...

    def open(self) -> Backend: ...

    def lock(self, remedy: str) -> AbstractContextManager[object]: ...

    def snapshot(self, *, progress: Progress) -> AbstractContextManager[Backend]: ...
