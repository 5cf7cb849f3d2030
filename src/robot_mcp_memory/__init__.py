"""robot_mcp_memory: the fleet's process memory as an MCP server named ``memory``.

``build_server(settings)`` makes the FastMCP server; ``load_settings()`` reads the
environment; ``robot-mcp-memory`` (:mod:`robot_mcp_memory.__main__`) runs it. The services
behind the tools (:class:`ProcessStore`, :class:`FleetRegistry`, :class:`ScopedParams`
over :func:`open_index`) are exported for callers that embed them.

The errors (:class:`MemoryServerError` and everything under it, see
:mod:`robot_mcp_memory._exceptions`) need nothing beyond the standard library and are
imported at once; every other name is imported lazily, so that ``import robot_mcp_memory``
(and the console script's "install the memory extra" message) works without the
``memory`` extra.

Public modules (each with a sorted ``__all__``, checked by
``tests/unit/test_memory_exports.py``): :mod:`.app`, :mod:`.db`, :mod:`.docmodel`,
:mod:`.embedding`, :mod:`.fleet`, :mod:`.limits`, :mod:`.logs`, :mod:`.params`,
:mod:`.policy`, :mod:`.search`, :mod:`.server`, :mod:`.settings`, :mod:`.store`,
:mod:`.tenancy`, :mod:`.vectors`. Modules whose name starts with ``_`` are private: the
tools (``_tools_*``), the row reader (``_rows``), the argument checks (``_validation``),
the write path (``_writes``, ``_vector_table``), the query words and typo repair
(``_query_words``, ``_typo_repair``), the frontmatter format (``_frontmatter``), the
fleet records (``_fleet_records``) and the HTTP guards (``_http_limits``,
``_jsonrpc_guard``); their public names are re-exported by the modules above.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from robot_mcp_memory._exceptions import (
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
    from robot_mcp_memory.db import open_index
    from robot_mcp_memory.docmodel import ProcessDoc
    from robot_mcp_memory.fleet import FleetRegistry
    from robot_mcp_memory.params import ScopedParams
    from robot_mcp_memory.server import StoreHolder, build_server
    from robot_mcp_memory.settings import SearchMode, Settings, Transport, load_settings
    from robot_mcp_memory.store import ProcessStore

__all__ = [
    "DamagedRow",
    "DocError",
    "DocTooLarge",
    "EmbedderUnavailable",
    "FleetError",
    "FleetRegistry",
    "MemoryServerError",
    "ProcessDoc",
    "ProcessStore",
    "ScopedParams",
    "SearchMode",
    "Settings",
    "SettingsError",
    "StoreHolder",
    "TokenMapError",
    "ToolFailure",
    "Transport",
    "build_server",
    "load_settings",
    "open_index",
]

_LAZY = {
    "FleetRegistry": "robot_mcp_memory.fleet",
    "ProcessDoc": "robot_mcp_memory.docmodel",
    "ProcessStore": "robot_mcp_memory.store",
    "ScopedParams": "robot_mcp_memory.params",
    "SearchMode": "robot_mcp_memory.settings",
    "Settings": "robot_mcp_memory.settings",
    "StoreHolder": "robot_mcp_memory.server",
    "Transport": "robot_mcp_memory.settings",
    "build_server": "robot_mcp_memory.server",
    "load_settings": "robot_mcp_memory.settings",
    "open_index": "robot_mcp_memory.db",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'robot_mcp_memory' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
