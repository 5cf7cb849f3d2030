"""Re-export of :mod:`robot_mcp_conformance.test_ownership` (see ``conftest.py``)."""

from robot_mcp_conformance.test_ownership import *  # noqa: F403
