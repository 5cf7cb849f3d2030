"""The FastAPI app: the chat app's ``POST /api/agent/events`` plus inspection and faults.

``create_app(secrets)`` builds a fresh app; its :class:`~fake_rvc.Recorder` lives on
``app.state.recorder`` (never a module global). Secrets, the clock and the recorder reach
the endpoints as dependencies (:func:`get_secrets`, :func:`get_clock`,
:func:`get_recorder`), so a test can override them with ``app.dependency_overrides``.

The events endpoint checks, in this order, and answers the first failure:

====  =========================================================================
400   ``invalid_header`` (an ``X-RVC-*`` value with control or non-ASCII
      characters — header injection) / ``duplicate_header`` (sent twice)
413   ``too_large``: ``Content-Length`` or the bytes actually read exceed the cap
—     an injected fault for this server (delay, then a status or a dropped
      connection; a delay alone goes on to normal processing)
401   ``unknown_server``, ``missing_timestamp``, ``missing_signature``, then the
      reasons of :func:`robot_mcp_kit.signing.check`: ``malformed_timestamp``,
      ``stale_timestamp``, ``future_timestamp``, ``malformed_signature``,
      ``bad_signature``
422   ``invalid_encoding`` (not UTF-8), ``too_deep`` (nesting beyond 32),
      ``invalid_json``, ``not_an_object``, ``bad_schema_version``,
      ``invalid_event`` (not a TaskEvent), ``server_mismatch`` (body ``server``
      differs from ``X-RVC-Server``)
200   ``{"accepted": true, ...}`` or, for a known ``event_id``,
      ``{"duplicate": true, ...}`` (stored once)
====  =========================================================================

Every error body is ``{"error": "<code>", "detail": "<sentence>"}``, and no answer carries
the text of a Python exception (issue 9, finding 7): a body that is not valid JSON is
described by its position, a body that is not a TaskEvent by each field and pydantic's
error type (``seq is out of range (greater_than_equal)``), never pydantic's message or the
value sent. The inspection API answers a bad query or body with 422 ``invalid_request``
in the same shape, and anything unexpected with 500 ``internal`` and a short
``error_id`` that the ``fake_rvc`` log line (with the traceback) also names.

Every attempt, whatever its outcome, is recorded with its receive times and logged as one
line on the ``fake_rvc`` logger.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.resources
import json
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, Field, ValidationError

from fake_rvc._repair import GapRepairer
from fake_rvc._state import Attempt, Outcome, Recorder
from robot_mcp_kit import SignatureError
from robot_mcp_kit.models import SCHEMA_VERSION, EventType, TaskEvent
from robot_mcp_kit.signing import (
    DEFAULT_MAX_SKEW_S,
    HEADER_SERVER,
    HEADER_SIGNATURE,
    HEADER_TIMESTAMP,
    HEADER_WEBHOOK_ID,
    HEADER_WEBHOOK_SIGNATURE,
    HEADER_WEBHOOK_TIMESTAMP,
    Secrets,
    check,
    check_standard,
)

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_JSON_DEPTH",
    "DROP_EXTENSION",
    "EVENTS_PATH",
    "Clock",
    "ConnectionDropped",
    "create_app",
    "get_clock",
    "get_recorder",
    "get_secrets",
]

EVENTS_PATH = "/api/agent/events"
DEFAULT_MAX_BODY_BYTES = 1_048_576
DEFAULT_MAX_JSON_DEPTH = 32
DROP_EXTENSION = "fake_rvc.close_connection"
"""ASGI scope extension: a callable that closes the client's connection (set by the
uvicorn protocol of :mod:`fake_rvc._server`)."""

Clock = Callable[[], float]
"""Returns the current time in unix seconds."""

_log = logging.getLogger("fake_rvc")
# Validating patterns are used with fullmatch only: "$" also matches before a final "\n"
# (issue 9, finding 5).
_PRINTABLE_ASCII = re.compile(r"[\x20-\x7e]*")
_ASCII_DIGITS = re.compile(r"[0-9]+")
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_JSON_BRACKET = re.compile(rb"[\[\]{}]")


class ConnectionDropped(RuntimeError):
    """An injected ``drop`` fault fired where no real connection can be closed.

    Served by uvicorn through :class:`fake_rvc.FakeRvcServer` or the CLI, a drop closes
    the TCP connection and the client sees a connection error. In process (httpx
    ``ASGITransport``, ``TestClient``) there is no socket, so the app raises this instead.
    """


# ---------------------------------------------------------------- dependencies


def get_recorder(request: Request) -> Recorder:
    """The app's :class:`Recorder` (``app.state.recorder``)."""
    recorder: Recorder = request.app.state.recorder
    return recorder


