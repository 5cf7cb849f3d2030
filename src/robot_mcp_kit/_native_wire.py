"""What both native task modules share: the extension's id, error codes, errors.

Imports nothing of the kit and no MCP framework.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "HEADER_MISMATCH",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "KIT_TASK_ID_META_KEY",
    "MISSING_REQUIRED_CLIENT_CAPABILITY",
    "TASKS_EXTENSION_ID",
    "NativeFace",
    "NativeTaskError",
    "missing_capability",
]

TASKS_EXTENSION_ID = "io.modelcontextprotocol/tasks"
"""The extension's identifier, advertised in ``server/discover`` and declared by clients."""

KIT_TASK_ID_META_KEY = "io.github.robot-mcp/task_id"
"""``_meta`` key of every native task answer: the kit's ``task_id``, as the events carry it."""

INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021


@dataclass(frozen=True)
class NativeTaskError(Exception):
    """A JSON-RPC error a native task method answers (the adapter raises it as MCP's)."""

    code: int
    message: str
    data: dict[str, Any] | None = None

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


def missing_capability(what: str) -> NativeTaskError:
    """``-32021`` naming the tasks extension, with the ``requiredCapabilities`` data."""
    return NativeTaskError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"{what} needs the {TASKS_EXTENSION_ID} extension: declare it in the request's "
        "_meta clientCapabilities.extensions, on protocol 2026-07-28.",
        {"requiredCapabilities": {"extensions": {TASKS_EXTENSION_ID: {}}}},
    )


class NativeFace(Protocol):
    """What a framework adapter asks of ``NativeTasks`` (``robot_mcp_kit.native_tasks``)."""

    @property
    def required_tools(self) -> Collection[str]: ...

    def task_started(self, tool: str, answer: Mapping[str, Any] | None) -> Any: ...

    def created(self, info: Any, owner: str) -> dict[str, Any]: ...

    def get(self, native_id: object, owner: str) -> dict[str, Any]: ...

    async def update(self, native_id: object, owner: str, responses: object) -> None: ...

    async def cancel(self, native_id: object, owner: str) -> None: ...
