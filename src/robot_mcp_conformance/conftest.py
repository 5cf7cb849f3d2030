"""The suite's fixtures, for its test modules in this package (see :mod:`._fixtures`)."""

from robot_mcp_conformance._fixtures import *  # noqa: F403
