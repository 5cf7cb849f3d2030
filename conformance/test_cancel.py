"""Re-export of :mod:`robot_mcp_conformance.test_cancel` (see ``conftest.py``)."""

from robot_mcp_conformance.test_cancel import *  # noqa: F403
