"""What a process document is: the model, its frontmatter format and its row in ``index.db``.

:class:`ProcessDoc` parses, validates and renders a document; :class:`Owner` is who a
stored document belongs to; :mod:`.rows` reads a ``processes`` row back as a document.
"""

from __future__ import annotations

from robot_mcp_memory.documents._frontmatter import FIELDS
from robot_mcp_memory.documents.model import (
    SLUG_PATTERN,
    Owner,
    ProcessDoc,
)

__all__ = ["FIELDS", "SLUG_PATTERN", "Owner", "ProcessDoc"]