def get_secrets(request: Request) -> Mapping[str, Secrets]:
    """Server name → HMAC secret, or its list of current secrets (``app.state.secrets``)."""
    secrets: Mapping[str, Secrets] = request.app.state.secrets
    return secrets


def get_clock(request: Request) -> Clock:
    """The clock that judges timestamps (``app.state.clock``, ``time.time`` by default)."""
    clock: Clock = request.app.state.clock
    return clock


RecorderDep = Annotated[Recorder, Depends(get_recorder)]
SecretsDep = Annotated[Mapping[str, Secrets], Depends(get_secrets)]
ClockDep = Annotated[Clock, Depends(get_clock)]


class FaultRequest(BaseModel):
    """Body of ``POST /api/fake/faults``."""

    server: str = Field(min_length=1, max_length=200, description='Server name, or "*".')
    status: int | None = Field(default=None, ge=200, le=599)
    delay_s: float | None = Field(default=None, ge=0, le=3600)
    drop: bool = False
    count: int = Field(default=1, ge=1, le=1_000_000)


# ---------------------------------------------------------------- helpers


def _error(status: int, code: str, detail: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": code, "detail": detail, **extra}, status_code=status)


def _json_depth(body: bytes) -> int:
    """Return the deepest nesting of arrays/objects in ``body`` without parsing it."""
    stripped = _JSON_STRING.sub(b'""', body)
    depth = deepest = 0
    for match in _JSON_BRACKET.finditer(stripped):
        if match.group() in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def _peek(body: bytes, max_depth: int) -> dict[str, Any]:
    """Best-effort event_id/task_id/seq/type from an unverified body, for the attempt log."""
    try:
        if _json_depth(body) > max_depth:
            return {}
        obj = json.loads(body)
    except (ValueError, RecursionError):
        return {}
    if not isinstance(obj, dict):
        return {}
    out: dict[str, Any] = {}
    for key in ("event_id", "task_id", "type"):
        value = obj.get(key)
        if isinstance(value, str):
            out[key] = value[:200]
    seq = obj.get("seq")
    if type(seq) is int:
        out["seq"] = seq
    return out


def _body_server(body: bytes, max_depth: int) -> str | None:
    """The body's ``server`` (names the server of a Standard Webhooks post), or None."""
    try:
        if _json_depth(body) > max_depth:
            return None
        obj = json.loads(body)
    except (ValueError, RecursionError):
        return None
    server = obj.get("server") if isinstance(obj, dict) else None
    return server[:200] if isinstance(server, str) and server else None


_ERROR_WORDS: dict[str, str] = {
    "missing": "is missing",
    "extra_forbidden": "is not allowed",
    "literal_error": "is not one of the allowed values",
    "enum": "is not one of the allowed values",
    "json_invalid": "is not valid JSON",
    "model_attributes_type": "must be a JSON object",
    "model_type": "must be a JSON object",
    "dict_type": "must be a JSON object",
    "list_type": "must be a list",
    "greater_than": "is out of range",
    "greater_than_equal": "is out of range",
    "less_than": "is out of range",
    "less_than_equal": "is out of range",
    "too_short": "is too short",
    "too_long": "is too long",
    "string_too_short": "is too short",
    "string_too_long": "is too long",
    "finite_number": "must be a finite number",
    "timezone_aware": "must carry a timezone",
}


def _describe_errors(errors: Iterable[Mapping[str, Any]], what: str) -> str:
    """Name each invalid field and what is wrong with it, in fixed words.

    Only the field path and pydantic's error *type* (a stable code such as
    ``int_parsing``) are used: never pydantic's message, its documentation URL or the
    value that was sent.
    """
    parts = []
    for err in list(errors)[:10]:
        loc = ".".join(str(p)[:40] for p in err.get("loc", ())) or "body"
        code = str(err.get("type", "invalid"))[:40]
        words = _ERROR_WORDS.get(code)
        if words is None:
            if code.endswith(("_type", "_parsing")):
                words = "has the wrong type" if "date" not in code else "is not an ISO 8601 time"
            else:
                words = "is invalid"
        parts.append(f"{loc[:100]} {words} ({code})")
    return f"{what}: " + "; ".join(parts) + "."


def _validation_detail(exc: ValidationError) -> str:
    return _describe_errors(exc.errors(include_url=False), "The body is not a TaskEvent")


def _event_line(attempt: Attempt) -> str:
    return (
        f"server={attempt.server!r} task={attempt.task_id!r} seq={attempt.seq} "
        f"type={attempt.type!r} event_id={attempt.event_id!r}"
    )


def _sse(event: str, data: Any, event_id: int | None = None) -> str:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


_EVENTS_OPENAPI: dict[str, Any] = {
    "parameters": [
        {"name": HEADER_SERVER, "in": "header", "required": False, "schema": {"type": "string"}},
        {
            "name": HEADER_TIMESTAMP,
            "in": "header",
            "required": False,
            "schema": {"type": "string"},
        },
        {
            "name": HEADER_SIGNATURE,
            "in": "header",
            "required": False,
            "schema": {"type": "string"},
        },
    ],
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": TaskEvent.model_json_schema()}},
    },
}
_ERROR_RESPONSE = {
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "properties": {"error": {"type": "string"}, "detail": {"type": "string"}},
            }
        }
    }
}


