"""Re-export of :mod:`robot_mcp_conformance.test_events` (see ``conftest.py``)."""

from robot_mcp_conformance.test_events import *  # noqa: F403
