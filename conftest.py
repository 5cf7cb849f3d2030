"""How many pytest-xdist workers ``-n auto`` (this repository's ``addopts``) starts.

The repository's own suite spreads over one worker per core. A run of only the conformance
suite in this checkout (``pytest conformance --server-url URL --callback-port 8765``) stays
in one process: the suite's session fixtures (one fake_rvc on one callback port, one server
under test, the delivery tests first) are meant to exist once per run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

SUITE = Path(__file__).resolve().parent / "conformance"


def _inside_suite(arg: str, base: Path) -> bool:
    path = (base / arg.split("::", 1)[0]).resolve()
    return path == SUITE or SUITE in path.parents


# optionalhook: a checkout without pytest-xdist still loads this file.
@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    base = Path(config.invocation_params.dir)
    args = [str(arg) for arg in config.args]
    if args and all(_inside_suite(arg, base) for arg in args):
        return 0
    return None  # xdist's own answer: one worker per core
