"""fake_rvc, the fake brain: a fake of the brain's ``POST /api/agent/events`` (DESIGN §6).

The receiving half of the Async Task Contract, for the test suites, the conformance suite
and a developer pointing a capability server at it:

* :func:`create_app` — the FastAPI app, built on the kit's receiver
  (:class:`robot_mcp_kit.receiver.Receiver`: it verifies, stores and dedupes, tracks seq,
  repairs gaps and reconciles), recording everything it sees;
* :func:`check_post` — every accept/reject decision of that endpoint, as a pure function
  returning a :class:`Verdict` (the kit's, :mod:`robot_mcp_kit.receiver`);
* :class:`FakeRvcServer` — that app under uvicorn in a thread on a free loopback port;
* :class:`Recorder` — the state both share: events, timelines with anomalies, attempts,
  counters, fault injection and waits (thread-safe);
* :func:`load_faults` — a scripted sequence of answers (500, 429 with ``Retry-After``,
  slow, dropped) read from a file, for :meth:`Recorder.add_faults` or ``fake-rvc --faults``;
* ``fake-rvc`` — the console script (``python -m fake_rvc --help``).

Its inspection hook (``GET /api/fake/inspect?server=…&task_id=…``, ``docs/contract.md``
§5.5) is what the receiver suite (``robot-mcp-conformance receiver``) reads to check what
it did with the events it acknowledged; ``GET /api/fake/events.jsonl`` exports the events.

Every error it raises on purpose is a :class:`FakeRvcError`. :class:`Recorder`, its
records and :func:`check_post` are pure Python (with the kit's core); :func:`create_app`,
:class:`FakeRvcServer` and the dependencies need the ``fake`` extra (fastapi, uvicorn) and
are imported on first use, so ``fake-rvc`` can say which extra is missing instead of a
traceback.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fake_rvc._cli import format_attempt, load_config, parse_secret
from fake_rvc._exceptions import (
    ConfigError,
    ConnectionDropped,
    FakeRvcError,
    FaultError,
    RepairError,
    SecretsError,
    ServerError,
    WaitTimeout,
)
from fake_rvc._fault_script import load_faults, parse_faults
from fake_rvc._faults import ANY_SERVER, Fault
from fake_rvc._recorder import Recorder
from fake_rvc._records import (
    MAX_TRACE_HEADER_CHARS,
    Attempt,
    Outcome,
    ReceivedEvent,
    TaskState,
    Timeline,
    json_line,
)
from fake_rvc._waits import Subscription
from robot_mcp_kit.receiver import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_JSON_DEPTH,
    BodyReason,
    Verdict,
    check_post,
)

if TYPE_CHECKING:
    from fake_rvc._app import EVENTS_PATH, create_app
    from fake_rvc._dependencies import get_clock, get_recorder, get_secrets
    from fake_rvc._inspect import EVENTS_JSONL_PATH, INSPECT_PATH
    from fake_rvc._server import FakeRvcServer

__all__ = [
    "ANY_SERVER",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_JSON_DEPTH",
    "EVENTS_JSONL_PATH",
    "EVENTS_PATH",
    "INSPECT_PATH",
    "MAX_TRACE_HEADER_CHARS",
    "Attempt",
    "BodyReason",
    "ConfigError",
    "ConnectionDropped",
    "FakeRvcError",
    "FakeRvcServer",
    "Fault",
    "FaultError",
    "Outcome",
    "ReceivedEvent",
    "Recorder",
    "RepairError",
    "SecretsError",
    "ServerError",
    "Subscription",
    "TaskState",
    "Timeline",
    "Verdict",
    "WaitTimeout",
    "check_post",
    "create_app",
    "format_attempt",
    "get_clock",
    "get_recorder",
    "get_secrets",
    "json_line",
    "load_config",
    "load_faults",
    "parse_faults",
    "parse_secret",
]

# Names that import fastapi (the `fake` extra), resolved on first access.
_NEED_THE_FAKE_EXTRA = frozenset(
    {
        "EVENTS_JSONL_PATH",
        "EVENTS_PATH",
        "INSPECT_PATH",
        "FakeRvcServer",
        "create_app",
        "get_clock",
        "get_recorder",
        "get_secrets",
    }
)


def __getattr__(name: str) -> Any:
    if name not in _NEED_THE_FAKE_EXTRA:
        raise AttributeError(f"module 'fake_rvc' has no attribute {name!r}")
    from fake_rvc import _app, _dependencies, _inspect, _server

    found = {**vars(_dependencies), **vars(_app), **vars(_inspect), **vars(_server)}
    return found[name]
