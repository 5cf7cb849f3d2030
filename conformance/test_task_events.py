"""Re-export of :mod:`robot_mcp_conformance.test_task_events` (see ``conftest.py``)."""

from robot_mcp_conformance.test_task_events import *  # noqa: F403
