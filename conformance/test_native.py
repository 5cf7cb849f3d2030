"""Re-export of :mod:`robot_mcp_conformance.test_native` (see ``conftest.py``)."""

from robot_mcp_conformance.test_native import *  # noqa: F403
