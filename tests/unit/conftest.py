"""Fixtures shared by several unit-test modules.

Test modules are imported with ``--import-mode=importlib`` and cannot import each other,
so what more than one of them needs lives here as a fixture.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from robot_mcp_kit import TaskManager
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
