"""Re-export of :mod:`robot_mcp_conformance.test_reconcile` (see ``conftest.py``)."""

from robot_mcp_conformance.test_reconcile import *  # noqa: F403
