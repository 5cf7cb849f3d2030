"""The robot-mcp-memory entry point: --help, the missing-extra line, refusing bad settings."""

from __future__ import annotations

import os
import subprocess
import sys

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


# Run the entry point in a child where importing structlog (part of the memory extra)
# fails, as it would in an environment installed without the extra.
_WITHOUT_STRUCTLOG = """
import importlib.abc, sys

class BlockStructlog(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "structlog" or name.startswith("structlog."):
            raise ImportError(f"No module named {name!r}")
        return None

sys.meta_path.insert(0, BlockStructlog())
from robot_mcp_memory.__main__ import main
raise SystemExit(main([]))
"""


def test_missing_extra_is_one_line_naming_it():
    """Without the memory extra: exit 1 and one stderr line naming the extra, no traceback."""
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_STRUCTLOG],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert done.returncode == entry.EXIT_MISSING_EXTRA, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert "'memory' extra" in done.stderr
    assert "structlog" in done.stderr
    assert "robot-mcp-kit[memory]" in done.stderr
    assert "Traceback" not in done.stderr


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


def test_version_flag_prints_the_package_version(capsys):
    """--version prints the one version of the distribution and exits 0."""
    from robot_mcp_kit import __version__
    from robot_mcp_memory.__main__ import main

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"robot-mcp-memory {__version__}"
