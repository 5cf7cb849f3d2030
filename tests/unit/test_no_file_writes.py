"""Written state goes in a database: no code outside the store writes state to a file.

The memory spec's rule (BIN-547's CI guard, lifted in §7 item 2b): an AST walk over
``src/`` for write-shaped calls — ``open(..., "w"/"a"/"x"/"+")``, ``Path.open`` likewise,
``write_text``/``write_bytes``, ``json.dump``/``yaml.dump``/``pickle.dump`` to a file,
``shutil.copy*``/``move``, ``os.rename``/``replace`` — fails for any outside the store
machinery, which owns its SQLite files (and the rename that creates one atomically).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

# The store machinery is the one place allowed to create and rename files. The conformance
# suite's JSON report (--report-json FILE) is an output the user asks for, like pytest's
# JUnit XML, not state: its writer is the other. The memory server's operator commands
# (backup, restore, dump, load) write the directories the operator names: outputs too; the
# SQLite backend's file backup (the copy those commands make of a data directory) is theirs.
ALLOWED = (
    "robot_mcp_kit/store/",
    "robot_mcp_kit/params.py",
    "robot_mcp_conformance/_report.py",
    "robot_mcp_memory/operations/",
    "robot_mcp_memory/backends/sqlite/_backup.py",
)

_WRITE_METHODS = {"write_text", "write_bytes"}
_DUMPERS = {("json", "dump"), ("yaml", "dump"), ("yaml", "safe_dump"), ("pickle", "dump")}
_FS_CALLS = {
    ("shutil", "copy"),
    ("shutil", "copy2"),
    ("shutil", "copyfile"),
    ("shutil", "copytree"),
    ("shutil", "move"),
    ("os", "rename"),
    ("os", "replace"),
    ("os", "renames"),
}


def _mode_writes(call: ast.Call, position: int) -> bool:
    """True if the call's mode argument (positional ``position`` or ``mode=``) can write."""
    mode: ast.expr | None = None
    if len(call.args) > position:
        mode = call.args[position]
    for kw in call.keywords:
        if kw.arg == "mode":
            mode = kw.value
    if mode is None:
        return False
    if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
        return any(c in mode.value for c in "wax+")
    return True  # a computed mode might write: flag it


def _has_stream(call: ast.Call, owner: str | None) -> bool:
    """json/pickle.dump always write to a file; yaml.dump only when given a stream."""
    if owner != "yaml":
        return True
    return len(call.args) > 1 or any(kw.arg == "stream" for kw in call.keywords)


def write_calls(source: str, filename: str = "<src>") -> list[str]:
    """The write-shaped calls in ``source``, as ``file:line: what``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        what = None
        if isinstance(func, ast.Name) and func.id == "open" and _mode_writes(node, 1):
            what = "open(..., write mode)"
        elif isinstance(func, ast.Attribute):
            owner = func.value.id if isinstance(func.value, ast.Name) else None
            if func.attr in _WRITE_METHODS:
                what = f".{func.attr}()"
            elif func.attr == "open" and owner not in {"os", "io"} and _mode_writes(node, 0):
                what = ".open(write mode)"
            elif func.attr == "open" and owner == "io" and _mode_writes(node, 1):
                what = "io.open(..., write mode)"
            elif (owner, func.attr) in _DUMPERS and _has_stream(node, owner):
                what = f"{owner}.{func.attr}() to a file"
            elif (owner, func.attr) in _FS_CALLS:
                what = f"{owner}.{func.attr}()"
        if what:
            found.append(f"{filename}:{node.lineno}: {what}")
    return found


def test_no_code_outside_the_store_writes_state_to_files():
    """Every write-shaped call under src/ is inside the store machinery."""
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith(ALLOWED):
            continue
        offenders += write_calls(path.read_text(encoding="utf-8"), rel)
    assert offenders == [], "state written to files outside the store:\n" + "\n".join(offenders)


@pytest.mark.parametrize(
    "snippet",
    [
        "open('fleet.json', 'w').write('{}')",
        "with open(p, mode='a') as f: pass",
        "open(p, 'r+')",
        "Path('x').write_text('hi')",
        "p.write_bytes(b'')",
        "p.open('w')",
        "json.dump(data, fh)",
        "yaml.safe_dump(data, fh)",
        "shutil.copy(a, b)",
        "os.replace(tmp, path)",
        "open(p, mode)",
    ],
)
def test_checker_catches_writes(snippet):
    """The checker flags each write shape (so the guard above can fail)."""
    assert len(write_calls(snippet)) == 1


@pytest.mark.parametrize(
    "snippet",
    [
        "open(p).read()",
        "open(p, 'rb')",
        "p.read_text()",
        "json.dumps(data)",
        "yaml.safe_dump(data, default_flow_style=True)",
        "json.load(fh)",
        "os.open(p, os.O_RDONLY)",
    ],
)
def test_checker_ignores_reads(snippet):
    """Reads and in-memory serialisation are not writes."""
    assert write_calls(snippet) == []