# ---------------------------------------------------------------- the app


def create_app(
    secrets: Mapping[str, Secrets],
    *,
    max_skew_s: int = DEFAULT_MAX_SKEW_S,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_json_depth: int = DEFAULT_MAX_JSON_DEPTH,
    clock: Clock | None = None,
    state: Recorder | None = None,
    repair_urls: Mapping[str, str] | None = None,
) -> FastAPI:
    """Build a fake chat-app receiver.

    Args:
        secrets: server name (the ``X-RVC-Server`` value) → HMAC secret, or the list of
            its current secrets during a rotation (any one may sign). A post is accepted
            signed either way: ``X-RVC-Signature``, or the Standard Webhooks headers
            (``webhook-id`` = event_id, ``webhook-timestamp``, ``webhook-signature``);
            when both are sent, both must verify. Without ``X-RVC-Server`` the body's
            ``server`` names the server of a Standard Webhooks post.
        max_skew_s: accepted timestamp distance from ``clock()``, either side.
        max_body_bytes: larger bodies get 413; at most this plus one byte is read.
        max_json_depth: deeper JSON nesting gets 422 before parsing.
        clock: unix seconds now; ``time.time`` when None.
        state: a :class:`Recorder` to share (e.g. with a test); a new one when None.
        repair_urls: repair mode — server name → that server's MCP URL; a gap in one of
            its tasks is filled through its ``get_task_events`` tool
            (:mod:`fake_rvc._repair`). Added with issue 14.

    Raises:
        ValueError: a server name or secret is empty or not a string, or a secret does
            not encode as UTF-8 (lone surrogates).
    """
    accepted: dict[str, Secrets] = {}
    for name, value in secrets.items():
        keys = [value] if isinstance(value, str) else list(value or [])
        if (
            not isinstance(name, str)
            or not name
            or not keys
            or not all(isinstance(k, str) and k for k in keys)
        ):
            raise ValueError(
                f"Secrets map server names to non-empty secrets; got {name!r} -> "
                f"{'<empty>' if not keys else '<secret>'}."
            )
        for key in keys:
            try:
                key.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError(
                    f"The secret of server {name!r} is not text that encodes as UTF-8."
                ) from None
        accepted[name] = value if isinstance(value, str) else tuple(keys)
    recorder = state if state is not None else Recorder()
    repairer = GapRepairer(repair_urls or {}, recorder)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            recorder.close_streams()
            await repairer.aclose()

    app = FastAPI(
        title="fake_rvc",
        summary="A fake of the chat app's POST /api/agent/events, for tests and development.",
        version="0.1.0",
        lifespan=lifespan,
    )
    app.state.recorder = recorder
    app.state.secrets = accepted
    app.state.clock = clock if clock is not None else time.time
    app.state.repairer = repairer
    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.add_exception_handler(Exception, _internal_error)

    @app.post(
        EVENTS_PATH,
        summary="Receive one signed TaskEvent (kit spec §3.1)",
        openapi_extra=_EVENTS_OPENAPI,
        responses={
            400: _ERROR_RESPONSE,
            401: _ERROR_RESPONSE,
            413: _ERROR_RESPONSE,
            422: _ERROR_RESPONSE,
        },
    )
    async def receive_event(
        request: Request, recorder: RecorderDep, secrets: SecretsDep, clock: ClockDep
    ) -> Response:
        received_mono = time.monotonic()
        received_wall = clock()
        n = recorder.next_attempt_number()
        server: str | None = None
        peek: dict[str, Any] = {}

        def record_unstored(status: int | None, outcome: Outcome, reason: str, detail: str) -> None:
            """Record an attempt that stored no event, with what ``peek`` made of the body."""
            recorder.record_attempt(
                Attempt(
                    n=n,
                    received_wall=received_wall,
                    received_mono=received_mono,
                    server=server,
                    status=status,
                    outcome=outcome,
                    reason=reason,
                    detail=detail,
                    **peek,
                )
            )

        def reject(status: int, code: str, detail: str) -> JSONResponse:
            record_unstored(status, "rejected", code, detail)
            _log.warning(
                "rejected status=%d reason=%s server=%r detail=%s", status, code, server, detail
            )
            return _error(status, code, detail)

        # 1. Header sanity: the three X-RVC-* headers, once each, printable ASCII.
        values: dict[str, str | None] = {}
        for name in (
            HEADER_SERVER,
            HEADER_TIMESTAMP,
            HEADER_SIGNATURE,
            HEADER_WEBHOOK_ID,
            HEADER_WEBHOOK_TIMESTAMP,
            HEADER_WEBHOOK_SIGNATURE,
        ):
            found = request.headers.getlist(name)
            if len(found) > 1:
                return reject(400, "duplicate_header", f"{name} was sent {len(found)} times.")
            if found and not _PRINTABLE_ASCII.fullmatch(found[0]):
                if name == HEADER_SERVER:
                    server = found[0][:100]
                return reject(
                    400,
                    "invalid_header",
                    f"{name} contains control or non-ASCII characters: {found[0][:100]!r}.",
                )
            values[name] = found[0] if found else None
        server = values[HEADER_SERVER]

        # 2. Size: the declared length, then the bytes actually read (at most cap + 1).
        declared = request.headers.get("content-length")
        if (
            declared is not None
            and _ASCII_DIGITS.fullmatch(declared)
            and (len(declared) > 18 or int(declared) > max_body_bytes)
        ):
            return reject(
                413,
                "too_large",
                f"Content-Length {declared[:40]} exceeds the {max_body_bytes}-byte limit.",
            )
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_body_bytes:
                return reject(
                    413, "too_large", f"The body exceeds the {max_body_bytes}-byte limit."
                )
            chunks.append(chunk)
        body = b"".join(chunks)
        peek = _peek(body, max_json_depth)

        # 3. Injected faults act before authentication, like a broken network would.
        fault = recorder.take_fault(server)
        if fault is not None:
            if fault.delay_s:
                await asyncio.sleep(fault.delay_s)
            if fault.drop or fault.status is not None:
                record_unstored(
                    fault.status,
                    "dropped" if fault.drop else "fault",
                    "injected_fault",
                    f"Injected fault {fault.to_dict()}.",
                )
                if fault.drop:
                    _log.warning("dropped connection (injected fault) server=%r", server)
                    return await _drop(request)
                _log.warning("answered %d (injected fault) server=%r", fault.status, server)
                assert fault.status is not None
                if fault.status in (204, 304):
                    return Response(status_code=fault.status)
                return _error(
                    fault.status,
                    "injected_fault",
                    f"fake_rvc answered {fault.status} on purpose (fault injection).",
                )

        # 4. Authentication: X-RVC, or Standard Webhooks (issue 14), or both.
        standard = values[HEADER_WEBHOOK_SIGNATURE]
        if server is None and standard is not None:
            server = _body_server(body, max_json_depth)
        if server is None:
            return reject(401, "unknown_server", f"The {HEADER_SERVER} header is missing.")
        secret = secrets.get(server)
        if secret is None:
            known = ", ".join(sorted(secrets)) or "none"
            return reject(
                401,
                "unknown_server",
                f"{HEADER_SERVER} {server[:100]!r} is not a configured server (known: {known}).",
            )
        signature = values[HEADER_SIGNATURE]
        if signature is not None or standard is None:
            timestamp = values[HEADER_TIMESTAMP]
            if timestamp is None:
                return reject(
                    401, "missing_timestamp", f"The {HEADER_TIMESTAMP} header is missing."
                )
            if signature is None:
                return reject(
                    401, "missing_signature", f"The {HEADER_SIGNATURE} header is missing."
                )
            try:
                check(secret, timestamp, body, signature, max_skew_s=max_skew_s, now_s=clock())
            except SignatureError as exc:
                return reject(401, exc.reason, str(exc))
        if standard is not None:
            webhook_id = values[HEADER_WEBHOOK_ID]
            webhook_ts = values[HEADER_WEBHOOK_TIMESTAMP]
            if webhook_id is None or webhook_ts is None:
                return reject(
                    401,
                    "missing_webhook_headers",
                    f"{HEADER_WEBHOOK_SIGNATURE} needs {HEADER_WEBHOOK_ID} and "
                    f"{HEADER_WEBHOOK_TIMESTAMP}.",
                )
            try:
                check_standard(
                    secret,
                    webhook_id,
                    webhook_ts,
                    body,
                    standard,
                    max_skew_s=max_skew_s,
                    now_s=clock(),
                )
            except SignatureError as exc:
                return reject(401, exc.reason, str(exc))

        # 5. The body must be a TaskEvent.
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            return reject(
                422, "invalid_encoding", f"The body is not UTF-8 (bad byte at {exc.start})."
            )
        depth = _json_depth(body)
        if depth > max_json_depth:
            return reject(
                422,
                "too_deep",
                f"The JSON nests {depth} levels deep; at most {max_json_depth} are accepted.",
            )
        try:
            obj = json.loads(text, parse_constant=_reject_constant)
        except json.JSONDecodeError as exc:  # its text quotes nothing, but say it in our words
            return reject(
                422,
                "invalid_json",
                f"The body is not valid JSON (line {exc.lineno}, column {exc.colno}).",
            )
        except ValueError:  # NaN / Infinity, refused by _reject_constant
            return reject(
                422, "invalid_json", "The body is not valid JSON: NaN and Infinity are not JSON."
            )
        if not isinstance(obj, dict):
            return reject(
                422, "not_an_object", f"The body must be a JSON object, got {type(obj).__name__}."
            )
        version = obj.get("schema_version")
        if type(version) is not int or version != SCHEMA_VERSION:
            return reject(
                422,
                "bad_schema_version",
                f"schema_version must be {SCHEMA_VERSION}, got {json.dumps(version)[:40]}.",
            )
        try:
            event = TaskEvent.model_validate_json(body, strict=True)
        except ValidationError as exc:
            return reject(422, "invalid_event", _validation_detail(exc))
        if standard is not None and values[HEADER_WEBHOOK_ID] != event.event_id:
            return reject(
                422, "webhook_id_mismatch", f"{HEADER_WEBHOOK_ID} is not the body's event_id."
            )
        if event.server != server:
            return reject(
                422,
                "server_mismatch",
                f"The body says server {event.server[:100]!r} but {HEADER_SERVER} says {server!r}.",
            )

        # 6. Store once.
        attempt = recorder.record_event(
            event, server=server, n=n, received_wall=received_wall, received_mono=received_mono
        )
        if attempt.outcome == "duplicate":
            _log.info("duplicate %s", _event_line(attempt))
            return JSONResponse({"duplicate": True, "event_id": event.event_id})
        _log.info(
            "accepted %s anomalies=%s", _event_line(attempt), [a["kind"] for a in attempt.anomalies]
        )
        for anomaly in attempt.anomalies:
            if anomaly["kind"] == "gap":
                repairer.schedule(server, event.task_id, anomaly["expected"] - 1)
        return JSONResponse(
            {
                "accepted": True,
                "duplicate": False,
                "event_id": event.event_id,
                "anomalies": list(attempt.anomalies),
            }
        )

    # ------------------------------------------------------------ inspection

    @app.get(
        "/api/fake/events", summary="Stored events, filtered", responses={422: _ERROR_RESPONSE}
    )
    async def list_events(
        recorder: RecorderDep,
        server: str | None = None,
        task_id: str | None = None,
        type: EventType | None = None,
    ) -> dict[str, Any]:
        events = recorder.events(server=server, task_id=task_id, type=type)
        return {"count": len(events), "events": [e.to_dict() for e in events]}

    @app.get("/api/fake/tasks", summary="Every task seen, with a summary")
    async def list_tasks(recorder: RecorderDep) -> dict[str, Any]:
        tasks = []
        for timeline in recorder.timelines():
            tasks.append(
                {
                    "task_id": timeline.task_id,
                    "server": timeline.server,
                    "events": len(timeline.events),
                    "terminal": None if timeline.terminal is None else timeline.terminal.type,
                    "anomalies": len(timeline.anomalies) + timeline.anomalies_truncated,
                }
            )
        return {"tasks": tasks}

    @app.get(
        "/api/fake/tasks/{task_id}",
        summary="One task's timeline with gaps, duplicates and anomalies",
        responses={404: _ERROR_RESPONSE, 422: _ERROR_RESPONSE},
    )
    async def get_task(task_id: str, recorder: RecorderDep, server: str | None = None) -> Any:
        timeline = recorder.timeline(task_id, server)
        if timeline is None:
            return _error(404, "not_found", f"No event has named task {task_id[:100]!r}.")
        return timeline.to_dict()

    @app.get("/api/fake/counters", summary="Counters")
    async def get_counters(recorder: RecorderDep) -> dict[str, Any]:
        return recorder.counters()

    @app.get(
        "/api/fake/attempts",
        summary="Every POST, with receive times and status",
        responses={422: _ERROR_RESPONSE},
    )
    async def list_attempts(recorder: RecorderDep, server: str | None = None) -> dict[str, Any]:
        attempts = recorder.attempts(server)
        return {"count": len(attempts), "attempts": [a.to_dict() for a in attempts]}

    @app.post("/api/fake/reset", summary="Forget events, attempts, counters and faults")
    async def reset(recorder: RecorderDep) -> dict[str, Any]:
        recorder.reset()
        return {"reset": True}

    @app.get(
        "/api/fake/wait",
        summary="Long-poll until a task has an event of a type",
        responses={408: _ERROR_RESPONSE, 422: _ERROR_RESPONSE},
    )
    async def wait(
        recorder: RecorderDep,
        task_id: Annotated[str, Query(min_length=1)],
        type: EventType | None = None,
        timeout_s: Annotated[float, Query(gt=0, le=300)] = 10.0,
        server: str | None = None,
    ) -> Any:
        try:
            found = await recorder.wait_for_event_async(task_id, type, timeout_s, server=server)
        except TimeoutError as exc:
            return _error(408, "timeout", str(exc))
        return found.to_dict()

    @app.get("/api/fake/faults", summary="Pending injected faults")
    async def list_faults(recorder: RecorderDep) -> dict[str, Any]:
        return {"faults": [f.to_dict() for f in recorder.faults()]}

    @app.post(
        "/api/fake/faults",
        status_code=201,
        summary="Answer the next N posts from a server with a status, a delay or a drop",
        responses={422: _ERROR_RESPONSE},
    )
    async def add_fault(spec: FaultRequest, recorder: RecorderDep) -> Any:
        try:
            fault = recorder.inject_fault(
                spec.server,
                status=spec.status,
                delay_s=spec.delay_s,
                drop=spec.drop,
                count=spec.count,
            )
        except ValueError as exc:
            return _error(422, "invalid_fault", str(exc))
        return JSONResponse(
            {"fault": fault.to_dict(), "faults": [f.to_dict() for f in recorder.faults()]},
            status_code=201,
        )

    @app.delete(
        "/api/fake/faults",
        summary="Remove pending faults (of one server, or all)",
        responses={422: _ERROR_RESPONSE},
    )
    async def clear_faults(recorder: RecorderDep, server: str | None = None) -> dict[str, Any]:
        recorder.clear_faults(server)
        return {"faults": [f.to_dict() for f in recorder.faults()]}

    # ------------------------------------------------------------ the live page

    @app.get("/api/fake/stream", include_in_schema=False)
    async def stream(request: Request, recorder: RecorderDep) -> StreamingResponse:
        return StreamingResponse(
            _feed(recorder),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    @app.get("/", include_in_schema=False)
    async def page() -> HTMLResponse:
        html = importlib.resources.files("fake_rvc").joinpath("static/index.html").read_text()
        return HTMLResponse(
            html,
            headers={
                "Content-Security-Policy": (
                    "default-src 'none'; script-src 'unsafe-inline'; "
                    "style-src 'unsafe-inline'; connect-src 'self'"
                )
            },
        )

    return app


async def _feed(recorder: Recorder, heartbeat_s: float = 15.0) -> AsyncIterator[str]:
    """Server-sent events for the page: a reset, the backlog, then each attempt live."""
    past, sub = recorder.subscribe()
    try:
        yield "retry: 1000\n\n"
        yield _sse("reset", {})
        for attempt in past:
            yield _sse("attempt", attempt.to_dict(), attempt.n)
        yield _sse("counters", recorder.counters())
        while True:
            try:
                item = await asyncio.wait_for(sub.queue.get(), heartbeat_s)
            except TimeoutError:
                yield ": ping\n\n"
                continue
            if item is None:
                return
            _kind, live = item
            if live is None:
                yield _sse("reset", {})
            else:
                yield _sse("attempt", live.to_dict(), live.n)
            yield _sse("counters", recorder.counters())
    finally:
        recorder.unsubscribe(sub)


async def _invalid_request(request: Request, exc: Exception) -> Response:
    """422 ``invalid_request`` naming the fields, instead of FastAPI's echo of the input."""
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    detail = _describe_errors(errors, "The request is invalid")
    _log.warning("invalid request %s %s: %s", request.method, request.url.path, detail)
    return _error(422, "invalid_request", detail)


async def _internal_error(request: Request, exc: Exception) -> Response:
    """500 ``internal`` with an ``error_id`` that the log line (with the traceback) names."""
    if isinstance(exc, ConnectionDropped):  # in process: the drop already logged itself
        return Response(status_code=500)
    error_id = uuid.uuid4().hex[:8]
    _log.error(
        "internal error error_id=%s on %s %s",
        error_id,
        request.method,
        request.url.path,
        exc_info=exc,
    )
    return _error(
        500,
        "internal",
        f"fake_rvc failed unexpectedly; its log names error_id {error_id}.",
        error_id=error_id,
    )


async def _drop(request: Request) -> Response:
    """Close the client's connection without answering (an injected ``drop`` fault)."""
    close = request.scope.get("extensions", {}).get(DROP_EXTENSION)
    if close is None:
        raise ConnectionDropped(
            "fake_rvc dropped the connection on purpose (fault injection); served in "
            "process there is no socket to close, so the app raises instead."
        )
    close()
    # Wait until uvicorn has seen the connection go, so it does not try to write a 500
    # on the closing transport; after that, uvicorn discards whatever we send.
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(2.0):
            while (await request.receive())["type"] != "http.disconnect":
                pass
    return Response(status_code=500)
