"""What the app's routes depend on: the recorder, the secrets, the clock, the error shape.

Secrets, the clock and the recorder reach the endpoints as dependencies
(:func:`get_secrets`, :func:`get_clock`, :func:`get_recorder`), read from ``app.state``,
so a test can override them with ``app.dependency_overrides``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import JSONResponse

from fake_rvc._recorder import Recorder
from robot_mcp_kit.signing import Secrets

__all__ = [
    "ERROR_RESPONSE",
    "RecorderDep",
    "SecretsDep",
    "UnixClock",
    "UnixClockDep",
    "error_response",
    "get_clock",
    "get_recorder",
    "get_secrets",
]

UnixClock = Callable[[], float]
"""Returns the current time in unix seconds."""


def get_recorder(request: Request) -> Recorder:
    """The app's :class:`Recorder` (``app.state.recorder``)."""
    recorder: Recorder = request.app.state.recorder
    return recorder


def get_secrets(request: Request) -> Mapping[str, Secrets]:
    """Server name → HMAC secret, or its list of current secrets (``app.state.secrets``)."""
    secrets: Mapping[str, Secrets] = request.app.state.secrets
    return secrets


def get_clock(request: Request) -> UnixClock:
    """The clock that judges timestamps (``app.state.clock``, ``time.time`` by default)."""
    clock: UnixClock = request.app.state.clock
    return clock


RecorderDep = Annotated[Recorder, Depends(get_recorder)]
SecretsDep = Annotated[Mapping[str, Secrets], Depends(get_secrets)]
UnixClockDep = Annotated[UnixClock, Depends(get_clock)]


def error_response(status: int, code: str, detail: str, **extra: Any) -> JSONResponse:
    """Every error answer: ``{"error": "<code>", "detail": "<sentence>", ...extra}``."""
    return JSONResponse({"error": str(code), "detail": detail, **extra}, status_code=status)


ERROR_RESPONSE: dict[str, Any] = {
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "properties": {"error": {"type": "string"}, "detail": {"type": "string"}},
            }
        }
    }
}
"""The OpenAPI description of an error answer."""
