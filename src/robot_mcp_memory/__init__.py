"""robot_mcp_memory: the fleet's process memory as an MCP server named ``memory``.

``build_server(settings)`` makes the FastMCP server; ``load_settings()`` reads the
environment; ``serve(settings)`` runs it over HTTP or stdio; ``robot-mcp-memory``
(:mod:`robot_mcp_memory.__main__`) is the console script. ``open_memory(settings)`` opens the
services behind the tools (:class:`Memory`), which a :class:`StoreHolder` keeps open while
anyone uses them.

The errors (:class:`MemoryServerError` and everything under it, see
:mod:`robot_mcp_memory._exceptions`) need nothing beyond the standard library and are
imported at once; every other name is imported lazily, so that ``import robot_mcp_memory``
(and the console script's "install the memory extra" message) works without the
``memory`` extra.

The code is in concept folders, each package re-exporting its names in ``__init__``:
:mod:`.documents` (what a process document is), :mod:`.search` (finding documents),
:mod:`.store` (the process store), :mod:`.fleet` (the registry), :mod:`.tools` (the
handlers and their runner), :mod:`.http` (the ASGI app and auth); beside them
:mod:`.tenant`, :mod:`.policy` (the §6a rules), :mod:`.ports`, :mod:`.services`,
:mod:`.params` (the lessons), :mod:`.server`, :mod:`.settings`, :mod:`.limits`, :mod:`.db`
and :mod:`.logs`. The layers, checked by import-linter, run top to bottom: ``http`` >
``server`` > ``tools`` > ``services`` > ``policy`` > ``ports`` > ``store`` | ``params`` >
``search`` | ``fleet`` > ``documents`` > the shared bottom (``tenant``, ``settings``,
``db``, ``logs``, ``_exceptions``, ``limits``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from robot_mcp_memory._exceptions import (
    Busy,
    DamagedRow,
    DocError,
    DocTooLarge,
    EmbedderUnavailable,
    FleetError,
    MemoryServerError,
    SettingsError,
    TokenMapError,
    ToolFailure,
)

if TYPE_CHECKING:
    from robot_mcp_memory.http import serve
    from robot_mcp_memory.server import build_server
    from robot_mcp_memory.services import Memory, StoreHolder, open_memory
    from robot_mcp_memory.settings import SearchMode, Settings, Transport, load_settings

__all__ = [
    "Busy",
    "DamagedRow",
    "DocError",
    "DocTooLarge",
    "EmbedderUnavailable",
    "FleetError",
    "Memory",
    "MemoryServerError",
    "SearchMode",
    "Settings",
    "SettingsError",
    "StoreHolder",
    "TokenMapError",
    "ToolFailure",
    "Transport",
    "build_server",
    "load_settings",
    "open_memory",
    "serve",
]

_LAZY = {
    "Memory": "robot_mcp_memory.services",
    "SearchMode": "robot_mcp_memory.settings",
    "Settings": "robot_mcp_memory.settings",
    "StoreHolder": "robot_mcp_memory.services",
    "Transport": "robot_mcp_memory.settings",
    "build_server": "robot_mcp_memory.server",
    "load_settings": "robot_mcp_memory.settings",
    "open_memory": "robot_mcp_memory.services",
    "serve": "robot_mcp_memory.http",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'robot_mcp_memory' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
