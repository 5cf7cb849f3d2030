"""The memory server's logging configuration: one structlog pipeline for every stdlib record.

The server's modules log through the kit's key-value logger
(:func:`robot_mcp_kit.log.get_logger`: ``_log.info("tool_call", tool=..., outcome=...)``),
which puts the event name in ``record.event`` and each field in the record's extras.
:func:`configure_logging` installs one handler on the root logger whose formatter is
structlog's ``ProcessorFormatter``: every record (ours, the kit's ``store_ready`` line,
uvicorn, mcp) gets the same timestamp / level / logger fields, and ``ExtraAdder`` turns the
extras into fields — ``event`` among them, so a line's ``event`` is the event name, not the
rendered ``"tool_call tool='x' ..."`` message. JSON lines in production; the pretty console
renderer when the stream is a terminal.

Calling :func:`configure_logging` again replaces the handler it installed, so tests and a
long-lived process never end up with two.

Some lines can be produced by anyone who can open a connection, as fast as they can open
them: asyncio's ``socket.accept() out of system resource`` (one per accept attempt while the
process is out of file descriptors — tens of MB in seconds), uvicorn's ``Invalid HTTP request
received.``. :class:`RateLimitFilter` on the handler lets one such line per kind through every
:data:`NOISY_INTERVAL_S` seconds and puts the number it dropped into the next one
(``suppressed``). :class:`RateLimiter` does the same for the server's own per-connection events.
"""

from __future__ import annotations

import errno
import logging
import sys
import threading
import time
from collections.abc import Callable, Hashable, MutableMapping
from typing import Any, TextIO

import structlog

__all__ = [
    "NOISY_INTERVAL_S",
    "RateLimitFilter",
    "RateLimiter",
    "configure_logging",
]

_HANDLER_NAME = "robot_mcp_memory"

# Libraries that narrate every request at INFO; our one event per tool call replaces that.
_QUIET_LOGGERS = ("mcp", "sse_starlette", "httpx", "httpcore")

NOISY_INTERVAL_S = 10.0
"""At most one line per noisy kind per this many seconds."""

# Message prefixes (logger, start of the message) of lines a client can cause once per
# connection or per accept attempt. Matched on the unformatted message.
_NOISY_PREFIXES: tuple[tuple[str, str], ...] = (
    ("asyncio", "socket.accept() out of system resource"),
    # After an accept error asyncio schedules one retry per failed accept; they fail too.
    ("asyncio", "Exception in callback BaseSelectorEventLoop._start_serving"),
    ("uvicorn.error", "Invalid HTTP request received."),
    ("uvicorn.error", "Unsupported upgrade request."),
    ("uvicorn.error", "No supported WebSocket library detected"),
    ("uvicorn.error", "Exceeded concurrency limit."),
)
# An OSError with one of these errnos is "the process or the system is out of something".
_RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


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
    handler.addFilter(RateLimitFilter())
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


class RateLimiter:
    """One event per key per ``interval_s``; counts the ones it holds back. Thread-safe.

    ``allow(key)`` returns None when the event should be dropped, else how many events of
    that key were dropped since the last one allowed (0 the first time). Keys must come from
    a small fixed set: one entry per key is kept for the life of the limiter.
    """

    def __init__(
        self, interval_s: float = NOISY_INTERVAL_S, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.interval_s = interval_s
        self._clock = clock
        self._last: dict[Hashable, float] = {}
        self._dropped: dict[Hashable, int] = {}
        self._lock = threading.Lock()

    def allow(self, key: Hashable) -> int | None:
        """None to drop this event; else the number dropped since the last allowed one."""
        now = self._clock()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self.interval_s:
                self._dropped[key] = self._dropped.get(key, 0) + 1
                return None
            self._last[key] = now
            return self._dropped.pop(key, 0)


class RateLimitFilter(logging.Filter):
    """Let one noisy record per kind through every ``interval_s``; mark it ``suppressed=N``.

    Noisy: the known per-connection lines of asyncio and uvicorn (``_NOISY_PREFIXES``) and
    any record carrying an ``OSError`` that means the process ran out of a resource
    (``EMFILE`` "Too many open files", ``ENFILE``, ``ENOBUFS``, ``ENOMEM``). Everything else
    passes untouched.
    """

    def __init__(self, interval_s: float = NOISY_INTERVAL_S, *, limiter: RateLimiter | None = None):
        super().__init__()
        self.limiter = limiter if limiter is not None else RateLimiter(interval_s)

    def filter(self, record: logging.LogRecord) -> bool:
        key = _noisy_key(record)
        if key is None:
            return True
        dropped = self.limiter.allow(key)
        if dropped is None:
            return False
        if dropped:
            record.suppressed = dropped  # ExtraAdder turns it into a field
        return True


def _noisy_key(record: logging.LogRecord) -> Hashable | None:
    exc = record.exc_info[1] if record.exc_info else None
    if isinstance(exc, OSError) and exc.errno in _RESOURCE_ERRNOS:
        return ("oserror", record.name, exc.errno)
    if isinstance(record.msg, str):
        for name, prefix in _NOISY_PREFIXES:
            if record.name == name and record.msg.startswith(prefix):
                return (name, prefix)
    return None


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
