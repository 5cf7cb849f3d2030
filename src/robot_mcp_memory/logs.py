"""Logging for the memory server: structlog, one pipeline for structlog and stdlib records.

Everything goes to one handler on the root logger whose formatter is structlog's
``ProcessorFormatter``: our own structlog events and foreign stdlib records (the kit's
``store_ready`` line, uvicorn, mcp) get the same timestamp / level / logger fields, and
``ExtraAdder`` turns a stdlib record's ``extra={...}`` into fields instead of dropping it.
JSON lines in production; the pretty console renderer when the stream is a terminal.

Calling :func:`configure_logging` again replaces the handler it installed, so tests and a
long-lived process never end up with two.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any, TextIO

import structlog

__all__ = ["configure_logging", "get_logger"]

_HANDLER_NAME = "robot_mcp_memory"

# Libraries that narrate every request at INFO; our one event per tool call replaces that.
_QUIET_LOGGERS = ("mcp", "sse_starlette", "httpx", "httpcore")


def configure_logging(
    *,
    level: int | str = logging.INFO,
    json: bool | None = None,
    stream: TextIO | None = None,
) -> None:
    """Route structlog and stdlib logging through one structlog formatter on ``stream``.

    Args:
        level: the root level.
        json: JSON lines when True, the console renderer when False; None picks the
            console renderer only when ``stream`` is a TTY.
        stream: where records go; stderr by default (stdout carries MCP on stdio).
    """
    out = stream if stream is not None else sys.stderr
    if json is None:
        json = not _isatty(out)

    timestamper = structlog.processors.TimeStamper(fmt="iso", utc=True)
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        timestamper,
    ]
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if json
        else structlog.dev.ConsoleRenderer(colors=_isatty(out))
    )
    final: list[Any] = [structlog.stdlib.ProcessorFormatter.remove_processors_meta]
    if json:
        final.append(structlog.processors.format_exc_info)
    final.append(renderer)
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.ExtraAdder(), _drop_color_message],
        processors=final,
    )

    handler = logging.StreamHandler(out)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    for name in _QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)

    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.processors.StackInfoRenderer(),
            structlog.processors.UnicodeDecoder(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )


def get_logger(name: str) -> Any:
    """A structlog logger named ``name`` (the stdlib logger it writes through)."""
    return structlog.stdlib.get_logger(name)


def _drop_color_message(
    _: Any, __: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """Uvicorn adds an ANSI-coloured copy of each message as an extra; it is noise in JSON."""
    event_dict.pop("color_message", None)
    return event_dict


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
