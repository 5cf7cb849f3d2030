"""``python -m robot_mcp_demo`` is ``robot-mcp-demo``."""

from __future__ import annotations

from robot_mcp_demo._run import main

if __name__ == "__main__":  # pragma: no cover - exercised through the console script
    raise SystemExit(main())
