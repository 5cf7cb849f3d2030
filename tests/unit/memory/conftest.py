"""The memory server's storage for a test, written once.

:class:`BackendUnderTest` is one backend's storage: an empty data directory (SQLite) or a
fresh database on this worker's PostgreSQL (``pg_url``, tests/conftest.py). Two fixtures
hand it out:

- ``backend``: each test using it runs on both backends. The repository contract
  (``backends/contract.py``) and what crosses the seam (the spans) use it.
- ``sqlite_backend``: SQLite only. The rules live above the storage
  (:class:`~robot_mcp_memory.processes.ProcessService`,
  :class:`~robot_mcp_memory.fleet.FleetService`, the tools), so they are tested once, on
  the fast backend; the contract holds PostgreSQL to the same answers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from robot_mcp_memory import Settings
from robot_mcp_memory.backends import Backend, Storage, storage_at
from robot_mcp_memory.backends.postgres import PgStorage
from robot_mcp_memory.fleet import FleetService
from robot_mcp_memory.processes import ProcessService


class BackendUnderTest:
    """One backend's storage for a test (nothing opened until asked). Each
    :meth:`open_backend` is another opened backend on the same storage (on PostgreSQL:
    another replica, with its own pool); all are closed after the test."""

    def __init__(self, name: str, request: pytest.FixtureRequest, n: int = 0) -> None:
        self.name = name
        self._request = request
        self._n = n
        self._closers: list[Callable[[], None]] = []
        self.url = request.getfixturevalue("pg_new_database")() if name == "postgres" else ""
        self.dir = request.getfixturevalue("tmp_path") / ("data" if n == 0 else f"data{n}")

    @property
    def sqlite(self) -> bool:
        """True for the SQLite backend."""
        return self.name == "sqlite"

    def elsewhere(self) -> BackendUnderTest:
        """Another empty storage of this backend (closed with this one)."""
        other = BackendUnderTest(self.name, self._request, self._n + 1)
        self._closers.append(other.close)
        return other

    def storage(self) -> Storage:
        """The storage (nothing opened)."""
        return storage_at(str(self.dir)) if self.sqlite else PgStorage(self.url, pool_size=4)

    def settings(self, **fields: Any) -> Settings:
        """The server's settings on this storage (``fields`` as :class:`Settings` takes
        them)."""
        return Settings(data_dir=self.dir, database_url=self.url or None, **fields)

    def open_backend(self) -> Backend:
        """Another opened backend on this storage."""
        backend = self.storage().open()
        self._closers.append(backend.close)
        return backend

    def open(self, **kwargs: Any) -> ProcessService:
        """The process service over another opened backend (``robot_id``, ``clock``,
        ``embedder``, ``revisions_keep`` as it takes them)."""
        return ProcessService(self.open_backend().processes, **kwargs)

    def fleet(self, **kwargs: Any) -> FleetService:
        """The fleet registry over another opened backend (``clock`` as it takes it)."""
        return FleetService(self.open_backend().fleet, **kwargs)

    def settle(self, store: ProcessService) -> None:
        """Wait for queued writes (SQLite's hot counters; PostgreSQL writes at once)."""
        store.repo.flush()

    def close(self) -> None:
        for close in reversed(self._closers):
            close()
        self._closers.clear()


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> Iterator[BackendUnderTest]:
    """Each test using it runs on both backends."""
    under_test = BackendUnderTest(request.param, request)
    yield under_test
    under_test.close()


@pytest.fixture
def sqlite_backend(request: pytest.FixtureRequest) -> Iterator[BackendUnderTest]:
    """The SQLite backend: where the rules are tested, once."""
    under_test = BackendUnderTest("sqlite", request)
    yield under_test
    under_test.close()


@pytest.fixture
def postgres_backend(request: pytest.FixtureRequest) -> Iterator[BackendUnderTest]:
    """The PostgreSQL backend, beside ``sqlite_backend`` where a test compares the two."""
    under_test = BackendUnderTest("postgres", request)
    yield under_test
    under_test.close()


@pytest.fixture
def sqlite_processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Any]]:
    """``open(path=None, **kwargs)``: a process service over ``path/index.db`` (a new
    directory by default), for what only SQLite has (reopening one file, its writer);
    closed after the test."""
    opened: list[Backend] = []

    def open_(path: Any = None, **kwargs: Any) -> ProcessService:
        where = path if path is not None else tmp_path_factory.mktemp("index")
        backend = storage_at(str(where)).open()
        opened.append(backend)
        return ProcessService(backend.processes, **kwargs)

    yield open_
    for backend in reversed(opened):
        backend.close()
