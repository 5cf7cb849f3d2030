"""The public API of robot_mcp_memory, in the style of httpx's ``test_exported_members``.

The package's ``__all__`` is exactly its public names; each public module's ``__all__`` is
sorted (ruff's isort-style order: CONSTANTS, Classes, functions), names only what the
module really provides, and lists every class and function the module defines without a
leading underscore. A new public name therefore needs a line in ``__all__`` (and a
thought about whether it should be public), and a stale entry fails here.
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path
from types import ModuleType

import pytest

import robot_mcp_memory

PUBLIC_MODULES = (
    "fleet.validation",
    "logs",
    "params",
    "server",
    "services",
    "settings",
    "tenant",
    "transfer",
)
"""Modules without a leading underscore: each ``__all__`` lists what the module defines."""

PACKAGES = (
    "backends",
    "backends.postgres",
    "backends.sqlite",
    "fleet",
    "http",
    "operations",
    "processes",
    "shares",
    "tools",
)
"""Subpackages: each ``__init__`` re-exports its private modules' public names."""

_CONSTANT = re.compile(r"[A-Z0-9_]+")


def _isort_key(name: str) -> tuple[int, str]:
    if _CONSTANT.fullmatch(name):
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"robot_mcp_memory.{name}")


def test_package_all_is_its_public_names() -> None:
    """robot_mcp_memory.__all__ is sorted, and is every public name the package offers."""
    names = robot_mcp_memory.__all__
    assert names == sorted(names, key=_isort_key)
    eager = {
        n
        for n, v in vars(robot_mcp_memory).items()
        if not n.startswith("_")
        and not inspect.ismodule(v)
        and n != "annotations"
        and n not in ("TYPE_CHECKING", "Any", "importlib")
    }
    lazy = set(robot_mcp_memory._LAZY)
    assert set(names) == eager | lazy
    assert set(names) <= set(dir(robot_mcp_memory))


@pytest.mark.parametrize("name", robot_mcp_memory.__all__)
def test_package_names_are_importable(name: str) -> None:
    """Each name of the package's __all__ resolves (lazily for the services)."""
    assert getattr(robot_mcp_memory, name) is not None


def test_unknown_package_name_is_an_attribute_error() -> None:
    """A name the package does not offer is an AttributeError naming it."""
    with pytest.raises(AttributeError, match="no_such_name"):
        robot_mcp_memory.no_such_name  # noqa: B018


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_module_all_is_sorted_and_true(module_name: str) -> None:
    """A public module's __all__ is sorted, unique, and every entry is importable."""
    module = _module(module_name)
    names = list(module.__all__)
    assert names == sorted(names, key=_isort_key)
    assert len(names) == len(set(names))
    missing = [n for n in names if not hasattr(module, n)]
    assert missing == []


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_module_all_lists_what_it_defines(module_name: str) -> None:
    """Every class and function a public module defines without a leading underscore is in
    its __all__."""
    module = _module(module_name)
    defined = {
        n
        for n, v in vars(module).items()
        if not n.startswith("_")
        and (inspect.isclass(v) or inspect.isfunction(v))
        and getattr(v, "__module__", None) == module.__name__
    }
    assert defined - set(module.__all__) == set()


def test_errors_share_one_base_and_keep_their_builtins() -> None:
    """Every error the package raises on purpose is a MemoryServerError, and still the
    builtin it replaced, so an existing ``except ValueError`` keeps catching it."""
    base = robot_mcp_memory.MemoryServerError
    for error, builtin in [
        (robot_mcp_memory.DocError, ValueError),
        (robot_mcp_memory.DocTooLarge, ValueError),
        (robot_mcp_memory.FleetError, ValueError),
        (robot_mcp_memory.SettingsError, ValueError),
        (robot_mcp_memory.TokenMapError, ValueError),
        (robot_mcp_memory.EmbedderUnavailable, RuntimeError),
        (robot_mcp_memory.DamagedRow, Exception),
        (robot_mcp_memory.ToolFailure, Exception),
        (robot_mcp_memory.Busy, Exception),
    ]:
        assert issubclass(error, base)
        assert issubclass(error, builtin)


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_module_all_names_only_what_it_defines(module_name: str) -> None:
    """A public module re-exports nothing: every name in its __all__ is defined there
    (a class or function by its __module__, anything else by not being imported)."""
    module = _module(module_name)
    source = inspect.getsource(module)
    foreign = []
    for name in module.__all__:
        value = getattr(module, name)
        home = getattr(value, "__module__", None)
        imported = (inspect.isclass(value) or inspect.isfunction(value)) and (
            home != module.__name__
        )
        if imported or not re.search(rf"^(class |def |async def )?{name}\b", source, re.M):
            foreign.append(name)
    assert foreign == []


@pytest.mark.parametrize("package", PACKAGES)
def test_package_all_is_sorted_and_importable(package: str) -> None:
    """A subpackage's __all__ is sorted, unique and importable."""
    module = _module(package)
    names = list(module.__all__)
    assert names == sorted(names, key=_isort_key)
    assert len(names) == len(set(names))
    assert [n for n in names if not hasattr(module, n)] == []


def test_root_surface_is_small() -> None:
    """The package root offers the server, its settings, the services and the errors."""
    assert len(robot_mcp_memory.__all__) <= 20


def test_public_names_stay_within_budget() -> None:
    """Every module and package a caller may import (no leading underscore on its path) is
    listed above, and together their ``__all__`` name at most 160 names: a face shows the
    rooms, the rest stays in the private modules (decision 0033)."""
    root = Path(robot_mcp_memory.__file__).parent
    public = set()
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts and not any(p.startswith("_") for p in parts):
            public.add(".".join(parts))
    assert public == set(PUBLIC_MODULES) | set(PACKAGES)
    total = len(robot_mcp_memory.__all__) + sum(
        len(_module(name).__all__) for name in (*PUBLIC_MODULES, *PACKAGES)
    )
    assert total <= 160
