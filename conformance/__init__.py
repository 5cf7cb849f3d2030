"""``pytest conformance``: this checkout's entry to the suite in ``robot_mcp_conformance``."""
