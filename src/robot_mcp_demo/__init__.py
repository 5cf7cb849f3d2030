"""``robot-mcp-demo``: the acceptance scenarios of both specs, end to end, on one machine.

It starts the fake brain (``fake-rvc``), the sleeper (``examples/sleeper.py``) and the
memory server (``robot-mcp-memory``) as real processes on free loopback ports, talks to
them over real SSE, prints progress and a report, and exits 0 only if every scenario held.
State goes to a temporary directory that is removed at the end. It runs from a checkout
and from an installed wheel with the ``all`` extra (the wheel carries the sleeper and the
mailroom document; decision 0017).
"""

from __future__ import annotations

from robot_mcp_demo._run import Scenario, main, run_demo

__all__ = ["Scenario", "main", "run_demo"]
