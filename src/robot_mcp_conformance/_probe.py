"""The receiver suite's poster: builds TaskEvents, signs them per the contract, posts them.

:class:`Probe` plays a capability server against the receiver under test. It signs as
``docs/contract.md`` §4.1 says, over the exact bytes it sends and the exact timestamp
string it sends (so a malformed timestamp is still covered by a valid signature and only
the format check can refuse it), and records every post as an :class:`Exchange`: what was
sent, what came back, how long it took. Every post has a fresh task id unless the caller
gives one, so each check stands alone and the inspection hook can be asked about it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from robot_mcp_conformance._receiver_config import ReceiverConfig
from robot_mcp_kit import __version__

__all__ = [
    "HEADER_SERVER",
    "HEADER_SIGNATURE",
    "HEADER_TIMESTAMP",
    "PROBE_TOOL",
    "Exchange",
    "Probe",
    "compact",
    "signature",
]

HEADER_SERVER = "X-RVC-Server"
HEADER_TIMESTAMP = "X-RVC-Timestamp"
HEADER_SIGNATURE = "X-RVC-Signature"
PROBE_TOOL = "conformance_probe"
"""The ``tool`` of every event the suite sends."""

_PREVIEW_CHARS = 300
_ANSWER_CHARS = 500


def compact(value: Any) -> bytes:
    """``value`` as the compact JSON bytes a poster sends."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def signature(secret: str, timestamp: str | bytes, body: bytes) -> str:
    """``sha256=`` + hex HMAC-SHA256 keyed by ``secret`` over ``timestamp + "." + body``.

    ``timestamp`` is the header value exactly as sent (contract §4.1), so this signs any
    string, a malformed one included.
    """
    stamp = timestamp.encode() if isinstance(timestamp, str) else timestamp
    digest = hmac.new(secret.encode(), stamp + b"." + body, hashlib.sha256).hexdigest()
    return "sha256=" + digest


def _shown(value: str | bytes) -> str:
    return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else value


@dataclass(frozen=True)
class Exchange:
    """One POST the suite sent and what the receiver answered."""

    label: str
    """What was sent, in words (``bad signature: last hex digit flipped``)."""
    headers: dict[str, str]
    body_preview: str
    body_bytes: int
    status: int | None
    """The answer's status; None when no answer came (connection error, timeout)."""
    answer: str
    """The start of the answer's body, or why there was none."""
    elapsed_s: float
    event_id: str | None = None
    task_id: str | None = None
    server: str | None = None
    """The server the event is filed under: its X-RVC-Server (or the body's when absent)."""
    body_server: str | None = None
    seq: int | None = None

    @property
    def acknowledged(self) -> bool:
        """A 2xx: the receiver took responsibility for the event (contract §5.1)."""
        return self.status is not None and 200 <= self.status < 300

    @property
    def refused(self) -> bool:
        """A 4xx: the receiver refused the post, as it must refuse a bad one (§4.4)."""
        return self.status is not None and 400 <= self.status < 500

    def describe_answer(self) -> str:
        """The answer in a few words: ``401``, ``500``, or ``no answer (ConnectError...)``."""
        return f"{self.status}" if self.status is not None else f"no answer ({self.answer})"

    def evidence(self) -> dict[str, Any]:
        """A JSON-ready account of the exchange, for a failure message or the report."""
        return {
            "sent": self.label,
            "headers": self.headers,
            "body": self.body_preview,
            "body_bytes": self.body_bytes,
            "status": self.status,
            "answer": self.answer,
            "elapsed_s": round(self.elapsed_s, 4),
            "event_id": self.event_id,
            "task_id": self.task_id,
        }


