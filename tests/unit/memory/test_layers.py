"""The memory server's rooms as the source states them (decision 0033).

import-linter (``uv run lint-imports``, pyproject's contracts) holds the layers, the two
adapters apart and the drivers below the backends as far as imports of modules go; this
AST walk holds the last one for every import statement, wherever it stands (inside a
function, under ``TYPE_CHECKING``): ``sqlite3``, ``psycopg`` and ``pgvector`` are named only
under ``src/robot_mcp_memory/backends/``, each driver only in its own adapter (the
tokenizer SQLite's FTS5 calls is the one shared module that knows ``sqlite3``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import robot_mcp_memory

SRC = Path(robot_mcp_memory.__file__).parent

DRIVERS = {
    "sqlite3": ("backends/sqlite/", "backends/_tokens.py"),
    "psycopg": ("backends/postgres/",),
    "psycopg_pool": ("backends/postgres/",),
    "pgvector": ("backends/postgres/",),
}
"""Each driver, and where it may be imported (paths under src/robot_mcp_memory); pgvector's
Python package is not imported today (its SQL is), and would belong to PostgreSQL's."""


def _imported(tree: ast.AST) -> list[tuple[int, str]]:
    """Every top-level package an import statement names, with its line."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module.split(".")[0]))
    return found


def test_drivers_are_imported_only_in_their_adapters() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        for line, name in _imported(ast.parse(path.read_text(encoding="utf-8"))):
            allowed = DRIVERS.get(name)
            if allowed is not None and not rel.startswith(allowed):
                offenders.append(f"{rel}:{line}: {name}")
    assert offenders == []


@pytest.mark.parametrize("driver", ["psycopg", "psycopg_pool", "sqlite3"])
def test_the_walk_sees_each_driver(driver: str) -> None:
    """Each driver is imported somewhere it may be (so the walk above is not vacuous)."""
    seen = [
        path
        for path in SRC.rglob("*.py")
        if any(name == driver for _, name in _imported(ast.parse(path.read_text("utf-8"))))
    ]
    assert seen
