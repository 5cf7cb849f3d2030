"""Re-export of :mod:`robot_mcp_conformance.test_delivery` (see ``conftest.py``)."""

from robot_mcp_conformance.test_delivery import *  # noqa: F403
