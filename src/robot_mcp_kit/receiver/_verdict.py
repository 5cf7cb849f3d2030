"""Every accept/refuse decision of ``POST /api/agent/events`` (contract §4), as pure functions.

:func:`check_post` takes the request's headers and body, the secrets and the time, and
returns a :class:`Verdict`: the status, the reason code and the sentence the receiver
answers with, and the verified :class:`~robot_mcp_kit.TaskEvent`. It does no I/O, so
each verdict is a unit test. A receiver that reads the body itself calls :func:`read_headers` and
:func:`check_declared_size` first (before reading the body), then :func:`check_post` on
the body it read; :class:`~robot_mcp_kit.receiver.Receiver` and fake_rvc both do.

The checks, in order; the first failure is the answer:

====  =========================================================================
400   ``invalid_header`` (an ``X-RVC-*`` value with control or non-ASCII
      characters — header injection) / ``duplicate_header`` (sent twice)
413   ``too_large``: ``Content-Length`` or the bytes actually read exceed the cap
401   ``unknown_server``, ``missing_timestamp``, ``missing_signature``, then the
      reasons of :func:`robot_mcp_kit.signing.check`: ``malformed_timestamp``,
      ``stale_timestamp``, ``future_timestamp``, ``malformed_signature``,
      ``bad_signature``; for Standard Webhooks ``missing_webhook_headers`` and the
      reasons of :func:`robot_mcp_kit.signing.check_standard`
422   ``invalid_encoding`` (not UTF-8), ``too_deep`` (nesting beyond 33),
      ``invalid_json``, ``not_an_object``, ``bad_schema_version``,
      ``invalid_event`` (not a TaskEvent), ``webhook_id_mismatch``,
      ``server_mismatch`` (body ``server`` differs from ``X-RVC-Server``)
200   the event verified; one of a ``type`` this kit does not know too
      (:attr:`Verdict.unknown_type`)
====  =========================================================================

An event of an unknown ``type`` — signed, well formed, only its ``type`` (a non-empty
string) new — is not bad input (``docs/contract.md`` §4.4): the kit may add event types
within ``schema_version`` 1, and a refusal would hold back the task's later events for the
poster's 10 minutes of retries. It is verified like any other and acknowledged; a receiver
counts its ``seq`` (it leaves no gap) and acts on nothing in it.

No detail quotes the text of a Python exception: a body that is not valid JSON is
described by its position, a body that is not a TaskEvent by each field and pydantic's
error type (``seq is out of range (greater_than_equal)``), never pydantic's message or
the value sent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import get_args

from pydantic import Field, ValidationError, create_model

from robot_mcp_kit._exceptions import SignatureError
from robot_mcp_kit.models import SCHEMA_VERSION, EventType, TaskEvent
from robot_mcp_kit.receiver._bodies import (
    body_server,
    describe_errors,
    json_depth,
    reject_constant,
)
from robot_mcp_kit.signing import (
    DEFAULT_MAX_SKEW_S,
    HEADER_SERVER,
    HEADER_SIGNATURE,
    HEADER_TIMESTAMP,
    HEADER_WEBHOOK_ID,
    HEADER_WEBHOOK_SIGNATURE,
    HEADER_WEBHOOK_TIMESTAMP,
    Secrets,
    SignatureReason,
    check,
    check_standard,
)

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_JSON_DEPTH",
    "KNOWN_EVENT_TYPES",
    "MAX_TRACE_HEADER_CHARS",
    "BodyReason",
    "Headers",
    "PostHeaders",
    "Verdict",
    "body_too_large",
    "check_declared_size",
    "check_post",
    "read_asgi_headers",
    "read_event",
    "read_headers",
]

DEFAULT_MAX_BODY_BYTES = 1_048_576
"""Contract §4.4: 1 MiB unless a receiver says otherwise."""
DEFAULT_MAX_JSON_DEPTH = 33
"""Contract §3.2 allows a payload 32 levels deep; the event's envelope is one more level."""

KNOWN_EVENT_TYPES: frozenset[str] = frozenset(get_args(EventType))
"""The event types of this kit; any other ``type`` is acknowledged and ignored (§4.4)."""

