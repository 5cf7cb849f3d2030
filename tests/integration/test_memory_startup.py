"""robot-mcp-memory refuses to start on what a restart cannot fix: one line, exit 2."""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    "garbage",
    [os.urandom(4096), b"SQLite format 3\x00" + b"\xff" * 200, b'{"truncated": tr'],
    ids=["random-bytes", "bad-header-body", "truncated-json"],
)
def test_corrupt_index_db_refuses_with_one_line_and_exit_2(tmp_path, garbage, run_memory_server):
    """Garbage in index.db: exit 2, one stderr line naming the file and the remedy, no traceback,
    and the file is left as it was."""
    index = tmp_path / "index.db"
    index.write_bytes(garbage)
    result = run_memory_server({"MEMORY_DATA_DIR": str(tmp_path)})
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert str(index) in lines[0]
    assert "backup" in lines[0]
    assert "move it aside" in lines[0]
    assert "Traceback" not in result.stderr
    assert index.read_bytes() == garbage


def test_invalid_transport_refuses_with_one_line_and_exit_2(tmp_path, run_memory_server):
    """MCP_TRANSPORT=bogus: exit 2, one line naming the variable and the valid values."""
    result = run_memory_server({"MCP_TRANSPORT": "bogus", "MEMORY_DATA_DIR": str(tmp_path)})
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "MCP_TRANSPORT='bogus'" in result.stderr
    assert "streamable-http" in result.stderr
    assert not (tmp_path / "index.db").exists()
