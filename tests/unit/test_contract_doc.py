"""docs/contract.md is the reference the conformance suite cites: it must hold up.

Every section a failure message cites exists, and the golden signature vector printed
there is what the kit's ``sign()`` computes (a drifted document fails here).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from robot_mcp_conformance._checks import CONTRACT, Clause, clauses
from robot_mcp_kit.signing import sign

DOC = Path(__file__).resolve().parents[2] / CONTRACT
TEXT = DOC.read_text(encoding="utf-8")
HEADINGS = set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", TEXT, re.MULTILINE))
ALL_CLAUSES = {name: value for name, value in vars(clauses).items() if isinstance(value, Clause)}


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