_AnyTypeEvent = create_model(
    "TaskEvent",
    __base__=TaskEvent,
    type=(str, Field(min_length=1)),
)
"""A :class:`TaskEvent` whose ``type`` is any non-empty string: the envelope an event of a
type this kit does not know is checked against (every other field as strict)."""

Headers = Mapping[str, str] | Iterable[tuple[str, str]]
"""Request headers: a mapping, or (name, value) pairs where a repeated header repeats
(Starlette's ``request.headers.items()``). Names are matched case-insensitively."""

# Validating patterns are used with fullmatch only: "$" also matches before a final "\n".
_PRINTABLE_ASCII = re.compile(r"[\x20-\x7e]*")
_ASCII_DIGITS = re.compile(r"[0-9]+")


class BodyReason(StrEnum):
    """Why the receiver refused a delivery's size or body: the ``error`` code of its answer.

    The header and signature codes are :class:`robot_mcp_kit.SignatureReason`.
    """

    TOO_LARGE = "too_large"  # 413: Content-Length or the bytes read exceed the cap
    INVALID_ENCODING = "invalid_encoding"  # 422: the body is not UTF-8
    TOO_DEEP = "too_deep"  # 422: JSON nested deeper than the cap (33)
    INVALID_JSON = "invalid_json"  # 422: not JSON (or NaN / Infinity)
    NOT_AN_OBJECT = "not_an_object"  # 422: JSON, but not an object
    BAD_SCHEMA_VERSION = "bad_schema_version"  # 422: schema_version is not the kit's
    INVALID_EVENT = "invalid_event"  # 422: not a TaskEvent
    WEBHOOK_ID_MISMATCH = "webhook_id_mismatch"  # 422: webhook-id is not the event_id
    SERVER_MISMATCH = "server_mismatch"  # 422: body server differs from X-RVC-Server


@dataclass(frozen=True, slots=True)
class Verdict:
    """The receiver's decision on one POST.

    ``status`` 200 with the verified ``event``, or a 4xx with ``reason`` (a
    :class:`~robot_mcp_kit.SignatureReason` or :class:`BodyReason`) and ``detail`` (the
    sentence of the answer). ``server`` is the server the post is recorded under: the
    ``X-RVC-Server`` value (or the body's ``server`` for a Standard Webhooks post without
    it), None when the check stopped before it could be read.
    """

    status: int
    reason: str | None = None
    detail: str | None = None
    server: str | None = None
    event: TaskEvent | None = None

    @property
    def accepted(self) -> bool:
        """True when the post verified (``event`` is set)."""
        return self.event is not None

    @property
    def unknown_type(self) -> bool:
        """True for a verified event whose ``type`` is not one of :data:`KNOWN_EVENT_TYPES`."""
        return self.event is not None and self.event.type not in KNOWN_EVENT_TYPES


@dataclass(frozen=True, slots=True)
class PostHeaders:
    """The signature headers of one POST, each sent at most once, printable ASCII; and,
    as sent (at most 512 characters, never judged), its trace context (contract §4.5)."""

    server: str | None = None
    timestamp: str | None = None
    signature: str | None = None
    webhook_id: str | None = None
    webhook_timestamp: str | None = None
    webhook_signature: str | None = None
    content_length: str | None = None
    traceparent: str | None = None
    tracestate: str | None = None


_SIGNATURE_HEADERS = {
    HEADER_SERVER.lower(): "server",
    HEADER_TIMESTAMP.lower(): "timestamp",
    HEADER_SIGNATURE.lower(): "signature",
    HEADER_WEBHOOK_ID.lower(): "webhook_id",
    HEADER_WEBHOOK_TIMESTAMP.lower(): "webhook_timestamp",
    HEADER_WEBHOOK_SIGNATURE.lower(): "webhook_signature",
}
_HEADER_NAMES = {
    HEADER_SERVER.lower(): HEADER_SERVER,
    HEADER_TIMESTAMP.lower(): HEADER_TIMESTAMP,
    HEADER_SIGNATURE.lower(): HEADER_SIGNATURE,
    HEADER_WEBHOOK_ID.lower(): HEADER_WEBHOOK_ID,
    HEADER_WEBHOOK_TIMESTAMP.lower(): HEADER_WEBHOOK_TIMESTAMP,
    HEADER_WEBHOOK_SIGNATURE.lower(): HEADER_WEBHOOK_SIGNATURE,
}


