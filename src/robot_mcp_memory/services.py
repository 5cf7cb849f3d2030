"""The services behind the tools and their lifetime: :class:`Memory`, :func:`open_memory`,
:class:`StoreHolder`.

:class:`Memory` is the three services every tool works with — the process documents, the
fleet registry and the lessons — each holding its rules over the storage a backend
offers, so a caller never depends on a backend. :func:`open_memory` opens the storage of the
settings (:func:`robot_mcp_memory.backends.open_storage`) and builds the services over it
(:func:`memory_over`).

A :class:`StoreHolder` is reference-counted, so the process entry point can hold the
services open for the whole life of an HTTP server while each MCP session's lifespan also
holds them; the last release closes them, which flushes queued hot writes.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass

from robot_mcp_kit.log import get_logger
from robot_mcp_memory._exceptions import EmbedderUnavailable
from robot_mcp_memory._limits import ROBOT_MAX_DOCUMENTS
from robot_mcp_memory.backends import Backend, open_storage
from robot_mcp_memory.fleet import FleetService
from robot_mcp_memory.params import ScopedParams
from robot_mcp_memory.processes import (
    Embedder,
    ProcessService,
    load_default_embedder,
)
from robot_mcp_memory.settings import (
    SearchMode,
    Settings,
)

__all__ = [
    "Memory",
    "StoreHolder",
    "choose_embedder",
    "default_embedder",
    "memory_over",
    "open_memory",
]

_log = get_logger("robot_mcp_memory.server")


@dataclass(frozen=True)
class Memory:
    """The services behind the tools.

    ``robot_max_documents`` bounds the documents a robot token may own
    (``MEMORY_ROBOT_MAX_DOCUMENTS``). ``ping`` asks a database server whether it answers
    (``/healthz``; None for SQLite, whose file is open while the services are).
    """

    processes: ProcessService
    fleet: FleetService
    lessons: ScopedParams
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


def memory_over(
    settings: Settings, backend: Backend, embedder: Embedder | None, *, owns_backend: bool = True
) -> Memory:
    """The services over the opened ``backend``; closing them closes it too when
    ``owns_backend`` (else its opener closes it, as a snapshot's does)."""
    fleet = FleetService(backend.fleet)
    return Memory(
        processes=ProcessService(
            backend.processes,
            robot_id=settings.robot_id,
            embedder=embedder,
            revisions_keep=settings.revisions_keep,
        ),
        fleet=fleet,
        lessons=ScopedParams(fleet, backend.lessons),
        robot_max_documents=settings.robot_max_documents,
        ping=backend.ping,
        release=backend.close if owns_backend else None,
    )


def open_memory(settings: Settings, embedder: Embedder | None = None) -> Memory:
    """Open the storage of ``settings`` and the services over it.

    The embedder is chosen (:func:`choose_embedder`) after the store opened: a refused
    store stays a one-line refusal, and no model is loaded for a server that cannot start.

    Raises:
        robot_mcp_kit.store.StoreError: the store cannot be opened (unreadable, newer
            schema, unreachable…).
    """
    backend = open_storage(settings).open()
    try:
        chosen = choose_embedder(settings, embedder)
    except BaseException:
        backend.close()
        raise
    return memory_over(settings, backend, chosen)


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
            backend = open_storage(settings).open()
            if not chosen:
                try:
                    chosen.append(choose_embedder(settings, embedder))
                except BaseException:
                    backend.close()
                    raise
            return memory_over(settings, backend, chosen[0])

        return cls(opener)

    def acquire(self) -> ProcessService:
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
    def store(self) -> ProcessService | None:
        """The open process store, or None while nobody holds it."""
        return None if self._memory is None else self._memory.processes
