"""robot-mcp-kit: the Async Task Contract for robot capability MCP servers.

A long-running tool returns a ``task_id`` at once; the work runs as an asyncio task; the
server POSTs HMAC-signed events to the brain (at least once, in order, with retries);
``get_task`` / ``cancel_task`` / ``list_tasks`` let the brain reconcile by polling.

Importing this package needs only pydantic and httpx. ``register_task_tools`` and
``add_start_tool`` need the ``mcp`` extra and import it lazily, on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from robot_mcp_kit._exceptions import (
    ConfigurationError,
    InvalidArgument,
    InvalidPayload,
    InvalidTrigger,
    ManagerClosed,
    OutboxLocked,
    RobotMcpKitError,
    ServiceStartError,
    SignatureError,
    TaskManagerError,
)
from robot_mcp_kit._retry import Clock, RetryPolicy, SystemClock
from robot_mcp_kit._version import __version__
from robot_mcp_kit.events import EventPoster, PosterStats
from robot_mcp_kit.models import (
    SCHEMA_VERSION,
    TASK_EVENTS_TOOL_NAME,
    TASK_TOOL_NAMES,
    TERMINAL_STATES,
    EventType,
    InputAnswer,
    TaskEvent,
    TaskEventPage,
    TaskFailure,
    TaskInfo,
    TaskState,
    reliability,
)
from robot_mcp_kit.native_tasks import NativeTasks
from robot_mcp_kit.runtime import TaskRuntime
from robot_mcp_kit.serving import serve
from robot_mcp_kit.signing import SignatureReason, sign, verify
from robot_mcp_kit.tasks import (
    EventSink,
    NumberField,
    TaskBody,
    TaskContext,
    TaskError,
    TaskManager,
    TextField,
    TriggerType,
)

if TYPE_CHECKING:
    from robot_mcp_kit.fastmcp_ext import add_start_tool, register_task_tools


__all__ = [
    "SCHEMA_VERSION",
    "TASK_EVENTS_TOOL_NAME",
    "TASK_TOOL_NAMES",
    "TERMINAL_STATES",
    "Clock",
    "ConfigurationError",
    "EventPoster",
    "EventSink",
    "EventType",
    "InputAnswer",
    "InvalidArgument",
    "InvalidPayload",
    "InvalidTrigger",
    "ManagerClosed",
    "NativeTasks",
    "NumberField",
    "OutboxLocked",
    "PosterStats",
    "RetryPolicy",
    "RobotMcpKitError",
    "ServiceStartError",
    "SignatureError",
    "SignatureReason",
    "SystemClock",
    "TaskBody",
    "TaskContext",
    "TaskError",
    "TaskEvent",
    "TaskEventPage",
    "TaskFailure",
    "TaskInfo",
    "TaskManager",
    "TaskManagerError",
    "TaskRuntime",
    "TaskState",
    "TextField",
    "TriggerType",
    "__version__",
    "add_start_tool",
    "register_task_tools",
    "reliability",
    "serve",
    "sign",
    "verify",
]


def __getattr__(name: str) -> Any:
    # register_task_tools imports mcp; keep it out of the import of the package so the
    # models, signing, poster and task manager work where mcp is not installed.
    if name in ("add_start_tool", "register_task_tools"):
        from robot_mcp_kit import fastmcp_ext

        return getattr(fastmcp_ext, name)
    raise AttributeError(f"module 'robot_mcp_kit' has no attribute {name!r}")
