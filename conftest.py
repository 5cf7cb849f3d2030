"""How many pytest-xdist workers ``-n auto`` (this repository's ``addopts``) starts.

The repository's own suite spreads over two workers per core (at most 16): its tests wait on
child processes, sockets and back-off pauses about as much as they compute, so one worker
per core leaves the cores a third idle (measured on two cores: 6.0 min with two workers,
see the README for the figure with four). ``PYTEST_XDIST_AUTO_NUM_WORKERS`` (xdist's own
variable) still wins, and ``-n N`` sets the number outright. A run of only the conformance
suite in this checkout (``pytest conformance --server-url URL --callback-port 8765``, or
either suite by ``--pyargs robot_mcp_conformance[.receiver]``) stays in one process: the
suite's session fixtures (one fake_rvc on one callback port, one server under test, the
delivery tests first) are meant to exist once per run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
SUITE = ROOT / "conformance"
BYTECODE_CACHE = ROOT / ".pytest_cache" / "pycache"


def _cache_bytecode() -> None:
    """Under ``PYTHONDONTWRITEBYTECODE``, keep bytecode anyway, in ``BYTECODE_CACHE``.

    The suite starts well over a hundred Python processes (servers, CLIs, a pytest per
    conformance run). With the variable set (some sandboxes and CI images set it), each one
    compiles every module it imports from source and pytest rewrites the asserts of every
    module of this distribution again: about 3 of the 4.6 s a conformance child takes to
    start. So the run (this process, its workers and every child, which inherit the
    environment) drops the variable and writes bytecode under one prefix that git ignores,
    rather than next to the sources. Without the variable, nothing changes.
    """
    if not os.environ.pop("PYTHONDONTWRITEBYTECODE", None):
        return
    prefix = os.environ.setdefault("PYTHONPYCACHEPREFIX", str(BYTECODE_CACHE))
    sys.pycache_prefix = prefix
    sys.dont_write_bytecode = False


_cache_bytecode()
WORKERS_PER_CORE = 2
MAX_WORKERS = 16


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _inside_suite(arg: str, base: Path, pyargs: bool = False) -> bool:
    if pyargs and arg.split("::", 1)[0].split(".", 1)[0] == "robot_mcp_conformance":
        return True  # --pyargs robot_mcp_conformance(.receiver): the installed suites
    path = (base / arg.split("::", 1)[0]).resolve()
    return path == SUITE or SUITE in path.parents


# optionalhook: a checkout without pytest-xdist still loads this file.
@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    base = Path(config.invocation_params.dir)
    args = [str(arg) for arg in config.args]
    pyargs = bool(getattr(config.option, "pyargs", False))
    if args and all(_inside_suite(arg, base, pyargs) for arg in args):
        return 0
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS", "").strip():
        return None  # xdist's own hook reads it
    return min(WORKERS_PER_CORE * _cores(), MAX_WORKERS)
