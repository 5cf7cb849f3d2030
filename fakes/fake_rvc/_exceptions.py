"""Every error fake_rvc raises on purpose, under one base.

Each error also subclasses the builtin it replaced, so code that catches ``ValueError``,
``RuntimeError`` or ``TimeoutError`` keeps working::

    FakeRvcError
    ├── ConfigError (ValueError)        a --secret, --repair or config file fake-rvc cannot use
    ├── SecretsError (ValueError)       create_app got an empty or non-text server name or secret
    ├── FaultError (ValueError)         Recorder.inject_fault got a fault that cannot be injected
    ├── WaitTimeout (TimeoutError)      a Recorder wait ran out of time
    ├── ServerError (RuntimeError)      FakeRvcServer not started, already started, or stuck
    ├── RepairError (RuntimeError)      not raised: repair mode is the kit receiver's, which
    │                                   logs a failed call; kept for code that catches it
    └── ConnectionDropped (RuntimeError)  an injected drop served in process (no socket)
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "ConnectionDropped",
    "FakeRvcError",
    "FaultError",
    "RepairError",
    "SecretsError",
    "ServerError",
    "WaitTimeout",
]


class FakeRvcError(Exception):
    """Base of every error fake_rvc raises on purpose."""


class ConfigError(FakeRvcError, ValueError):
    """A ``--secret``, ``--repair`` or config file that cannot be used; the message is one line."""


class SecretsError(FakeRvcError, ValueError):
    """``create_app`` got a server name or secret that is empty, not text, or not UTF-8."""


class FaultError(FakeRvcError, ValueError):
    """:meth:`fake_rvc.Recorder.inject_fault` got a fault that cannot be injected."""


class WaitTimeout(FakeRvcError, TimeoutError):
    """A :class:`fake_rvc.Recorder` wait ran out of time; the message says what was seen."""


class ServerError(FakeRvcError, RuntimeError):
    """:class:`fake_rvc.FakeRvcServer` is not started, already started, or did not start or
    stop in time."""


class RepairError(FakeRvcError, RuntimeError):
    """Not raised: repair mode is the kit receiver's, whose failed calls are logged
    (``server_unreachable``, ``ServerCallFailed``). Kept for code that catches it."""


class ConnectionDropped(FakeRvcError, RuntimeError):
    """An injected ``drop`` fault fired where no real connection can be closed.

    Served by uvicorn through :class:`fake_rvc.FakeRvcServer` or the CLI, a drop closes
    the TCP connection and the client sees a connection error. In process (httpx
    ``ASGITransport``, ``TestClient``) there is no socket, so the app raises this instead.
    """
