"""The receiver suite's parts in process: signing, options, the timing statistics, the
expected-failures file, the command line, and the clause every test declares."""

from __future__ import annotations

import importlib
import pkgutil
import random
import re
from pathlib import Path

import pytest

import robot_mcp_conformance
import robot_mcp_conformance.receiver
from robot_mcp_conformance import ConfigError, build_pytest_args
from robot_mcp_conformance._checks import CLAUSE_MARKER, Clause, catalogue, clauses
from robot_mcp_conformance._probe import Probe, signature
from robot_mcp_conformance._receiver_checks import receiver_clauses
from robot_mcp_conformance._receiver_config import ReceiverConfig
from robot_mcp_conformance._report import load_expected_failures
from robot_mcp_conformance._timing import MIN_EFFECT_S, judge, sign_test_p

DOC = Path(__file__).resolve().parents[2] / "docs" / "contract.md"


def _golden_rows() -> list[tuple[str, str, bytes, str]]:
    section = DOC.read_text(encoding="utf-8").split("### 4.2 Golden vector", 1)[1]
    rows = []
    for line in section.split("\n### ", 1)[0].splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[1].isdigit():
            body = b"" if cells[2] == "*(empty)*" else cells[2].encode()
            rows.append((cells[0], cells[1], body, cells[3]))
    return rows


class TestSigning:
    def test_the_suite_signs_the_golden_vector_of_the_contract(self):
        """The probe's signature is §4.2's, row by row (the suite signs as a server must)."""
        rows = _golden_rows()
        assert len(rows) == 3
        for secret, timestamp, body, expected in rows:
            assert signature(secret, timestamp, body) == expected

    def test_a_malformed_timestamp_is_signed_as_sent(self):
        """The header string itself is signed, so only the format check can refuse it."""
        probe = Probe(ReceiverConfig.build(url="http://127.0.0.1:9/e"), clock=lambda: 1e9)
        try:
            headers = probe.headers(b"{}", timestamp="+1000000000")
        finally:
            probe.close()
        assert headers["X-RVC-Timestamp"] == "+1000000000"
        assert headers["X-RVC-Signature"] == signature("s3cret", "+1000000000", b"{}")


class TestReceiverConfig:
    def test_defaults(self):
        """Secret s3cret, server sleeper, 5 s budget, 1 MiB, 40 pairs, no hook, no rotation."""
        cfg = ReceiverConfig.build(url=" http://127.0.0.1:8000/api/agent/events ")
        assert (cfg.url, cfg.secret, cfg.server_name) == (
            "http://127.0.0.1:8000/api/agent/events",
            "s3cret",
            "sleeper",
        )
        assert (cfg.time_budget_s, cfg.max_body_bytes, cfg.timing_pairs) == (5.0, 1048576, 40)
        assert (cfg.inspect_url, cfg.second_secret) == (None, None)
        assert cfg.request_timeout_s == 30.0

    @pytest.mark.parametrize(
        ("options", "message"),
        [
            ({"url": None}, "no receiver to test"),
            ({"url": "127.0.0.1:8000"}, "--receiver-url must be an http:// or https:// URL"),
            ({"second_secret": "s3cret"}, "--second-secret must differ from --secret"),
            ({"inspect_url": "ftp://x"}, "--inspect-url must be an http"),
            ({"time_budget_s": "soon"}, "--time-budget must be a number"),
            ({"time_budget_s": "0"}, "--time-budget must be a positive number"),
            ({"time_budget_s": "nan"}, "--time-budget must be a positive number"),
            ({"max_body_bytes": "10"}, "--max-body-bytes must be 1024-"),
            ({"timing_pairs": "-1"}, "--timing-pairs must be 0-2000"),
            ({"server_name": "nav\u00e9"}, "--server-name must be printable ASCII"),
        ],
    )
    def test_a_bad_option_is_a_config_error_saying_what_is_valid(self, options, message):
        raw = {"url": "http://127.0.0.1:8000/api/agent/events", **options}
        with pytest.raises(ConfigError, match=re.escape(message)):
            ReceiverConfig.build(**raw)


class TestTiming:
    def test_the_sign_test_tail(self):
        """P(at least k of n fair flips): the exact binomial tail."""
        assert sign_test_p(0, 10) == 1.0
        assert sign_test_p(10, 10) == pytest.approx(1 / 1024)
        assert sign_test_p(35, 40) == pytest.approx(6.913e-7, rel=1e-3)
        assert sign_test_p(0, 0) == 1.0

    @pytest.mark.parametrize("seed", range(200))
    def test_noise_alone_never_looks_like_a_leak(self, seed):
        """Load noise, however large or skewed, is the same for both kinds: no warning."""
        rng = random.Random(seed)
        scale = rng.choice([0.0005, 0.005, 0.05])
        times = [rng.expovariate(1 / scale) + 0.002 for _ in range(80)]
        assert not judge(times[:40], times[40:]).leaks

    def test_a_consistent_difference_is_a_leak(self):
        """A wrong first digit answered 5 ms sooner in (nearly) every pair is found."""
        rng = random.Random(7)
        first = [0.002 + rng.expovariate(1 / 0.003) for _ in range(40)]
        last = [f + 0.005 + rng.gauss(0, 0.001) for f in first]
        last[3] = first[3] - 0.01  # one pair upset by a stall
        verdict = judge(first, last)
        assert verdict.leaks
        assert verdict.first_faster == 39
        assert verdict.to_dict()["median_difference_ms"] > 4

    def test_a_significant_but_tiny_difference_is_not_a_leak(self):
        """Every pair 0.1 ms apart is below what counts (MIN_EFFECT_S): no warning."""
        first = [0.002] * 40
        last = [0.002 + MIN_EFFECT_S / 10] * 40
        verdict = judge(first, last)
        assert verdict.p_value < 1e-6
        assert not verdict.leaks

    def test_pairs_must_match(self):
        with pytest.raises(ValueError, match="one time of each kind"):
            judge([0.1], [])


