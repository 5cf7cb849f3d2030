"""conformance/README.md lists every test the suite collects, so the table cannot drift.

The "What it checks" table has one row per test function (a parametrized one written
``name[...]``), and the example run shows every collected test id once, with the counts
pytest prints for it. The collected tests are read from the suite's own modules, as pytest
would collect them: each ``test_*`` function of a ``robot_mcp_conformance.test_*`` module,
one id per parameter of its ``parametrize`` mark.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import robot_mcp_conformance

README = Path(__file__).resolve().parents[2] / "conformance" / "README.md"
TEXT = README.read_text(encoding="utf-8")


def _suite_tests() -> dict[str, list[str]]:
    """Test function name → its collected ids, over every module of the suite."""
    found: dict[str, list[str]] = {}
    for info in pkgutil.iter_modules(robot_mcp_conformance.__path__):
        if not info.name.startswith("test_"):
            continue
        module = importlib.import_module(f"robot_mcp_conformance.{info.name}")
        for name, function in inspect.getmembers(module, inspect.isfunction):
            if not name.startswith("test_") or function.__module__ != module.__name__:
                continue
            marks = [m for m in getattr(function, "pytestmark", []) if m.name == "parametrize"]
            ids = [name]
            for mark in marks:
                values = mark.args[1]
                assert all(isinstance(v, str) for v in values), (
                    f"{name}: this test reads ids of str parameters only; extend it"
                )
                ids = [f"{i}[{v}]" for i in ids for v in values]
            found[name] = ids
    return found


SUITE = _suite_tests()


def _table_names() -> list[str]:
    section = TEXT.split("## What it checks", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `(test_[^`]+)` \|", section, re.MULTILINE)


def _example_run() -> str:
    section = TEXT.split("## Example output", 1)[1]
    return section.split("```text", 1)[1].split("```", 1)[0]


def test_the_suite_has_tests():
    """The enumeration finds the suite (a broken import would make the other tests vacuous)."""
    assert len(SUITE) >= 30
    assert "test_get_task_events_of_an_unknown_task_is_not_found" in SUITE


def test_the_check_table_has_one_row_per_suite_test():
    """Every test function has exactly one row, and every row names a test that exists."""
    rows = [name.removesuffix("[...]") for name in _table_names()]
    assert sorted(rows) == sorted(set(rows)), "a test has two rows"
    assert set(SUITE) - set(rows) == set(), "tests missing from the table"
    assert set(rows) - set(SUITE) == set(), "rows naming no test of the suite"


@pytest.mark.parametrize("name", sorted(SUITE))
def test_a_parametrized_test_is_written_with_brackets(name):
    """``name[...]`` exactly when the test is parametrized, so the reader knows it repeats."""
    written = next((r for r in _table_names() if r.removesuffix("[...]") == name), None)
    assert written is not None, f"{name} has no row in the table"
    assert written.endswith("[...]") == (SUITE[name] != [name]), written


def test_the_example_run_shows_every_collected_test_and_the_counts():
    """The first example lists each collected id once (PASSED, or SKIPPED for an optional
    clause the example server cannot be judged on), and pytest's counts match."""
    run = _example_run()
    passed = re.findall(r"^conformance/test_\w+\.py::(\S+) PASSED$", run, re.MULTILINE)
    skipped = re.findall(r"^conformance/test_\w+\.py::(\S+) SKIPPED \(", run, re.MULTILINE)
    collected = [test_id for ids in SUITE.values() for test_id in ids]
    assert sorted(passed + skipped) == sorted(collected)
    assert f"collected {len(collected)} items" in run
    counts = f"{len(passed)} passed" + (f", {len(skipped)} skipped" if skipped else "")
    assert re.search(rf"\b{counts} in ", run)
