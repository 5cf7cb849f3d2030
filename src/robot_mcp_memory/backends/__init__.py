"""Where the memory server keeps what it writes, and the one place that asks which backend.

:func:`open_storage` reads the settings (``MEMORY_DATABASE_URL`` set: PostgreSQL, imported
only then; else ``MEMORY_DATA_DIR``: SQLite) and :func:`storage_at` a ``copy`` argument (a
``postgresql://`` URL or a directory); both answer a :class:`Storage`, where a store lives
before anything is opened, and :meth:`Storage.open` the opened :class:`Backend` the
services stand on. Nothing above this package asks which backend it has: what differs is
said by what a :class:`Storage` or a :class:`Backend` offers (a storage of files can copy
them, :attr:`Storage.files`; a database server answers pings, :attr:`Backend.ping`).

Adapters: :mod:`.sqlite` (``index.db`` and ``lessons.db`` in a directory) and
:mod:`.postgres` (one database; needs the ``postgres`` extra). They never import each
other.
"""

from __future__ import annotations

from pathlib import Path

from robot_mcp_memory._exceptions import SettingsError
from robot_mcp_memory.backends._ports import (
    Backend,
    BackupReport,
    LessonRows,
    ProcessRows,
    Progress,
    RegistryRows,
    Storage,
)
from robot_mcp_memory.backends.sqlite import SCHEMA_VERSION as INDEX_SCHEMA_VERSION
from robot_mcp_memory.backends.sqlite import SqliteStorage
from robot_mcp_memory.settings import Settings

__all__ = [
    "INDEX_SCHEMA_VERSION",
    "Backend",
    "BackupReport",
    "LessonRows",
    "ProcessRows",
    "Progress",
    "RegistryRows",
    "Storage",
    "open_storage",
    "storage_at",
]


def _is_url(where: str) -> bool:
    """True for a PostgreSQL URL (``postgresql://`` or ``postgres://``)."""
    return where.startswith(("postgresql://", "postgres://"))


def open_storage(settings: Settings) -> Storage:
    """The storage of ``settings``: PostgreSQL when ``MEMORY_DATABASE_URL`` is set, else
    ``MEMORY_DATA_DIR``. Opens nothing.

    Raises:
        SettingsError: ``MEMORY_DATABASE_URL`` is set and the ``postgres`` extra is missing.
    """
    if settings.database_url is None:
        return SqliteStorage(settings.data_dir)
    try:
        from robot_mcp_memory.backends.postgres import PgStorage
    except ImportError as exc:
        raise SettingsError(
            "MEMORY_DATABASE_URL",
            "MEMORY_DATABASE_URL is set but the 'postgres' extra is not installed (cannot "
            f"import {exc.name!r}); install it with: pip install 'robot-mcp-kit[memory,postgres]'",
        ) from None
    return PgStorage(
        settings.database_url.get_secret_value(),
        pool_size=settings.database_pool_size,
        statement_timeout_s=settings.database_statement_timeout_s,
        connect_timeout_s=settings.database_connect_timeout_s,
    )


def storage_at(where: str) -> Storage:
    """The storage a ``copy`` argument names: a ``postgresql://`` URL, else a directory.

    Raises:
        ImportError: a URL, and the ``postgres`` extra is missing.
    """
    if not _is_url(where):
        return SqliteStorage(Path(where))
    from robot_mcp_memory.backends.postgres import PgStorage

    return PgStorage(where)
