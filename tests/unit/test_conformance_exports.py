"""robot_mcp_conformance's public API: ``__all__`` is every public name, sorted (httpx's habit)."""

from __future__ import annotations

from types import ModuleType

import pytest

import robot_mcp_conformance


def isort_key(name: str) -> tuple[int, str]:
    """The order ruff's RUF022 keeps: CONSTANTS, then Classes, then functions."""
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


def test_all_is_sorted_and_unique():
    """``__all__`` is sorted isort-style and names each symbol once."""
    names = robot_mcp_conformance.__all__
    assert names == sorted(set(names), key=isort_key)


def test_all_names_every_public_member():
    """Every public name of the package (and ``__version__``) is in ``__all__``, nothing else."""
    public = {
        name
        for name, value in vars(robot_mcp_conformance).items()
        if (not name.startswith("_") or name == "__version__") and not isinstance(value, ModuleType)
    }
    assert set(robot_mcp_conformance.__all__) == public


@pytest.mark.parametrize("name", robot_mcp_conformance.__all__)
def test_every_exported_name_resolves(name):
    """Each name in ``__all__`` is an attribute of the package."""
    assert getattr(robot_mcp_conformance, name) is not None


def test_errors_share_one_base_and_keep_their_builtin():
    """Every error is a ConformanceError and still the builtin it replaced."""
    for error, builtin in (
        (robot_mcp_conformance.ConfigError, ValueError),
        (robot_mcp_conformance.ServerStartError, RuntimeError),
        (robot_mcp_conformance.TargetError, RuntimeError),
        (robot_mcp_conformance.HookError, RuntimeError),
    ):
        assert issubclass(error, robot_mcp_conformance.ConformanceError)
        assert issubclass(error, builtin)
