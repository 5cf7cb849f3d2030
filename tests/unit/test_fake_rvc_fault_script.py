"""fake_rvc's fault scripts: a sequence of answers read from a file (``fake-rvc --faults``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fake_rvc import ANY_SERVER, Fault, FaultError, load_faults, parse_faults

EXAMPLE = """\
# the answers, in order
faults:
  - status: 500
  - status: 429
    retry_after_s: 2
  - delay_s: 3
  - drop: true
  - status: 503
    count: 3
    server: navigation
"""


def test_the_documented_example_reads_as_five_faults_in_order(tmp_path: Path) -> None:
    """500, 429 with Retry-After, a slow answer, a drop, three 503s for one server."""
    script = tmp_path / "faults.yaml"
    script.write_text(EXAMPLE)
    assert load_faults(script) == [
        Fault(server=ANY_SERVER, status=500),
        Fault(server=ANY_SERVER, status=429, retry_after_s=2),
        Fault(server=ANY_SERVER, delay_s=3.0),
        Fault(server=ANY_SERVER, drop=True),
        Fault(server="navigation", status=503, remaining=3),
    ]


def test_a_json_list_is_a_script_too(tmp_path: Path) -> None:
    """JSON is YAML, and a bare list needs no 'faults:'."""
    script = tmp_path / "faults.json"
    script.write_text(json.dumps([{"status": 502, "task_id": "nav-000001"}]))
    assert load_faults(script) == [Fault(server="*", status=502, task_id="nav-000001")]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"faults": []}, "must be a non-empty list of faults"),
        ("status: 500", "must be a non-empty list of faults"),
        ([500], "entry 1 must be a mapping such as {status: 500}"),
        ([{"status": 500}, {"stat": 500}], "entry 2 has unknown key(s) stat"),
        ([{"status": 500, "drop": True}], "entry 1: A fault either answers with a status"),
        ([{"delay_s": 1, "retry_after_s": 2}], "entry 1: Fault retry_after_s goes with a status"),
        ([{"status": 429, "retry_after_s": 1.5}], "retry_after_s must be whole seconds"),
        ([{"status": "500"}], "status must be a whole number, got '500'"),
        ([{"status": True}], "status must be a whole number, got True"),
        ([{"delay_s": "3"}], "delay_s must be a number of seconds"),
        ([{"drop": "yes"}], "drop must be true or false"),
        ([{"status": 500, "count": 0}], "Fault count must be at least 1"),
        ([{"status": 500, "server": 7}], "server must be a server name"),
        ([{}], "needs at least one of status, delay_s or drop"),
    ],
)
def test_a_bad_script_names_the_entry_and_what_is_valid(data: object, message: str) -> None:
    """Each mistake is one FaultError naming the entry; nothing is queued."""
    with pytest.raises(FaultError) as caught:
        parse_faults(data)
    assert message in str(caught.value)


def test_an_unreadable_or_malformed_file_is_a_fault_error(tmp_path: Path) -> None:
    """A missing file and YAML that does not parse are one-line FaultErrors."""
    with pytest.raises(FaultError, match="cannot read the fault script"):
        load_faults(tmp_path / "absent.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("faults: [{status: 500\n")
    with pytest.raises(FaultError, match="is not valid YAML"):
        load_faults(broken)
