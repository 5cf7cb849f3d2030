"""The robot-mcp-memory entry point: --help, the missing-extra line, refusing bad settings."""

from __future__ import annotations

import pytest

import robot_mcp_memory
from robot_mcp_memory import __main__ as entry
from robot_mcp_memory.settings import ENV_VARS


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)


def test_help_lists_every_variable_and_exit_status(capsys):
    """--help explains each environment variable with its default, and exit status 2."""
    with pytest.raises(SystemExit) as info:
        entry.main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for name, (_, default, _) in ENV_VARS.items():
        assert name in out
        assert default in out
    assert "robot-mcp-memory" in out
    assert "/healthz" in out
    assert "2 invalid setting" in out


def test_missing_extra_is_one_line_naming_it(monkeypatch, capsys):
    """Without the memory extra: exit 1 and one stderr line naming the extra, no traceback."""
    monkeypatch.setattr(entry, "_EXTRA_MODULES", ("mcp", "robot_mcp_memory_no_such_module"))
    assert entry.main([]) == entry.EXIT_MISSING_EXTRA
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "'memory' extra" in err
    assert "robot-mcp-kit[memory]" in err


def test_invalid_setting_refuses_with_exit_2(monkeypatch, capsys):
    """A bad MCP_PORT: exit 2 and one line naming the variable."""
    monkeypatch.setenv("MCP_PORT", "99999")
    assert entry.main([]) == entry.EXIT_CONFIG
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("robot-mcp-memory: invalid MCP_PORT='99999'")


def test_package_exports_are_sorted_and_lazy():
    """The package's __all__ is sorted and every name resolves on first access."""
    assert robot_mcp_memory.__all__ == sorted(robot_mcp_memory.__all__)
    for name in robot_mcp_memory.__all__:
        assert getattr(robot_mcp_memory, name) is not None
    with pytest.raises(AttributeError, match="nope"):
        robot_mcp_memory.nope  # noqa: B018
