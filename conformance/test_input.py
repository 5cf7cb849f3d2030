"""Re-export of :mod:`robot_mcp_conformance.test_input` (see ``conftest.py``)."""

from robot_mcp_conformance.test_input import *  # noqa: F403