class TestExpectedFailures:
    KNOWN = ("receiver.bad-signature-refused", "server.seq-contiguous")

    def test_ids_comments_and_yaml_dashes(self, tmp_path):
        """One id per line; '#' comments, blank lines, '- ' and quotes are allowed."""
        listed = tmp_path / "expected.txt"
        listed.write_text(
            "# known\n\n- receiver.bad-signature-refused  # issue 7\n'server.seq-contiguous'\n"
        )
        assert load_expected_failures(listed, self.KNOWN).ids == frozenset(self.KNOWN)

    def test_an_unknown_id_names_the_line_and_the_closest_id(self, tmp_path):
        listed = tmp_path / "expected.txt"
        listed.write_text("server.seq-contiguous\nserver.seq-contigous\n")
        with pytest.raises(
            ConfigError, match=re.escape("line 2: 'server.seq-contigous' is not a clause")
        ):
            load_expected_failures(listed, self.KNOWN)
        with pytest.raises(ConfigError, match=re.escape("did you mean 'server.seq-contiguous'")):
            load_expected_failures(listed, self.KNOWN)

    def test_an_unreadable_file_is_a_config_error(self, tmp_path):
        with pytest.raises(ConfigError, match="cannot be read"):
            load_expected_failures(tmp_path / "absent.txt", self.KNOWN)


class TestCommandLine:
    def test_receiver_runs_the_receiver_package_with_its_options(self):
        """`receiver URL ...` → pytest --pyargs robot_mcp_conformance.receiver --receiver-url."""
        args = build_pytest_args(
            [
                "receiver",
                "http://127.0.0.1:8000/api/agent/events",
                "--secret",
                "nav-secret",
                "--inspect-url",
                "http://127.0.0.1:8000/inspect",
                "--report-json",
                "report.json",
                "-k",
                "refused",
            ]
        )
        at = args.index("--pyargs")
        assert args[at + 1 : at + 4] == [
            "robot_mcp_conformance.receiver",
            "--receiver-url",
            "http://127.0.0.1:8000/api/agent/events",
        ]
        assert args[-8:] == [
            "--secret",
            "nav-secret",
            "--inspect-url",
            "http://127.0.0.1:8000/inspect",
            "--report-json",
            "report.json",
            "-k",
            "refused",
        ]

    def test_the_server_suite_forwards_the_report_options(self):
        args = build_pytest_args(["http://127.0.0.1:9100/mcp", "--expected-failures", "x.txt"])
        assert args[args.index("--pyargs") + 1] == "robot_mcp_conformance"
        assert args[-2:] == ["--expected-failures", "x.txt"]

    def test_the_help_lists_the_exit_codes(self, capsys):
        with pytest.raises(SystemExit):
            build_pytest_args(["receiver", "--help"])
        out = " ".join(capsys.readouterr().out.split())
        assert "exit codes: 0 conforms" in out
        assert "4 unusable" in out


def _suite_tests(package) -> dict[str, object]:
    found = {}
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("test_"):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            for name, value in vars(module).items():
                if name.startswith("test_") and getattr(value, "__module__", "") == module.__name__:
                    found[f"{info.name}::{name}"] = value
    return found


@pytest.mark.parametrize(
    ("package", "catalogue_class"),
    [(robot_mcp_conformance, clauses), (robot_mcp_conformance.receiver, receiver_clauses)],
    ids=["server", "receiver"],
)
def test_every_suite_test_declares_a_clause_of_its_catalogue(package, catalogue_class):
    """@enforces(...) on every test, naming a clause of its own suite; every clause tested."""
    tests = _suite_tests(package)
    assert len(tests) >= 15
    ids = {c.id for c in catalogue(catalogue_class)}
    tested = set()
    for name, function in tests.items():
        marks = [m for m in getattr(function, "pytestmark", []) if m.name == CLAUSE_MARKER]
        assert len(marks) == 1, f"{name} declares no clause (@enforces(...))"
        clause = marks[0].args[0]
        assert isinstance(clause, Clause)
        assert clause.id in ids, f"{name} enforces {clause.id}, not a clause of its suite"
        tested.add(clause.id)
    assert tested == ids, f"clauses no test checks: {sorted(ids - tested)}"


def test_clause_ids_are_unique_and_well_formed():
    """server.* and receiver.* ids, lower case words joined by hyphens, each used once."""
    ids = [c.id for c in catalogue(clauses) + catalogue(receiver_clauses)]
    assert len(ids) == len(set(ids))
    for clause_id in ids:
        assert re.fullmatch(r"(server|receiver)\.[a-z0-9]+(-[a-z0-9]+)*", clause_id), clause_id