def _reject(status: int, reason: str, detail: str, server: str | None) -> Verdict:
    return Verdict(status=status, reason=reason, detail=detail, server=server)


MAX_TRACE_HEADER_CHARS = 512
"""The most characters of a ``traceparent`` / ``tracestate`` header kept (a ``tracestate``
has at most 32 members; 512 covers every usual one)."""

_OTHER_HEADERS = frozenset({"content-length", "traceparent", "tracestate"})
_RAW_WANTED = frozenset(n.encode() for n in (*_SIGNATURE_HEADERS, *_OTHER_HEADERS))


def read_headers(headers: Headers) -> PostHeaders | Verdict:
    """The signature headers, or a 400 verdict (``duplicate_header`` / ``invalid_header``).

    The first offending header in the order server, timestamp, signature, webhook-id,
    webhook-timestamp, webhook-signature is the one named.
    """
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    found: dict[str, list[str]] = {}
    for name, value in pairs:
        lowered = name.lower()
        if lowered in _SIGNATURE_HEADERS or lowered in _OTHER_HEADERS:
            found.setdefault(lowered, []).append(value)
    return _judge_headers(found)


def read_asgi_headers(raw: Iterable[tuple[bytes, bytes]]) -> PostHeaders | Verdict:
    """:func:`read_headers` of an ASGI scope's ``headers`` (lower-case byte names): only
    the headers it judges are decoded (as latin-1, as ASGI servers do)."""
    found: dict[str, list[str]] = {}
    wanted = _RAW_WANTED
    for name, value in raw:
        if name in wanted:
            found.setdefault(name.decode(), []).append(value.decode("latin-1"))
    return _judge_headers(found)


def _judge_headers(found: dict[str, list[str]]) -> PostHeaders | Verdict:
    values: dict[str, str | None] = {}
    for lowered, field_name in _SIGNATURE_HEADERS.items():
        sent = found.get(lowered)
        if not sent:
            values[field_name] = None
            continue
        name = _HEADER_NAMES[lowered]
        if len(sent) > 1:
            return _reject(
                400, SignatureReason.DUPLICATE_HEADER, f"{name} was sent {len(sent)} times.", None
            )
        if not _PRINTABLE_ASCII.fullmatch(sent[0]):
            return _reject(
                400,
                SignatureReason.INVALID_HEADER,
                f"{name} contains control or non-ASCII characters: {sent[0][:100]!r}.",
                sent[0][:100] if name == HEADER_SERVER else None,
            )
        values[field_name] = sent[0]
    length = found.get("content-length")
    parent = found.get("traceparent")
    state = found.get("tracestate")
    return PostHeaders(
        **values,
        content_length=length[0] if length else None,
        traceparent=parent[0][:MAX_TRACE_HEADER_CHARS] if parent else None,
        tracestate=state[0][:MAX_TRACE_HEADER_CHARS] if state else None,
    )


def check_declared_size(head: PostHeaders, max_body_bytes: int) -> Verdict | None:
    """A 413 verdict when ``Content-Length`` exceeds ``max_body_bytes``, else None."""
    declared = head.content_length
    if (
        declared is not None
        and _ASCII_DIGITS.fullmatch(declared)
        and (len(declared) > 18 or int(declared) > max_body_bytes)
    ):
        return _reject(
            413,
            BodyReason.TOO_LARGE,
            f"Content-Length {declared[:40]} exceeds the {max_body_bytes}-byte limit.",
            head.server,
        )
    return None


def body_too_large(server: str | None, max_body_bytes: int) -> Verdict:
    """The 413 verdict of a body found larger than ``max_body_bytes`` while reading it."""
    return _reject(
        413, BodyReason.TOO_LARGE, f"The body exceeds the {max_body_bytes}-byte limit.", server
    )


