"""The FastAPI app: the brain's ``POST /api/agent/events``, inspection and the live page.

``create_app(secrets)`` builds a fresh app on the kit's receiver
(:class:`robot_mcp_kit.receiver.Receiver`, ``app.state.receiver``): it verifies each post
(the pure :func:`robot_mcp_kit.receiver.check_post`), stores and dedupes events in its
state file (a temporary one unless ``state_path`` is given), tracks each task's seq,
repairs gaps through a server's ``get_task_events`` and reconciles with ``list_tasks``
(repair mode). fake_rvc adds what a test double needs: its :class:`~fake_rvc.Recorder`
(``app.state.recorder``, never a module global) keeps every attempt, each task's timeline
with its anomalies and the counters, for inspection, waits, the live page and export;
injected faults act before the receiver sees a post. The recorder and the clock reach the
endpoints as dependencies (:mod:`fake_rvc._dependencies`).

The events route is thin: it reads the headers and at most the size cap of the body,
lets an injected fault act (after the header and size checks, before authentication, like
a broken network would: a delay, then a status or a dropped connection; a delay alone goes
on to normal processing), and leaves every other decision to the receiver. A verified
event is recorded once: ``{"accepted": true, ...}``, or for a known ``event_id``
``{"duplicate": true, ...}``; an event of a ``type`` the kit does not know is acknowledged
the same way, with ``"unknown_type": true`` (the receiver logs ``post_unknown_type``;
``docs/contract.md`` §4.4).

Every error body is ``{"error": "<code>", "detail": "<sentence>"}``, and no answer carries
the text of a Python exception (issue 9, finding 7). The inspection API
(:mod:`fake_rvc._inspect`) answers a bad query or body with 422 ``invalid_request`` in the
same shape, and anything unexpected with 500 ``internal`` and a short ``error_id`` that the
``fake_rvc`` log line (with the traceback) also names. Every attempt, whatever its
outcome, is recorded with its receive times and logged as one ``post_*`` event.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response

from fake_rvc._dependencies import (
    ERROR_RESPONSE,
    RecorderDep,
    UnixClock,
    UnixClockDep,
    error_response,
)
from fake_rvc._exceptions import ConfigError, ConnectionDropped, SecretsError
from fake_rvc._faults import Fault
from fake_rvc._inspect import router as inspect_router
from fake_rvc._page import router as page_router
from fake_rvc._recorder import Recorder
from fake_rvc._records import Attempt, Outcome
from robot_mcp_kit import ConfigurationError, TaskEvent, TaskInfo
from robot_mcp_kit.log import get_logger
from robot_mcp_kit.receiver import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_JSON_DEPTH,
    Ingested,
    Receiver,
    ServerConfig,
    TaskUpdate,
    UpdateKind,
    Verdict,
    body_too_large,
    check_declared_size,
    describe_errors,
    peek,
    read_headers,
)
from robot_mcp_kit.signing import (
    DEFAULT_MAX_SKEW_S,
    HEADER_SERVER,
    HEADER_SIGNATURE,
    HEADER_TIMESTAMP,
    Secrets,
)

__all__ = ["DROP_EXTENSION", "EVENTS_PATH", "create_app"]

_log = get_logger("fake_rvc")

EVENTS_PATH = "/api/agent/events"
DROP_EXTENSION = "fake_rvc.close_connection"
"""ASGI scope extension: a callable that closes the client's connection (set by the
uvicorn protocol of :mod:`fake_rvc._server`)."""

_EVENTS_OPENAPI: dict[str, Any] = {
    "parameters": [
        {"name": name, "in": "header", "required": False, "schema": {"type": "string"}}
        for name in (HEADER_SERVER, HEADER_TIMESTAMP, HEADER_SIGNATURE)
    ],
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": TaskEvent.model_json_schema()}},
    },
}


def create_app(
    secrets: Mapping[str, Secrets],
    *,
    max_skew_s: int = DEFAULT_MAX_SKEW_S,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_json_depth: int = DEFAULT_MAX_JSON_DEPTH,
    clock: UnixClock | None = None,
    state: Recorder | None = None,
    repair_urls: Mapping[str, str] | None = None,
    reconcile_every_s: float | None = None,
    state_path: str | os.PathLike[str] | None = None,
) -> FastAPI:
    """Build a fake brain: the receiver of the servers' events.

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
            its tasks is filled through its ``get_task_events`` tool, and ``POST
            /api/fake/reconcile`` asks it ``list_tasks`` (the receiver does both).
        reconcile_every_s: with ``repair_urls``, also ask ``list_tasks`` every so many
            seconds while the app runs, so the live page shows every task's state, a
            task that posted no event included (None: only on request).
        state_path: the receiver's state file (its events, for dedup across a restart of
            fake_rvc); None: a temporary file, gone with the app.

    Raises:
        SecretsError: (a ``ValueError``) a server name or secret is empty or not a
            string, or a secret does not encode as UTF-8.
        ConfigError: (a ``ValueError``) ``reconcile_every_s`` is not a positive number,
            or a repair URL is not ``http(s)://host...``.
    """
    accepted = _checked_secrets(secrets)
    if reconcile_every_s is not None and not reconcile_every_s > 0:
        raise ConfigError(
            f"reconcile_every_s must be a positive number of seconds, got {reconcile_every_s!r}."
        )
    recorder = state if state is not None else Recorder()
    app_clock = clock if clock is not None else time.time
    urls = dict(repair_urls or {})
    listed: dict[str, int] = {}

    async def handle(update: TaskUpdate) -> None:
        # Posted events were recorded as they arrived; the receiver hands over the ones it
        # fetched to fill a gap (repair) or caught up on (reconciliation) as well.
        if update.kind is UpdateKind.EVENT and update.source != "post" and update.event:
            recorder.record_repaired(update.event, server=update.server)

    def on_listed(server: str, infos: list[TaskInfo]) -> None:
        tasks = [info.model_dump(mode="json") for info in infos]
        listed[server] = len(recorder.record_task_states(server, tasks))

    temporary: str | None = None
    if state_path is None:
        temporary = tempfile.mkdtemp(prefix="fake-rvc-")
        state_path = Path(temporary) / "receiver.db"
    try:
        servers = [
            ServerConfig(name, (keys,) if isinstance(keys, str) else tuple(keys), urls.get(name))
            for name, keys in accepted.items()
        ]
        receiver = Receiver(
            servers,
            handle,
            state=state_path,
            repair_wait_s=0.0,
            reconcile_every_s=reconcile_every_s,
            reconcile_on_start=reconcile_every_s is not None,
            max_skew_s=max_skew_s,
            max_body_bytes=max_body_bytes,
            max_json_depth=max_json_depth,
            clock=app_clock,
            on_listed=on_listed,
        )
    except ConfigurationError as exc:
        raise ConfigError(str(exc)) from None

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await receiver.start()
        try:
            yield
        finally:
            recorder.close_streams()
            await receiver.aclose()

    app = FastAPI(
        title="fake_rvc",
        summary="A fake of the brain's POST /api/agent/events, for tests and development.",
        version="0.1.0",
        lifespan=lifespan,
    )
    app.state.recorder = recorder
    app.state.secrets = accepted
    app.state.clock = app_clock
    app.state.receiver = receiver
    app.state.repair_urls = urls
    app.state.listed = listed
    # Served in process without a lifespan (httpx's ASGITransport), the receiver starts on
    # the first post; its file is closed (and a temporary one removed) when the app goes.
    weakref.finalize(app, _release, receiver, temporary)
    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.add_exception_handler(Exception, _internal_error)

    @app.post(
        EVENTS_PATH,
        summary="Receive one signed TaskEvent (kit spec §3.1)",
        openapi_extra=_EVENTS_OPENAPI,
        responses={status: ERROR_RESPONSE for status in (400, 401, 413, 422, 503)},
    )
    async def receive_event(
        request: Request, recorder: RecorderDep, clock: UnixClockDep
    ) -> Response:
        post = _Post(recorder, time.monotonic(), clock(), recorder.next_attempt_number())
        head = read_headers(request.headers.items())
        if isinstance(head, Verdict):
            return post.reject(head)
        post.traceparent = head.traceparent
        post.tracestate = head.tracestate
        early = check_declared_size(head, max_body_bytes)
        if early is not None:
            return post.reject(early)
        body = await _read_capped(request, max_body_bytes)
        if body is None:
            return post.reject(body_too_large(head.server, max_body_bytes))
        post.peek = peek(body, max_json_depth)
        task_id = post.peek.get("task_id")
        fault = recorder.take_fault(head.server, task_id if isinstance(task_id, str) else None)
        if fault is not None:
            answer = await post.answer_fault(fault, head.server, request)
            if answer is not None:
                return answer
        receipt = await receiver.receive(head, body, now=clock())
        verdict = receipt.verdict
        if verdict.event is None or verdict.server is None:
            return post.reject(verdict)
        if receipt.ingested is None:  # acknowledged by no one: the state file failed
            return post.unavailable(verdict.server, receipt.body)
        attempt = post.store(verdict.event, verdict.server, receipt.ingested)
        return _stored_response(attempt, unknown_type=verdict.unknown_type)

    app.include_router(inspect_router)
    app.include_router(page_router)
    return app


def _release(receiver: Receiver, temporary: str | None) -> None:
    """Close the receiver's file and remove a temporary state directory."""
    try:
        receiver.close()
    except Exception:  # a finalizer: never raise, say why
        _log.exception("receiver_close_failed")
    if temporary is not None:
        shutil.rmtree(temporary, ignore_errors=True)


