"""A receiver of ``POST /api/agent/events`` written from ``docs/contract.md`` alone.

It imports nothing from this repository (the standard library, plus uvicorn to serve it),
so it stands for a brain team's receiver: the receiver suite must pass it (``control.py``)
and fail each of its variants in this folder, one defect each, on exactly the clause that
defect breaks (``tests/integration/test_receiver_conformance.py``).

:class:`Receiver` is a plain ASGI app: ``POST /api/agent/events`` verifies (§4.3),
refuses (§4.4; an event of a type it does not know is acknowledged and ignored), dedupes
and tracks seq (§5.3), and ``GET /inspect?server=…&task_id=…`` is
its inspection hook (§5.5). Each step is a method, the seams the defects override.

Run as a script (``python control.py``) it serves on ``127.0.0.1:$RECEIVER_PORT`` with
``RECEIVER_SECRETS="name=secret[,secret2];other=secret"``.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import re
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

EVENTS_PATH = "/api/agent/events"
HOOK_PATH = "/inspect"
EVENT_TYPES = frozenset(
    {
        "progress",
        "trigger_fired",
        "task_done",
        "task_failed",
        "watch_event",
        "input_required",
        "input_answered",
    }
)
TIMESTAMP = re.compile(r"[0-9]{1,12}")
SKEW_S = 300
MAX_BODY_BYTES = 1_048_576
MAX_DEPTH = 33  # §3.2: a payload 32 levels deep, plus the envelope

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class Refused(Exception):
    """A post the receiver refuses: the status and the error code of its answer."""

    def __init__(self, status: int, code: str) -> None:
        super().__init__(code)
        self.status = status
        self.code = code


def _depth(body: bytes) -> int:
    """The deepest nesting of arrays and objects, outside strings, without parsing."""
    stripped = re.sub(rb'"(?:[^"\\]|\\.)*"', b'""', body)
    depth = deepest = 0
    for byte in stripped:
        if byte in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        elif byte in b"]}":
            depth -= 1
    return deepest


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class Receiver:
    """The contract's receiver, with one method per step (see the module docstring).

    Args:
        secrets: server name → its current secrets (two during a rotation).
    """

    def __init__(self, secrets: dict[str, list[str]]) -> None:
        self.secrets = {name: list(keys) for name, keys in secrets.items()}
        self.max_body_bytes = MAX_BODY_BYTES
        self._lock = threading.Lock()
        self._seen: set[str] = set()
        self._expected: dict[tuple[str, str], int] = {}
        self._processed: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._gaps: dict[tuple[str, str], set[int]] = {}

    # ----------------------------------------------------------------- ASGI

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if scope["method"] == "POST" and scope["path"] == EVENTS_PATH:
            try:
                status, answer = await self.handle(scope, receive)
            except Refused as exc:
                status, answer = exc.status, {"error": exc.code}
        elif scope["method"] == "GET" and scope["path"] == HOOK_PATH:
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            status, answer = 200, self.hook(query["server"][0], query["task_id"][0])
        else:
            status, answer = 404, {"error": "not_found"}
        body = json.dumps(answer).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def handle(self, scope: Scope, receive: Receive) -> tuple[int, dict[str, Any]]:
        """Answer one post: (status, answer) for an acknowledgement, Refused otherwise."""
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > self.max_body_bytes:
            raise Refused(413, "too_large")
        body = await self.read_body(receive)
        server = self.authenticate(headers, body)
        event = self.parse(body, server)
        return await self.accept(server, event)

    async def read_body(self, receive: Receive) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise Refused(413, "too_large")
            chunks.append(chunk)
            if not message.get("more_body"):
                return b"".join(chunks)

    # ----------------------------------------------------------------- §4.3 verifying

    def authenticate(self, headers: dict[str, str], body: bytes) -> str:
        """The server that signed ``body``, or Refused 401."""
        server = headers.get("x-rvc-server")
        if not server:
            raise Refused(401, "missing_server")
        keys = self.secrets_for(server)
        if not keys:
            raise Refused(401, "unknown_server")
        stamp = headers.get("x-rvc-timestamp")
        if stamp is None:
            raise Refused(401, "missing_timestamp")
        seconds = self.parse_timestamp(stamp)
        if seconds is None:
            raise Refused(401, "malformed_timestamp")
        self.check_window(seconds, time.time())
        given = headers.get("x-rvc-signature")
        if given is None:
            return self.unsigned(server)
        message = self.signed_message(stamp, body)
        for key in keys:
            expected = "sha256=" + hmac.new(key.encode(), message, hashlib.sha256).hexdigest()
            if self.signatures_match(given, expected):
                return server
        raise Refused(401, "bad_signature")

    def secrets_for(self, server: str) -> list[str] | None:
        return self.secrets.get(server)

    def parse_timestamp(self, stamp: str) -> int | None:
        return int(stamp) if TIMESTAMP.fullmatch(stamp) else None

    def check_window(self, seconds: int, now: float) -> None:
        if seconds < now - SKEW_S:
            raise Refused(401, "stale_timestamp")
        if seconds > now + SKEW_S:
            raise Refused(401, "future_timestamp")

    def unsigned(self, server: str) -> str:
        """A post without X-RVC-Signature."""
        raise Refused(401, "missing_signature")

    def signed_message(self, stamp: str, body: bytes) -> bytes:
        return stamp.encode("latin-1") + b"." + body

    def signatures_match(self, given: str, expected: str) -> bool:
        return hmac.compare_digest(given.encode("latin-1"), expected.encode())

    # ----------------------------------------------------------------- §4.4 the body

    def parse(self, body: bytes, server: str) -> dict[str, Any]:
        """The TaskEvent of ``body``, or Refused 422."""
        if self.too_deep(body):
            raise Refused(422, "too_deep")
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise Refused(422, "invalid_encoding") from None
        try:
            value = self.load_json(text)
        except ValueError:
            raise Refused(422, "invalid_json") from None
        return self.validate(value, server)

    def too_deep(self, body: bytes) -> bool:
        return _depth(body) > MAX_DEPTH

    def load_json(self, text: str) -> Any:
        return json.loads(text, parse_constant=_no_constants)

    def validate(self, value: Any, server: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise Refused(422, "not_an_object")
        strings = ("event_id", "task_id", "server", "ts")
        if (
            type(value.get("schema_version")) is not int
            or value["schema_version"] != 1
            or not all(isinstance(value.get(k), str) and value[k] for k in strings)
            or not isinstance(value.get("tool"), str)
            or not isinstance(value.get("type"), str)
            or not value["type"]
            or type(value.get("seq")) is not int
            or value["seq"] < 1
            or not isinstance(value.get("payload"), dict)
        ):
            raise Refused(422, "invalid_event")
        self.check_server(value, server)
        self.check_type(value["type"])
        return value

    def check_type(self, kind: str) -> None:
        """§4.4: a type this receiver does not know is no reason to refuse (it is ignored)."""

    def check_server(self, event: dict[str, Any], server: str) -> None:
        if event["server"] != server:
            raise Refused(422, "server_mismatch")

    # ----------------------------------------------------------------- §5.3 processing

    async def accept(self, server: str, event: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if not self.record(server, event):
            return self.duplicate(server, event)
        await self.pause()
        return 200, {"accepted": True}

    def record(self, server: str, event: dict[str, Any]) -> bool:
        """Process a new event (dedupe, seq, store); False when its event_id was seen."""
        key = (server, str(event["task_id"]))
        with self._lock:
            if event["event_id"] in self._seen:
                return False
            self._seen.add(event["event_id"])
            expected = self._expected.get(key, 1)
            seq = int(event.get("seq") or 0)
            self.check_order(expected, seq)
            if seq > expected:
                self._gaps.setdefault(key, set()).update(range(expected, seq))
            self._expected[key] = max(expected, seq + 1)
            if event["type"] in EVENT_TYPES:  # §4.4: an unknown type counts, but is ignored
                self.store(key, event)
            return True

    def check_order(self, expected: int, seq: int) -> None:
        """A gap (seq > expected) or a late event (seq < expected) is taken (§5.3)."""

    def store(self, key: tuple[str, str], event: dict[str, Any]) -> None:
        self._processed.setdefault(key, []).append(event)

    def duplicate(self, server: str, event: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return 200, {"duplicate": True}

    async def pause(self) -> None:
        """Before acknowledging a new event (the receiver's own work)."""

    # ----------------------------------------------------------------- §5.5 the hook

    def hook(self, server: str, task_id: str) -> dict[str, Any]:
        key = (server, task_id)
        with self._lock:
            events = [
                {"event_id": e["event_id"], "seq": e.get("seq")}
                for e in self._processed.get(key, [])
            ]
            return {"events": events, "gaps": sorted(self._gaps.get(key, set()))}


def secrets_from_env(text: str) -> dict[str, list[str]]:
    """``name=secret[,secret2];other=secret`` → the secrets map."""
    out: dict[str, list[str]] = {}
    for entry in filter(None, text.split(";")):
        name, _, keys = entry.partition("=")
        out[name] = keys.split(",")
    return out


def serve(factory: Callable[[dict[str, list[str]]], Receiver]) -> None:
    """Serve ``factory(secrets)`` on 127.0.0.1:$RECEIVER_PORT until interrupted."""
    import uvicorn

    app = factory(secrets_from_env(os.environ.get("RECEIVER_SECRETS", "sleeper=s3cret")))
    port = int(os.environ.get("RECEIVER_PORT", "8000"))
    asyncio.run(uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning")).serve())
