"""Re-export of :mod:`robot_mcp_conformance.test_tools` (see ``conftest.py``)."""

from robot_mcp_conformance.test_tools import *  # noqa: F403