def check_post(
    headers: Headers | PostHeaders,
    body: bytes,
    secrets: Mapping[str, Secrets],
    now: float,
    *,
    max_skew_s: int = DEFAULT_MAX_SKEW_S,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_json_depth: int = DEFAULT_MAX_JSON_DEPTH,
) -> Verdict:
    """Decide one POST: headers, size, signature (X-RVC and/or Standard Webhooks), body.

    Pure: no I/O, the same answer for the same arguments.

    Args:
        headers: the request's headers (see :data:`Headers`), or what
            :func:`read_headers` made of them.
        body: the bytes of the body.
        secrets: server name → its secret, or the list of its current secrets.
        now: unix seconds, to judge the timestamps against.
        max_skew_s: accepted timestamp distance from ``now``, either side.
        max_body_bytes: larger bodies get 413.
        max_json_depth: deeper JSON nesting gets 422 before parsing.

    Returns:
        The :class:`Verdict` (see the module docstring for the order of the checks).
    """
    head = headers if isinstance(headers, PostHeaders) else read_headers(headers)
    if isinstance(head, Verdict):
        return head
    too_large = check_declared_size(head, max_body_bytes)
    if too_large is None and len(body) > max_body_bytes:
        too_large = body_too_large(head.server, max_body_bytes)
    if too_large is not None:
        return too_large
    server = head.server
    if server is None and head.webhook_signature is not None:
        server = body_server(body, max_json_depth)
    verdict = _check_signature(head, server, body, secrets, now, max_skew_s)
    if verdict is not None:
        return verdict
    assert server is not None  # _check_signature refused a post without one
    return _check_body(head, server, body, max_json_depth)


def _check_signature(
    head: PostHeaders,
    server: str | None,
    body: bytes,
    secrets: Mapping[str, Secrets],
    now: float,
    max_skew_s: int,
) -> Verdict | None:
    """The 401 verdict of a post that does not authenticate, else None."""
    if server is None:
        return _reject(
            401, SignatureReason.UNKNOWN_SERVER, f"The {HEADER_SERVER} header is missing.", None
        )
    secret = secrets.get(server)
    if secret is None:
        known = ", ".join(sorted(secrets)) or "none"
        return _reject(
            401,
            SignatureReason.UNKNOWN_SERVER,
            f"{HEADER_SERVER} {server[:100]!r} is not a configured server (known: {known}).",
            server,
        )
    standard = head.webhook_signature
    try:
        if head.signature is not None or standard is None:
            if head.timestamp is None:
                return _reject(
                    401,
                    SignatureReason.MISSING_TIMESTAMP,
                    f"The {HEADER_TIMESTAMP} header is missing.",
                    server,
                )
            if head.signature is None:
                return _reject(
                    401,
                    SignatureReason.MISSING_SIGNATURE,
                    f"The {HEADER_SIGNATURE} header is missing.",
                    server,
                )
            check(secret, head.timestamp, body, head.signature, max_skew_s=max_skew_s, now_s=now)
        if standard is not None:
            if head.webhook_id is None or head.webhook_timestamp is None:
                return _reject(
                    401,
                    SignatureReason.MISSING_WEBHOOK_HEADERS,
                    f"{HEADER_WEBHOOK_SIGNATURE} needs {HEADER_WEBHOOK_ID} and "
                    f"{HEADER_WEBHOOK_TIMESTAMP}.",
                    server,
                )
            check_standard(
                secret,
                head.webhook_id,
                head.webhook_timestamp,
                body,
                standard,
                max_skew_s=max_skew_s,
                now_s=now,
            )
    except SignatureError as exc:
        return _reject(401, exc.reason, str(exc), server)
    return None