def _checked_secrets(secrets: Mapping[str, Secrets]) -> dict[str, Secrets]:
    """The secrets as the app keeps them (a str, or a tuple during a rotation)."""
    accepted: dict[str, Secrets] = {}
    for name, value in secrets.items():
        keys = [value] if isinstance(value, str) else list(value or [])
        if (
            not isinstance(name, str)
            or not name
            or not keys
            or not all(isinstance(k, str) and k for k in keys)
        ):
            raise SecretsError(
                f"Secrets map server names to non-empty secrets; got {name!r} -> "
                f"{'<empty>' if not keys else '<secret>'}."
            )
        for key in keys:
            try:
                key.encode("utf-8")
            except UnicodeEncodeError:
                raise SecretsError(
                    f"The secret of server {name!r} is not text that encodes as UTF-8."
                ) from None
        accepted[name] = value if isinstance(value, str) else tuple(keys)
    return accepted


async def _read_capped(request: Request, max_body_bytes: int) -> bytes | None:
    """The body, or None as soon as more than ``max_body_bytes`` arrived."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_body_bytes:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


@dataclass
class _Post:
    """One POST on its way through the route: records and logs what became of it."""

    recorder: Recorder
    received_mono: float
    received_wall: float
    n: int
    peek: dict[str, Any] = field(default_factory=dict)
    traceparent: str | None = None
    tracestate: str | None = None

    def _record(
        self, server: str | None, status: int | None, outcome: Outcome, reason: str, detail: str
    ) -> None:
        self.recorder.record_attempt(
            Attempt(
                n=self.n,
                received_wall=self.received_wall,
                received_mono=self.received_mono,
                server=server,
                status=status,
                outcome=outcome,
                reason=reason,
                detail=detail,
                traceparent=self.traceparent,
                tracestate=self.tracestate,
                **self.peek,
            )
        )

    def reject(self, verdict: Verdict) -> JSONResponse:
        reason, detail = str(verdict.reason), verdict.detail or ""
        self._record(verdict.server, verdict.status, "rejected", reason, detail)
        _log.warning(
            "post_rejected",
            status=verdict.status,
            reason=reason,
            server=verdict.server,
            detail=detail,
        )
        return error_response(verdict.status, reason, detail)

    async def answer_fault(
        self, fault: Fault, server: str | None, request: Request
    ) -> Response | None:
        """Act out ``fault``; None when it was only a delay and the post goes on."""
        if fault.delay_s:
            await asyncio.sleep(fault.delay_s)
        if not fault.drop and fault.status is None:
            return None
        outcome: Outcome = "dropped" if fault.drop else "fault"
        self._record(
            server, fault.status, outcome, "injected_fault", f"Injected fault {fault.to_dict()}."
        )
        if fault.drop:
            _log.warning("fault_dropped_connection", server=server)
            return await _drop(request)
        _log.warning("fault_answered", status=fault.status, server=server)
        assert fault.status is not None  # not a drop, so a status
        if fault.status in (204, 304):
            return Response(status_code=fault.status)
        answer = error_response(
            fault.status,
            "injected_fault",
            f"fake_rvc answered {fault.status} on purpose (fault injection).",
        )
        if fault.retry_after_s is not None:
            answer.headers["Retry-After"] = str(fault.retry_after_s)
        return answer

    def unavailable(self, server: str, answer: dict[str, Any]) -> JSONResponse:
        """The receiver could not store the event: 503, which its poster retries."""
        detail = str(answer.get("detail", ""))
        self._record(server, 503, "rejected", "unavailable", detail)
        _log.error("post_unavailable", server=server, detail=detail)
        return error_response(503, "unavailable", detail)

    def store(self, event: TaskEvent, server: str, ingested: Ingested) -> Attempt:
        attempt = self.recorder.record_event(
            event,
            server=server,
            n=self.n,
            received_wall=self.received_wall,
            received_mono=self.received_mono,
            traceparent=self.traceparent,
            tracestate=self.tracestate,
            ingested=ingested,
        )
        fields: dict[str, Any] = {
            "server": attempt.server,
            "task_id": attempt.task_id,
            "seq": attempt.seq,
            "type": attempt.type,
            "event_id": attempt.event_id,
        }
        if attempt.outcome == "duplicate":
            _log.info("post_duplicate", **fields)
        else:
            anomalies = [a["kind"] for a in attempt.anomalies]
            _log.info("post_accepted", **fields, anomalies=anomalies)
        return attempt


def _stored_response(attempt: Attempt, *, unknown_type: bool = False) -> JSONResponse:
    """The 200 answer; ``"unknown_type": true`` for an event of a type the kit does not know."""
    answer: dict[str, Any]
    if attempt.outcome == "duplicate":
        answer = {"duplicate": True, "event_id": attempt.event_id}
    else:
        answer = {
            "accepted": True,
            "duplicate": False,
            "event_id": attempt.event_id,
            "anomalies": list(attempt.anomalies),
        }
    if unknown_type:
        answer["unknown_type"] = True
    return JSONResponse(answer)


async def _invalid_request(request: Request, exc: Exception) -> Response:
    """422 ``invalid_request`` naming the fields, instead of FastAPI's echo of the input."""
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    detail = describe_errors(errors, "The request is invalid")
    _log.warning(
        "invalid_request",
        method=request.method,
        path=request.url.path,
        detail=detail,
    )
    return error_response(422, "invalid_request", detail)


async def _internal_error(request: Request, exc: Exception) -> Response:
    """500 ``internal`` with an ``error_id`` that the log line (with the traceback) names."""
    if isinstance(exc, ConnectionDropped):  # in process: the drop already logged itself
        return Response(status_code=500)
    error_id = uuid.uuid4().hex[:8]
    _log.exception(
        "internal_error",
        error_id=error_id,
        method=request.method,
        path=request.url.path,
    )
    return error_response(
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
