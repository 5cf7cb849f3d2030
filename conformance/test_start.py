"""Re-export of :mod:`robot_mcp_conformance.test_start` (see ``conftest.py``)."""

from robot_mcp_conformance.test_start import *  # noqa: F403
