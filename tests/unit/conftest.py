"""Fixtures shared by several unit-test modules.

Test modules are imported with ``--import-mode=importlib`` and cannot import each other,
so what more than one of them needs lives here as a fixture.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pytest

from robot_mcp_kit import TaskManager
from robot_mcp_kit.models import TaskEvent, new_event_id
from robot_mcp_kit.testing import RecordingPoster


@pytest.fixture
def poster() -> RecordingPoster:
    """A poster that keeps every event in memory instead of sending it."""
    return RecordingPoster()


@pytest.fixture
async def manager(poster: RecordingPoster) -> AsyncIterator[TaskManager]:
    """A ``sleeper`` TaskManager posting to ``poster``, closed after the test."""
    manager = TaskManager("sleeper", poster)
    yield manager
    await manager.aclose()


def _make_event(
    seq: int = 1, type: str = "progress", task_id: str = "slee-1a2b3c", **fields: Any
) -> TaskEvent:
    """A valid ``sleeper`` TaskEvent with a fresh event_id; ``fields`` override any field."""
    data: dict[str, Any] = {
        "event_id": new_event_id(),
        "task_id": task_id,
        "server": "sleeper",
        "tool": "sleep",
        "type": type,
        "seq": seq,
        "ts": "2025-12-12T09:33:20.000Z",
        "payload": {"eta_s": 2},
    }
    data.update(fields)
    return TaskEvent.model_validate(data)


@pytest.fixture
def make_event() -> Callable[..., TaskEvent]:
    """The event factory ``make_event(seq=1, type="progress", task_id=..., **fields)``."""
    return _make_event


CaptureLogs = Callable[[], AbstractContextManager[list[dict[str, Any]]]]
"""The type of the ``capture_logs`` fixture."""

_RECORD_KEYS = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


@contextmanager
def _capture_logs() -> Iterator[list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if isinstance(getattr(record, "event", None), str):
                fields = {k: v for k, v in vars(record).items() if k not in _RECORD_KEYS}
                events.append({**fields, "log_level": record.levelname.lower()})

    root = logging.getLogger()
    handler, level = Collect(logging.DEBUG), root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield events
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


@pytest.fixture
def capture_logs() -> CaptureLogs:
    """``with capture_logs() as logs:``: the kit logger's events logged inside the block,
    each as ``{"event": ..., **fields, "log_level": ...}`` (the shape structlog's
    ``capture_logs`` gives), read from the stdlib records."""
    return _capture_logs


# --- the stores on each backend ----------------------------------------------------------


class BackendUnderTest:
    """One backend's storage for a test: an empty data directory, or a fresh PostgreSQL
    database. Each :meth:`open_backend` is another opened backend on the same storage (on
    PostgreSQL: another replica, with its own pool); all are closed after the test."""

    def __init__(self, name: str, request: pytest.FixtureRequest) -> None:
        self.name = name
        self._closers: list[Callable[[], None]] = []
        self.url = request.getfixturevalue("pg_url") if name == "postgres" else ""
        self.dir = request.getfixturevalue("tmp_path")

    def storage(self) -> Any:
        """The storage (nothing opened)."""
        from robot_mcp_memory.backends import storage_at
        from robot_mcp_memory.backends.postgres import PgStorage

        if self.name == "sqlite":
            return storage_at(str(self.dir))
        return PgStorage(self.url, pool_size=4)

    @property
    def sqlite(self) -> bool:
        """True for the SQLite backend."""
        return self.name == "sqlite"

    def open_backend(self) -> Any:
        """Another opened backend on this storage."""
        backend = self.storage().open()
        self._closers.append(backend.close)
        return backend

    def open(self, **kwargs: Any) -> Any:
        """The process service over another opened backend (``robot_id``, ``clock``,
        ``embedder``, ``revisions_keep`` as it takes them)."""
        from robot_mcp_memory.processes import ProcessService

        return ProcessService(self.open_backend().processes, **kwargs)

    def fleet(self, **kwargs: Any) -> Any:
        """The fleet registry over another opened backend (``clock`` as it takes it)."""
        from robot_mcp_memory.fleet import FleetService

        return FleetService(self.open_backend().fleet, **kwargs)

    def settle(self, store: Any) -> None:
        """Wait for queued writes (SQLite's hot counters; PostgreSQL writes at once)."""
        store.repo.flush()

    def close(self) -> None:
        for close in reversed(self._closers):
            close()


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> Iterator[BackendUnderTest]:
    """Each test using it runs on both backends."""
    under_test = BackendUnderTest(request.param, request)
    yield under_test
    under_test.close()


@pytest.fixture
def sqlite_processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Any]]:
    """``open(path=None, **kwargs)``: a process service over ``path/index.db`` (a new
    directory by default), for what only SQLite has; closed after the test."""
    from robot_mcp_memory.backends import storage_at
    from robot_mcp_memory.processes import ProcessService

    opened: list[Any] = []

    def open_(path: Any = None, **kwargs: Any) -> Any:
        where = path if path is not None else tmp_path_factory.mktemp("index")
        backend = storage_at(str(where)).open()
        opened.append(backend)
        return ProcessService(backend.processes, **kwargs)

    yield open_
    for backend in reversed(opened):
        backend.close()


@pytest.fixture
def processes_backend(backend: BackendUnderTest) -> BackendUnderTest:
    """The process store on each backend (the same as ``backend``)."""
    return backend
