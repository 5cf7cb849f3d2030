"""docs/contract.md is the reference the conformance suite cites: it must hold up.

Every section a failure message cites exists (both suites'), every clause id is listed with
its sections under "Clause ids", and the golden signature vector printed there is what the
kit's ``sign()`` computes (a drifted document fails here).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from robot_mcp_conformance._checks import CONTRACT, Clause, catalogue, clauses
from robot_mcp_conformance._receiver_checks import receiver_clauses
from robot_mcp_kit.signing import sign

DOC = Path(__file__).resolve().parents[2] / CONTRACT
TEXT = DOC.read_text(encoding="utf-8")
HEADINGS = set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", TEXT, re.MULTILINE))
ALL_CLAUSES = {
    f"{catalogue_class.__name__}.{name}": value
    for catalogue_class in (clauses, receiver_clauses)
    for name, value in vars(catalogue_class).items()
    if isinstance(value, Clause)
}


def _vector_rows() -> list[tuple[str, int, bytes, str]]:
    section = TEXT.split("### 4.2 Golden vector", 1)[1].split("\n### ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[1].strip("`").isdigit():
            continue
        secret, timestamp, body, signature = (c.strip("`") for c in cells)
        raw = b"" if body == "*(empty)*" else body.encode()
        rows.append((secret, int(timestamp), raw, signature))
    return rows


@pytest.mark.parametrize("name", sorted(ALL_CLAUSES))
def test_every_cited_section_exists(name):
    """The clause's sections are headings of docs/contract.md, and the message cites it."""
    clause = ALL_CLAUSES[name]
    for part in clause.section.split(","):
        assert part.strip() in HEADINGS, f"{name} cites §{part.strip()}, not in {CONTRACT}"
    assert str(clause).startswith(f"{CONTRACT} §")


def test_the_golden_vector_is_what_sign_computes():
    """Each row of §4.2 is sign(secret, timestamp, body), with the sha256= prefix."""
    rows = _vector_rows()
    assert len(rows) == 3
    for secret, timestamp, body, signature in rows:
        assert signature == "sha256=" + sign(secret, timestamp, body)


def _id_table() -> dict[str, str]:
    """id → its section cell, from the tables under "## Clause ids"."""
    section = TEXT.split("\n## Clause ids\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z0-9.-]+)` \| ([^|]+) \|", section, re.MULTILINE)
    listed = [clause_id for clause_id, _ in rows]
    assert len(listed) == len(set(listed)), "an id is listed twice"
    return {clause_id: where.strip() for clause_id, where in rows}


def test_every_clause_id_is_listed_with_its_sections():
    """The "Clause ids" tables list exactly the ids of both suites, each with its sections."""
    table = _id_table()
    ids = {c.id: c for c in catalogue(clauses) + catalogue(receiver_clauses)}
    assert set(table) == set(ids), (
        f"missing from {CONTRACT}: {sorted(set(ids) - set(table))}; "
        f"listed but no clause: {sorted(set(table) - set(ids))}"
    )
    for clause_id, where in table.items():
        sections = ", ".join(f"§{s.strip()}" for s in ids[clause_id].section.split(","))
        assert where == sections, f"{clause_id}: listed under {where}, the suite cites {sections}"


def _section(number: str) -> str:
    """The text of top-level section ``number`` (up to the next ``## `` heading)."""
    return TEXT.split(f"\n## {number}. ", 1)[1].split("\n## ", 1)[0]


def test_the_suites_are_described_in_section_10_only():
    """§10 (Conformance) says how both suites run and report; §12 (the MCP tasks
    extension) is about the extension alone."""
    conformance, extension = _section("10"), _section("12")
    for needle in ("robot-mcp-conformance URL", "robot-mcp-conformance receiver URL"):
        assert needle in conformance
    assert "--report-json" in conformance
    assert "--expected-failures" in conformance
    assert "robot-mcp-conformance" not in extension
    assert "--report-json" not in extension
