"""The brain's half of the contract: a receiver of the servers' signed events.

Signed, at-least-once webhooks in; each task's updates handed to your async handler once
and in ``seq`` order; gaps repaired through ``get_task_events``; reconciled with
``list_tasks`` at start and every minute::

    from robot_mcp_kit.receiver import Receiver, TaskUpdate, servers_from_env

    async def handle(update: TaskUpdate) -> None:
        print(update.describe())

    receiver = Receiver(servers_from_env(), handle, state="brain-receiver.db")
    app = receiver.asgi_app()            # uvicorn module:app; POST /api/agent/events

* :class:`Receiver` — the receiver; ``receive(headers, body)`` is its framework-free entry
  point, ``asgi_app()`` a plain ASGI app, ``router()`` a FastAPI router;
* :class:`TaskUpdate` / :class:`UpdateKind` — what the handler gets;
* :class:`ServerConfig`, :func:`load_servers`, :func:`servers_from_env` — the servers;
* :func:`check_post` — every accept/refuse decision of contract §4, as a pure function
  returning a :class:`Verdict` (fake_rvc's too).

Importing this package needs only the kit's core (pydantic, httpx); repair,
reconciliation and :meth:`Receiver.answer_input` import ``mcp`` (the ``receiver`` extra,
``pip install 'robot-mcp-kit[receiver]'``) on first use, and :meth:`Receiver.router`
imports fastapi. See ``docs/contract.md`` ("The receiver's promises") and decision 0034.
"""

from __future__ import annotations

from robot_mcp_kit.receiver._asgi import ReceiverApp, fastapi_router
from robot_mcp_kit.receiver._bodies import describe_errors, json_depth, peek
from robot_mcp_kit.receiver._config import (
    ENV_RECEIVER_CONFIG,
    ENV_SERVERS,
    ServerConfig,
    Transport,
    load_servers,
    servers_from_env,
)
from robot_mcp_kit.receiver._exceptions import ReceiverClosed, ReceiverError, ServerCallFailed
from robot_mcp_kit.receiver._health import ServerStatus
from robot_mcp_kit.receiver._receiver import Receipt, Receiver, ReceiverStatus
from robot_mcp_kit.receiver._state import Ingested
from robot_mcp_kit.receiver._stats import ReceiverStats
from robot_mcp_kit.receiver._store import RECEIVER_SCHEMA
from robot_mcp_kit.receiver._tools import SessionFactory
from robot_mcp_kit.receiver._updates import Handler, TaskUpdate, UpdateKind, UpdateSource
from robot_mcp_kit.receiver._verdict import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_JSON_DEPTH,
    KNOWN_EVENT_TYPES,
    MAX_TRACE_HEADER_CHARS,
    BodyReason,
    Headers,
    PostHeaders,
    Verdict,
    body_too_large,
    check_declared_size,
    check_post,
    read_asgi_headers,
    read_event,
    read_headers,
)

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_JSON_DEPTH",
    "ENV_RECEIVER_CONFIG",
    "ENV_SERVERS",
    "KNOWN_EVENT_TYPES",
    "MAX_TRACE_HEADER_CHARS",
    "RECEIVER_SCHEMA",
    "BodyReason",
    "Handler",
    "Headers",
    "Ingested",
    "PostHeaders",
    "Receipt",
    "Receiver",
    "ReceiverApp",
    "ReceiverClosed",
    "ReceiverError",
    "ReceiverStats",
    "ReceiverStatus",
    "ServerCallFailed",
    "ServerConfig",
    "ServerStatus",
    "SessionFactory",
    "TaskUpdate",
    "Transport",
    "UpdateKind",
    "UpdateSource",
    "Verdict",
    "body_too_large",
    "check_declared_size",
    "check_post",
    "describe_errors",
    "fastapi_router",
    "json_depth",
    "load_servers",
    "peek",
    "read_asgi_headers",
    "read_event",
    "read_headers",
    "servers_from_env",
]
