"""robot_mcp_memory: the fleet's process memory as an MCP server named ``memory``.

``build_server(settings)`` makes the FastMCP server; ``load_settings()`` reads the
environment; ``robot-mcp-memory`` (:mod:`robot_mcp_memory.__main__`) runs it. The names are
imported lazily so that ``import robot_mcp_memory`` (and the console script's "install the
memory extra" message) works without the ``memory`` extra.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from robot_mcp_memory.server import build_server
    from robot_mcp_memory.settings import Settings, SettingsError, Transport, load_settings

__all__ = [
    "Settings",
    "SettingsError",
    "Transport",
    "build_server",
    "load_settings",
]

_LAZY = {
    "Settings": "robot_mcp_memory.settings",
    "SettingsError": "robot_mcp_memory.settings",
    "Transport": "robot_mcp_memory.settings",
    "load_settings": "robot_mcp_memory.settings",
    "build_server": "robot_mcp_memory.server",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'robot_mcp_memory' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
