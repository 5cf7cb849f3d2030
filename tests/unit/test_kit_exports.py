"""The public namespaces: sorted ``__all__`` whose every name resolves."""

from __future__ import annotations

import importlib

import pytest

PUBLIC_MODULES = [
    "robot_mcp_kit",
    "robot_mcp_kit.events",
    "robot_mcp_kit.fastmcp_ext",
    "robot_mcp_kit.models",
    "robot_mcp_kit.signing",
    "robot_mcp_kit.tasks",
    "robot_mcp_kit.testing",
]


def isort_key(name: str) -> tuple[int, str]:
    """The order ruff's RUF022 keeps: CONSTANTS, then Classes, then functions."""
    if name.isupper():
        return (0, name)
    if name[0].isupper():
        return (1, name)
    return (2, name)


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_all_is_sorted_and_unique(module_name):
    """``__all__`` is sorted isort-style and names each symbol once."""
    names = importlib.import_module(module_name).__all__
    assert list(names) == sorted(names, key=isort_key)
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_exported_name_resolves(module_name):
    """Every name in ``__all__`` is an attribute of the module (lazy ones included)."""
    module = importlib.import_module(module_name)
    missing = [name for name in module.__all__ if getattr(module, name, None) is None]
    assert missing == []


def test_package_reexports_the_task_api():
    """The task API is importable from the package root and is the same object."""
    import robot_mcp_kit
    import robot_mcp_kit.fastmcp_ext
    import robot_mcp_kit.tasks

    for name in ("TaskBody", "TaskContext", "TaskError", "TaskManager"):
        assert getattr(robot_mcp_kit, name) is getattr(robot_mcp_kit.tasks, name)
    assert robot_mcp_kit.register_task_tools is robot_mcp_kit.fastmcp_ext.register_task_tools
