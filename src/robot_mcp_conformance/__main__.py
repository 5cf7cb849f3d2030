"""``python -m robot_mcp_conformance URL [options]``: the same as ``robot-mcp-conformance``."""

import sys

from robot_mcp_conformance._cli import main

if __name__ == "__main__":
    sys.exit(main())