def _check_body(head: PostHeaders, server: str, body: bytes, max_json_depth: int) -> Verdict:
    """The 422 verdict of a body that is not this server's TaskEvent, else 200 with it."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _reject(
            422,
            BodyReason.INVALID_ENCODING,
            f"The body is not UTF-8 (bad byte at {exc.start}).",
            server,
        )
    # Nesting cannot be deeper than the brackets opened: most events open a handful.
    depth = 0 if body.count(b"{") + body.count(b"[") <= max_json_depth else json_depth(body)
    if depth > max_json_depth:
        return _reject(
            422,
            BodyReason.TOO_DEEP,
            f"The JSON nests {depth} levels deep; at most {max_json_depth} are accepted.",
            server,
        )
    found: TaskEvent | None = None
    # The common case parses once: pydantic's JSON parser takes NaN and Infinity, which
    # are not JSON, so a body naming either goes the long way (json.loads refuses them).
    if b"NaN" not in body and b"Infinity" not in body:
        try:
            found = TaskEvent.model_validate_json(body, strict=True)
        except ValidationError:
            found = None
        # TaskEvent defaults schema_version: the envelope must carry it, and this one.
        if found is not None and (
            "schema_version" not in found.model_fields_set or found.schema_version != SCHEMA_VERSION
        ):
            found = None
    if found is None:
        diagnosed = _diagnose(body, server)
        if isinstance(diagnosed, Verdict):
            return diagnosed
        found = diagnosed
    if head.webhook_signature is not None and head.webhook_id != found.event_id:
        return _reject(
            422,
            BodyReason.WEBHOOK_ID_MISMATCH,
            f"{HEADER_WEBHOOK_ID} is not the body's event_id.",
            server,
        )
    if found.server != server:
        return _reject(
            422,
            BodyReason.SERVER_MISMATCH,
            f"The body says server {found.server[:100]!r} but {HEADER_SERVER} says {server!r}.",
            server,
        )
    return Verdict(status=200, server=server, event=found)


def _diagnose(body: bytes, server: str) -> TaskEvent | Verdict:
    """Say precisely why ``body`` is not a TaskEvent (the slow path), or read it."""
    try:
        obj = json.loads(body.decode("utf-8"), parse_constant=reject_constant)
    except json.JSONDecodeError as exc:  # its text quotes nothing, but say it in our words
        return _reject(
            422,
            BodyReason.INVALID_JSON,
            f"The body is not valid JSON (line {exc.lineno}, column {exc.colno}).",
            server,
        )
    except ValueError:  # NaN / Infinity, refused by reject_constant
        return _reject(
            422,
            BodyReason.INVALID_JSON,
            "The body is not valid JSON: NaN and Infinity are not JSON.",
            server,
        )
    if not isinstance(obj, dict):
        return _reject(
            422,
            BodyReason.NOT_AN_OBJECT,
            f"The body must be a JSON object, got {type(obj).__name__}.",
            server,
        )
    version = obj.get("schema_version")
    if type(version) is not int or version != SCHEMA_VERSION:
        return _reject(
            422,
            BodyReason.BAD_SCHEMA_VERSION,
            f"schema_version must be {SCHEMA_VERSION}, got {json.dumps(version)[:40]}.",
            server,
        )
    kind = obj.get("type")
    envelope = (
        _AnyTypeEvent if isinstance(kind, str) and kind not in KNOWN_EVENT_TYPES else TaskEvent
    )
    try:
        event: TaskEvent = envelope.model_validate_json(body, strict=True)
    except ValidationError as exc:
        detail = describe_errors(exc.errors(include_url=False), "The body is not a TaskEvent")
        return _reject(422, BodyReason.INVALID_EVENT, detail, server)
    return event


def read_event(raw: object) -> TaskEvent | None:
    """A TaskEvent from a decoded JSON object (a ``get_task_events`` page's entry).

    Judged as a posted body would be (strict types, ``schema_version`` 1, no NaN; a type
    this kit does not know is read like any, :data:`KNOWN_EVENT_TYPES` tells). Returns
    None for anything that is not an event. Never raises.
    """
    if not isinstance(raw, dict):
        return None
    try:
        body = json.dumps(raw, separators=(",", ":")).encode()
    except (TypeError, ValueError, RecursionError):
        return None
    if json_depth(body) > DEFAULT_MAX_JSON_DEPTH:
        return None
    found = _diagnose(body, "")
    return None if isinstance(found, Verdict) else found
