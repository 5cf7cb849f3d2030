"""TaskManager, TaskContext, TaskError (kit spec §4.2). SKELETON — being implemented."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["TaskBody", "TaskContext", "TaskError", "TaskManager"]


class TaskError(Exception):
    """Raise from a task body to fail the task with structured info."""


class TaskContext:
    """Handed to every task body."""


TaskBody = Callable[[TaskContext], Awaitable[dict[str, Any]]]


class TaskManager:
    """Runs task bodies as asyncio tasks."""