class Probe:
    """Signs and posts events to the receiver under test; keeps every :class:`Exchange`.

    Not thread-safe: one test session drives it. :meth:`close` ends its connections.

    Args:
        config: the receiver under test.
        clock: unix seconds now (the timestamps it signs); ``time.time`` by default.
    """

    def __init__(self, config: ReceiverConfig, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.clock = clock
        self.exchanges: list[Exchange] = []
        self._client: httpx.Client | None = httpx.Client(
            timeout=config.request_timeout_s,
            headers={"User-Agent": f"robot-mcp-conformance/{__version__} (receiver suite)"},
        )

    def __repr__(self) -> str:
        return f"Probe(url={self.config.url!r}, posted={len(self.exchanges)})"

    def close(self) -> None:
        """Close the HTTP connections (idempotent)."""
        if self._client is not None:
            self._client.close()
            self._client = None

    # ----------------------------------------------------------------- building

    def new_task(self) -> str:
        """A fresh task id of the contract's form (§2.3) for the configured server."""
        return f"{self.config.server_name[:4]}-{secrets.token_hex(3)}"

    def event(
        self,
        task_id: str,
        seq: int,
        *,
        type: str = "progress",
        payload: dict[str, Any] | None = None,
        server: str | None = None,
        event_id: str | None = None,
    ) -> dict[str, Any]:
        """A TaskEvent (§3.1) as a dict, stamped now."""
        now = datetime.fromtimestamp(self.clock(), UTC)
        return {
            "schema_version": 1,
            "event_id": event_id or uuid.uuid4().hex,
            "task_id": task_id,
            "server": server or self.config.server_name,
            "tool": PROBE_TOOL,
            "type": type,
            "seq": seq,
            "ts": now.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "payload": {"percent": min(100, 10 * seq)} if payload is None else payload,
        }

    def headers(
        self,
        body: bytes,
        *,
        secret: str | None = None,
        timestamp: str | bytes | None = None,
        skew_s: float = 0.0,
        server: str | None = None,
    ) -> dict[str, str | bytes]:
        """The three X-RVC headers signing ``body`` (and Content-Type).

        ``timestamp`` is sent as given (and signed as sent); without it, the suite's clock
        plus ``skew_s``, in whole seconds.
        """
        stamp = str(int(self.clock() + skew_s)) if timestamp is None else timestamp
        return {
            "Content-Type": "application/json",
            HEADER_SERVER: server or self.config.server_name,
            HEADER_TIMESTAMP: stamp,
            HEADER_SIGNATURE: signature(secret or self.config.secret, stamp, body),
        }

    # ----------------------------------------------------------------- posting

    def post(
        self,
        label: str,
        body: bytes,
        headers: Mapping[str, str | bytes],
        event: Mapping[str, Any] | None = None,
    ) -> Exchange:
        """POST ``body`` with exactly ``headers``; record and return the exchange.

        A connection error or a timeout is an exchange without a status, not an error.
        """
        assert self._client is not None, "the probe is closed"
        sent = {name: _shown(value) for name, value in headers.items()}
        started = time.perf_counter()
        try:
            raw = {
                name.encode(): value if isinstance(value, bytes) else value.encode()
                for name, value in headers.items()
            }
            response = self._client.post(self.config.url, content=body, headers=raw)
            status: int | None = response.status_code
            answer = response.text[:_ANSWER_CHARS]
        except httpx.HTTPError as exc:
            status = None
            answer = f"{type(exc).__name__}: {exc}"[:_ANSWER_CHARS]
        elapsed = time.perf_counter() - started
        header_server = sent.get(HEADER_SERVER)
        body_server = event.get("server") if event is not None else None
        exchange = Exchange(
            label=label,
            headers=sent,
            body_preview=body[:_PREVIEW_CHARS].decode("utf-8", "backslashreplace"),
            body_bytes=len(body),
            status=status,
            answer=answer,
            elapsed_s=elapsed,
            event_id=_text(event, "event_id"),
            task_id=_text(event, "task_id"),
            server=header_server or (body_server if isinstance(body_server, str) else None),
            body_server=body_server if isinstance(body_server, str) else None,
            seq=event.get("seq") if event is not None and type(event.get("seq")) is int else None,
        )
        self.exchanges.append(exchange)
        return exchange

    def send(
        self,
        label: str,
        event: Mapping[str, Any],
        **header_options: Any,
    ) -> Exchange:
        """Sign and post one event (see :meth:`headers` for the options)."""
        body = compact(event)
        return self.post(label, body, self.headers(body, **header_options), event)


def _text(event: Mapping[str, Any] | None, key: str) -> str | None:
    value = event.get(key) if event is not None else None
    return value if isinstance(value, str) else None
