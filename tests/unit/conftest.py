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
