"""Re-export of :mod:`robot_mcp_conformance.test_triggers` (see ``conftest.py``)."""

from robot_mcp_conformance.test_triggers import *  # noqa: F403
