"""The suite's fixtures for the thin re-export modules of this folder.

The suite itself is the installable package ``robot_mcp_conformance``
(``src/robot_mcp_conformance/``); this folder keeps ``pytest conformance --server-url URL``
working in a checkout. Each ``test_*.py`` here re-exports one module of the package.
"""

from robot_mcp_conformance._fixtures import *  # noqa: F403
