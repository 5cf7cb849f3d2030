"""The services behind the tools and their lifetime: :class:`Memory`, :func:`open_memory`,
:class:`StoreHolder`.

:class:`Memory` is the three services every tool works with — the process store, the fleet
registry and the lessons — typed against their ports (:mod:`robot_mcp_memory.ports`), so a
caller never depends on the adapters. :func:`open_memory` builds the SQLite ones over
``MEMORY_DATA_DIR`` (one ``index.db`` for the processes and the registry, ``lessons.db``
beside it for the lessons, opened lazily) or, when ``MEMORY_DATABASE_URL`` is set, the
PostgreSQL ones over one database (:mod:`robot_mcp_memory.postgres`, imported only then).

A :class:`StoreHolder` is reference-counted, so the process entry point can hold the
services open for the whole life of an HTTP server while each MCP session's lifespan also
holds them; the last release closes them, which flushes queued hot writes.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from robot_mcp_kit.log import get_logger
from robot_mcp_kit.store import SqliteStore
from robot_mcp_memory._exceptions import EmbedderUnavailable, SettingsError
from robot_mcp_memory.db import open_index
from robot_mcp_memory.fleet import FleetRegistry
from robot_mcp_memory.limits import ROBOT_MAX_DOCUMENTS
from robot_mcp_memory.params import ScopedParams
from robot_mcp_memory.ports import (
    FleetPort,
    LessonsPort,
    ProcessesPort,
)
from robot_mcp_memory.search import (
    Embedder,
    load_default_embedder,
)
from robot_mcp_memory.settings import (
    SearchMode,
    Settings,
)
from robot_mcp_memory.store import ProcessStore

if TYPE_CHECKING:
    from robot_mcp_memory.postgres import PgDatabase

__all__ = [
    "LESSONS_FILENAME",
    "Memory",
    "StoreHolder",
    "choose_embedder",
    "database_snapshot",
    "default_embedder",
    "open_memory",
]

LESSONS_FILENAME = "lessons.db"
"""The lessons file inside ``MEMORY_DATA_DIR``, created by the first recorded lesson."""

_log = get_logger("robot_mcp_memory.server")


@dataclass(frozen=True)
class Memory:
    """The services behind the tools; the SQLite adapters share one ``index.db``.

    ``robot_max_documents`` bounds the documents a robot token may own
    (``MEMORY_ROBOT_MAX_DOCUMENTS``). ``ping`` asks a database server whether it answers
    (``/healthz``; None for SQLite, whose file is open while the services are).
    """

    processes: ProcessesPort
    fleet: FleetPort
    lessons: LessonsPort
    robot_max_documents: int = ROBOT_MAX_DOCUMENTS
    ping: Callable[[], bool] | None = None
    release: Callable[[], None] | None = None

    def close(self) -> None:
        """Close the lessons, the process store (flushing queued hot writes), then what the
        services shared (``release``: the PostgreSQL pool)."""
        try:
            self.lessons.close()
            self.processes.close()
        finally:
            if self.release is not None:
                self.release()


@functools.cache
def default_embedder() -> Embedder | EmbedderUnavailable:
    """The offline default model, loaded at the first call and kept for the process.

    A model that cannot be loaded is remembered as its :class:`EmbedderUnavailable`, so the
    process tries once. ``default_embedder.cache_clear()`` forgets it (tests do).
    """
    try:
        return load_default_embedder()
    except EmbedderUnavailable as exc:
        return exc


def choose_embedder(settings: Settings, embedder: Embedder | None = None) -> Embedder | None:
    """The embedder ``settings`` asks for (None: lexical search), logging which one.

    ``MEMORY_SEARCH=lexical`` never loads a model; ``hybrid`` uses ``embedder`` or, when it
    is None, :func:`default_embedder`. A hybrid server whose model cannot be loaded logs
    ``search_lexical_only`` with the reason and searches lexically.
    """
    if settings.search is SearchMode.LEXICAL:
        _log.info("search_mode", mode="lexical", reason="MEMORY_SEARCH=lexical")
        return None
    if embedder is None:
        loaded = default_embedder()
        if isinstance(loaded, EmbedderUnavailable):
            _log.warning("search_lexical_only", reason=loaded.reason)
            return None
        embedder = loaded
    _log.info("search_mode", mode="hybrid", model=embedder.name, dim=embedder.dim)
    return embedder


def _open_index(settings: Settings) -> SqliteStore:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    return open_index(settings.data_dir)


def _assemble(settings: Settings, index: SqliteStore, embedder: Embedder | None) -> Memory:
    fleet = FleetRegistry(index)
    return Memory(
        processes=ProcessStore(
            index,
            robot_id=settings.robot_id,
            embedder=embedder,
            revisions_keep=settings.revisions_keep,
        ),
        fleet=fleet,
        lessons=ScopedParams(fleet, settings.data_dir / LESSONS_FILENAME),
        robot_max_documents=settings.robot_max_documents,
    )


def _open_database(settings: Settings) -> PgDatabase:
    """Connect to ``MEMORY_DATABASE_URL`` and open (create, migrate) its schema."""
    assert settings.database_url is not None
    try:
        from robot_mcp_memory.postgres import SCHEMA, PgDatabase
    except ImportError as exc:
        raise SettingsError(
            "MEMORY_DATABASE_URL",
            "MEMORY_DATABASE_URL is set but the 'postgres' extra is not installed (cannot "
            f"import {exc.name!r}); install it with: pip install 'robot-mcp-kit[memory,postgres]'",
        ) from None
    db = PgDatabase(
        settings.database_url.get_secret_value(),
        pool_size=settings.database_pool_size,
        statement_timeout_s=settings.database_statement_timeout_s,
        connect_timeout_s=settings.database_connect_timeout_s,
    )
    db.open(schema=SCHEMA)
    return db


def _assemble_database(settings: Settings, db: PgDatabase, embedder: Embedder | None) -> Memory:
    from robot_mcp_memory.postgres.fleet import PgFleetRegistry
    from robot_mcp_memory.postgres.lessons import PgParamBackend
    from robot_mcp_memory.postgres.processes import PgProcessStore

    fleet = PgFleetRegistry(db)
    return Memory(
        processes=PgProcessStore(
            db,
            robot_id=settings.robot_id,
            embedder=embedder,
            revisions_keep=settings.revisions_keep,
        ),
        fleet=fleet,
        lessons=ScopedParams(fleet, PgParamBackend(db)),
        robot_max_documents=settings.robot_max_documents,
        ping=db.ping,
        release=db.close,
    )


@contextmanager
def database_snapshot(settings: Settings) -> Iterator[Memory]:
    """The services over ONE snapshot of the PostgreSQL database of ``settings``
    (:meth:`PgDatabase.snapshot <robot_mcp_memory.postgres.PgDatabase.snapshot>`): every
    read sees the database as of one moment while replicas keep writing, and nothing can
    be written. Lexical (no model is loaded); closed at exit. For ``dump`` and ``backup``.

    Raises:
        robot_mcp_kit.store.StoreUnavailable: the database cannot be reached.
    """
    db = _open_database(settings)
    try:
        with db.snapshot():
            memory = _assemble_database(settings, db, None)
            yield memory
        memory.close()
    finally:
        db.close()


def _open_backend(settings: Settings) -> tuple[SqliteStore | PgDatabase, Callable[[], None]]:
    """The opened storage of ``settings`` and how to close it: PostgreSQL when
    ``MEMORY_DATABASE_URL`` is set, else ``MEMORY_DATA_DIR/index.db``."""
    if settings.database_url is not None:
        db = _open_database(settings)
        return db, db.close
    index = _open_index(settings)
    return index, index.close


def _assemble_backend(
    settings: Settings, opened: SqliteStore | PgDatabase, embedder: Embedder | None
) -> Memory:
    if isinstance(opened, SqliteStore):
        return _assemble(settings, opened, embedder)
    return _assemble_database(settings, opened, embedder)


def open_memory(settings: Settings, embedder: Embedder | None = None) -> Memory:
    """Open the services of ``settings``: over PostgreSQL when ``MEMORY_DATABASE_URL`` is
    set, else the SQLite ones of ``settings.data_dir`` (creating the directory).

    The embedder is chosen (:func:`choose_embedder`) after ``index.db`` opened: a refused
    file stays a one-line refusal, and no model is loaded for a server that cannot start.

    Raises:
        robot_mcp_kit.store.StoreError: ``index.db`` cannot be opened (unreadable, newer
            schema…).
    """
    opened, close = _open_backend(settings)
    try:
        chosen = choose_embedder(settings, embedder)
    except BaseException:
        close()
        raise
    return _assemble_backend(settings, opened, chosen)


class StoreHolder:
    """Opens the services on the first :meth:`acquire` and closes them on the last release.

    Thread-safe. ``opener`` is called with no arguments and must return an open
    :class:`Memory`; its exceptions (``StoreUnreadable``, ``SchemaTooNew``…) propagate out
    of :meth:`acquire` and leave the holder closed.
    """

    def __init__(self, opener: Callable[[], Memory]) -> None:
        self._opener = opener
        self._lock = threading.Lock()
        self._memory: Memory | None = None
        self._refs = 0

    @classmethod
    def for_settings(cls, settings: Settings, *, embedder: Embedder | None = None) -> StoreHolder:
        """A holder opening :func:`open_memory` of ``settings``.

        The embedder is chosen at the first open and kept for later ones, so the holder
        says once (at startup) which search it serves.
        """
        chosen: list[Embedder | None] = []

        def opener() -> Memory:
            opened, close = _open_backend(settings)
            if not chosen:
                try:
                    chosen.append(choose_embedder(settings, embedder))
                except BaseException:
                    close()
                    raise
            return _assemble_backend(settings, opened, chosen[0])

        return cls(opener)

    def acquire(self) -> ProcessesPort:
        """Take a reference, opening the services if this is the first one; returns the
        process store (the entry point's count and health check need only that)."""
        with self._lock:
            if self._memory is None:
                self._memory = self._opener()
            self._refs += 1
            return self._memory.processes

    def release(self) -> None:
        """Drop a reference; the last one closes the services (flushing queued writes)."""
        with self._lock:
            if self._refs == 0:
                return
            self._refs -= 1
            if self._refs == 0 and self._memory is not None:
                memory, self._memory = self._memory, None
                memory.close()

    @property
    def memory(self) -> Memory | None:
        """The open services, or None while nobody holds them."""
        return self._memory

    @property
    def store(self) -> ProcessesPort | None:
        """The open process store, or None while nobody holds it."""
        return None if self._memory is None else self._memory.processes
