"""One logging style for fake_rvc: an event name, then ``key=value`` fields.

The lines go to the stdlib ``fake_rvc`` logger (fake_rvc never configures logging for its
host), read like structlog's key-value output (``post_rejected status=401
reason='bad_signature' server='sleeper'``), and carry the fields as ``record.fields`` for
a structured handler.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["log_event", "logger"]

logger = logging.getLogger("fake_rvc")


def log_event(level: int, event: str, *, exc_info: Any = None, **fields: Any) -> None:
    """Log ``event`` with its fields, strings quoted (``server='sleeper'``), in given order."""
    if not logger.isEnabledFor(level):
        return
    pairs = (f"{k}={str(v)!r}" if isinstance(v, str) else f"{k}={v}" for k, v in fields.items())
    text = " ".join([event, *pairs])
    extra = {"event": event, "fields": fields}
    logger.log(level, "%s", text, exc_info=exc_info, stacklevel=2, extra=extra)
