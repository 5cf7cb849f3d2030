"""The kit's logging: an event name plus key-value fields, through stdlib logging (public).

Every call reads like structlog's — ``_log.warning("poster_retry", server="nav",
attempt=2)`` — and goes to a plain :mod:`logging` logger, so a library user sees it with
whatever handlers they configured (the kit configures none). The message renders as
``poster_retry server='nav' attempt=2`` (values as ``repr``), and the same fields ride on
the record as ``extra``: ``record.event`` is the event name and each field is an attribute
(``record.attempt``; one that would shadow a :class:`logging.LogRecord` attribute gets a
trailing underscore, ``name_``), so a JSON formatter or structlog's ``ProcessorFormatter``
with ``ExtraAdder`` emits ``{"event": "poster_retry", "server": "nav", "attempt": 2}``.

While telemetry is on (:mod:`robot_mcp_kit.telemetry`) and a span is current, every line
also carries ``trace_id`` and ``span_id`` (hex), so a log line leads to its trace.
"""

from __future__ import annotations

import logging
from typing import Any

from robot_mcp_kit.telemetry import log_fields

__all__ = ["KeyValueLogger", "get_logger", "render"]

_RESERVED = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


def render(event: str, fields: dict[str, Any]) -> str:
    """``event k1=v1 k2=v2``, each value as its ``repr`` (strings quoted)."""
    if not fields:
        return event
    return event + " " + " ".join(f"{key}={value!r}" for key, value in fields.items())


class KeyValueLogger:
    """A stdlib logger whose calls take an event name and key-value fields."""

    __slots__ = ("logger",)

    def __init__(self, name: str) -> None:
        self.logger = logging.getLogger(name)

    def is_enabled_for(self, level: int) -> bool:
        """True when a record at ``level`` would be handled (skip costly fields if not)."""
        return self.logger.isEnabledFor(level)

    def debug(self, event: str, /, **fields: Any) -> None:
        self._log(logging.DEBUG, event, fields)

    def info(self, event: str, /, **fields: Any) -> None:
        self._log(logging.INFO, event, fields)

    def warning(
        self, event: str, /, *, exc_info: bool | BaseException = False, **fields: Any
    ) -> None:
        """A WARNING; ``exc_info=True`` attaches the exception being handled
        (or pass the exception itself)."""
        self._log(logging.WARNING, event, fields, exc_info=exc_info)

    def error(
        self, event: str, /, *, exc_info: bool | BaseException = False, **fields: Any
    ) -> None:
        """An ERROR; ``exc_info=True`` attaches the exception being handled
        (or pass the exception itself)."""
        self._log(logging.ERROR, event, fields, exc_info=exc_info)

    def exception(self, event: str, /, **fields: Any) -> None:
        """An ERROR with the exception being handled attached (call it in ``except``)."""
        self._log(logging.ERROR, event, fields, exc_info=True)

    def _log(
        self,
        level: int,
        event: str,
        fields: dict[str, Any],
        *,
        exc_info: bool | BaseException = False,
    ) -> None:
        if not self.logger.isEnabledFor(level):
            return
        ids = log_fields()
        if ids:
            fields = {**fields, **ids}
        extra = {(f"{k}_" if k in _RESERVED else k): v for k, v in fields.items()}
        extra["event"] = event
        self.logger.log(
            level, "%s", render(event, fields), exc_info=exc_info, extra=extra, stacklevel=3
        )


def get_logger(name: str) -> KeyValueLogger:
    """The key-value logger for the stdlib logger called ``name``."""
    return KeyValueLogger(name)
