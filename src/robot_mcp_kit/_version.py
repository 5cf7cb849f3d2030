"""The one version of the distribution ``robot-mcp-kit``.

hatchling reads it from here (``[tool.hatch.version]``) into the wheel's metadata; every
console script's ``--version`` and the kit-based servers' ``serverInfo.version`` print it.
"""

__version__ = "0.1.0"
