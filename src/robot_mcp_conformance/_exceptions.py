"""Every error the conformance suite raises on purpose, under one base.

Each also subclasses the builtin it replaced, so code catching ``ValueError`` or
``RuntimeError`` keeps working::

    ConformanceError
    ├── ConfigError (ValueError)       the suite's options contradict each other or do not parse
    ├── ServerStartError (RuntimeError)  the server the suite starts exited or never answered
    ├── TargetError (RuntimeError)     the server under test cannot be reached or is not MCP
    └── HookError (RuntimeError)       a receiver's inspection hook answered outside its shape
"""

from __future__ import annotations

__all__ = ["ConfigError", "ConformanceError", "HookError", "ServerStartError", "TargetError"]


class ConformanceError(Exception):
    """Base of every error the conformance suite raises on purpose."""


class ConfigError(ConformanceError, ValueError):
    """The suite's options contradict each other or do not parse."""


class ServerStartError(ConformanceError, RuntimeError):
    """The server the suite starts (``--server-cmd``) exited or did not answer in time.

    The message names the command and quotes the end of the server's output.
    """


class TargetError(ConformanceError, RuntimeError):
    """The server under test cannot be reached, or does not speak MCP there.

    The message is one line naming the URL and the cause; the suite stops on it.
    """


class HookError(ConformanceError, RuntimeError):
    """A receiver's inspection hook (contract §5.5) could not be asked, or answered
    something other than the documented shape; the message says which and quotes it."""
