"""fake_rvc's public API: ``__all__`` is every public name, sorted (httpx's habit)."""

from __future__ import annotations

from types import ModuleType

import pytest

import fake_rvc

# Resolved on first access: they import fastapi (the ``fake`` extra).
LAZY = {
    "EVENTS_JSONL_PATH",
    "EVENTS_PATH",
    "INSPECT_PATH",
    "FakeRvcServer",
    "create_app",
    "get_clock",
    "get_recorder",
    "get_secrets",
}
# Names a module namespace holds that are no part of the API.
NOT_API = {"annotations", "TYPE_CHECKING", "Any"}


def isort_key(name: str) -> tuple[int, str]:
    """The order ruff's RUF022 keeps: CONSTANTS, then Classes, then functions."""
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


def test_all_is_sorted_and_unique():
    """``fake_rvc.__all__`` is sorted isort-style and names each symbol once."""
    assert fake_rvc.__all__ == sorted(set(fake_rvc.__all__), key=isort_key)


def test_all_names_every_public_member():
    """Every public name of the package is in ``__all__``, and nothing else is."""
    eager = {
        name
        for name, value in vars(fake_rvc).items()
        if not name.startswith("_") and not isinstance(value, ModuleType) and name not in NOT_API
    }
    assert set(fake_rvc.__all__) == eager | LAZY


@pytest.mark.parametrize("name", fake_rvc.__all__)
def test_every_exported_name_resolves(name):
    """Each name in ``__all__`` is an attribute of the package (lazy ones included)."""
    assert getattr(fake_rvc, name) is not None


def test_errors_share_one_base_and_keep_their_builtin():
    """Every error is a FakeRvcError and still the builtin it replaced."""
    builtins = {
        fake_rvc.ConfigError: ValueError,
        fake_rvc.SecretsError: ValueError,
        fake_rvc.FaultError: ValueError,
        fake_rvc.WaitTimeout: TimeoutError,
        fake_rvc.ServerError: RuntimeError,
        fake_rvc.RepairError: RuntimeError,
        fake_rvc.ConnectionDropped: RuntimeError,
    }
    for error, builtin in builtins.items():
        assert issubclass(error, fake_rvc.FakeRvcError)
        assert issubclass(error, builtin)
