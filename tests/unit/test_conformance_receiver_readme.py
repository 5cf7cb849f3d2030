"""conformance/README.md's receiver table lists every receiver test with its clause id."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import robot_mcp_conformance.receiver
from robot_mcp_conformance._checks import CLAUSE_MARKER

README = Path(__file__).resolve().parents[2] / "conformance" / "README.md"
TEXT = README.read_text(encoding="utf-8")


def _receiver_tests() -> dict[str, tuple[str, bool]]:
    """Test function name → (its clause id, whether it is parametrized)."""
    found = {}
    package = robot_mcp_conformance.receiver
    for info in pkgutil.iter_modules(package.__path__):
        if not info.name.startswith("test_"):
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for name, function in vars(module).items():
            if not name.startswith("test_") or getattr(function, "__module__", "") != (
                module.__name__
            ):
                continue
            marks = getattr(function, "pytestmark", [])
            clause = next(m.args[0] for m in marks if m.name == CLAUSE_MARKER)
            found[name] = (clause.id, any(m.name == "parametrize" for m in marks))
    return found


def _rows() -> dict[str, str]:
    section = TEXT.split("### What it checks (receiver)", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| `(test_[^`]+)` \| `([a-z.-]+)` \|", section, re.MULTILINE)
    return dict(rows)


def test_every_receiver_test_has_one_row_with_its_clause_id():
    """One row per test (``name[...]`` when parametrized), naming the clause it enforces."""
    tests = _receiver_tests()
    rows = _rows()
    assert len(tests) >= 20
    assert {name.removesuffix("[...]") for name in rows} == set(tests)
    for written, clause_id in rows.items():
        name = written.removesuffix("[...]")
        assert clause_id == tests[name][0], f"{name}: the row says {clause_id}"
        assert written.endswith("[...]") == tests[name][1], written


def test_the_exit_codes_table_matches_the_command_line():
    """The README's exit codes are the ones robot-mcp-conformance --help prints."""
    from robot_mcp_conformance._cli import EXIT_CODES

    section = TEXT.split("### Exit codes", 1)[1].split("\n## ", 1)[0]
    codes = [int(c) for c in re.findall(r"^\| (\d) \|", section, re.MULTILINE)]
    assert codes == [code for code, _ in EXIT_CODES]
