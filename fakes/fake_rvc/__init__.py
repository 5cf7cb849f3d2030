"""fake_rvc: a fake of the chat app's ``POST /api/agent/events`` (DESIGN §6).

The receiving half of the Async Task Contract, for the test suites, the conformance suite
and a developer pointing a capability server at it:

* :func:`create_app` — the FastAPI app (verifies, dedupes, tracks seq, records everything);
* :class:`FakeRvcServer` — that app under uvicorn in a thread on a free loopback port;
* :class:`Recorder` — the state both share: events, timelines with anomalies, attempts,
  counters, fault injection and waits (thread-safe; see :mod:`fake_rvc._state`);
* ``fake-rvc`` — the console script (``python -m fake_rvc --help``).

:class:`Recorder` and its records are pure Python; :func:`create_app` and
:class:`FakeRvcServer` need the ``fake`` extra (fastapi, uvicorn) and are imported on
first use, so ``fake-rvc`` can say which extra is missing instead of a traceback.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fake_rvc._state import ANY_SERVER, Attempt, Fault, Outcome, ReceivedEvent, Recorder, Timeline

if TYPE_CHECKING:
    from fake_rvc._app import EVENTS_PATH, ConnectionDropped, create_app
    from fake_rvc._server import FakeRvcServer

__all__ = [
    "ANY_SERVER",
    "EVENTS_PATH",
    "Attempt",
    "ConnectionDropped",
    "FakeRvcServer",
    "Fault",
    "Outcome",
    "ReceivedEvent",
    "Recorder",
    "Timeline",
    "create_app",
]

_LAZY = {
    "EVENTS_PATH": "fake_rvc._app",
    "ConnectionDropped": "fake_rvc._app",
    "create_app": "fake_rvc._app",
    "FakeRvcServer": "fake_rvc._server",
}


def __getattr__(name: str) -> Any:
    # fastapi and uvicorn are the `fake` extra: import them only when asked for.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fake_rvc' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
