"""``backup`` and ``restore`` of whatever storage the settings name.

A storage with files of its own to copy (:attr:`Storage.files
<robot_mcp_memory.backends.Storage.files>`: a data directory) copies them consistently
and answers a :class:`~robot_mcp_memory.backends.BackupReport`; a store on a
database server is exported in the dump format from one snapshot and restored by loading
that export into an empty database (:func:`~._dump.backup_database`,
:func:`~._dump.restore_database`), answering a :class:`~._dump.DumpReport`.
"""

from __future__ import annotations

from pathlib import Path

from robot_mcp_memory.backends import BackupReport, Progress, open_storage
from robot_mcp_memory.operations._dump import DumpReport, backup_database, restore_database
from robot_mcp_memory.settings import Settings

__all__ = ["backup", "restore"]


def _silent(_: str) -> None:
    pass


def backup(
    settings: Settings, dest: Path, *, progress: Progress = _silent
) -> BackupReport | DumpReport:
    """Take a consistent backup of the store of ``settings`` into the new directory
    ``dest``; safe while servers serve.

    Raises:
        OperationRefused: ``dest`` is not a new or empty directory, or the store cannot be
            read (see the two forms).
    """
    files = open_storage(settings).files
    if files is None:
        return backup_database(settings, dest, progress=progress)
    return files.backup(dest, progress=progress)


def restore(
    settings: Settings, src: Path, *, force: bool = False, progress: Progress = _silent
) -> BackupReport | DumpReport:
    """Put the backup ``src`` back as the store of ``settings``.

    Raises:
        OperationRefused: the backup is not whole, a server holds the data directory, or
            a store is there already (see the two forms).
    """
    files = open_storage(settings).files
    if files is None:
        return restore_database(settings, src, force=force, progress=progress)
    return files.restore(src, force=force, progress=progress)
