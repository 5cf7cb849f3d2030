"""HMAC signing of event bodies (kit spec §3.1, §4.3), shared by the poster and receivers.

The signature covers ``f"{timestamp}.".encode() + body`` with HMAC-SHA256 keyed by the
server's secret, and travels as ``X-RVC-Signature: sha256=<hex>`` next to
``X-RVC-Timestamp: <unix seconds>`` and ``X-RVC-Server: <name>``. A receiver accepts a
timestamp within ``max_skew_s`` (300 s) of its own clock, either side.

Nothing here needs the network or the ``mcp`` extra.
"""

from __future__ import annotations

import hashlib
import hmac
import time

from robot_mcp_kit._exceptions import SignatureError

__all__ = [
    "DEFAULT_MAX_SKEW_S",
    "HEADER_SERVER",
    "HEADER_SIGNATURE",
    "HEADER_TIMESTAMP",
    "SIGNATURE_PREFIX",
    "check",
    "sign",
    "signed_headers",
    "verify",
]

HEADER_SERVER = "X-RVC-Server"
HEADER_TIMESTAMP = "X-RVC-Timestamp"
HEADER_SIGNATURE = "X-RVC-Signature"
SIGNATURE_PREFIX = "sha256="
DEFAULT_MAX_SKEW_S = 300


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """Return ``hex(HMAC_SHA256(secret, f"{timestamp}.".encode() + body))``."""
    message = f"{timestamp}.".encode() + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signed_headers(server: str, secret: str, body: bytes, timestamp: int) -> dict[str, str]:
    """Return the three ``X-RVC-*`` headers (plus Content-Type) for one attempt at ``body``."""
    return {
        "Content-Type": "application/json",
        HEADER_SERVER: server,
        HEADER_TIMESTAMP: str(timestamp),
        HEADER_SIGNATURE: SIGNATURE_PREFIX + sign(secret, timestamp, body),
    }


def check(
    secret: str,
    timestamp: int | str,
    body: bytes,
    signature_header: str,
    *,
    max_skew_s: int = DEFAULT_MAX_SKEW_S,
    now_s: float | None = None,
) -> None:
    """Verify one signed body, raising :class:`SignatureError` with the reason if it fails.

    Args:
        secret: the server's shared secret.
        timestamp: the ``X-RVC-Timestamp`` value (int, or the raw header string).
        body: the raw request body, byte for byte as received.
        signature_header: the ``X-RVC-Signature`` value, ``sha256=<64 hex>``.
        max_skew_s: how far the timestamp may be from ``now_s``, either side.
        now_s: the receiver's clock in unix seconds; ``time.time()`` when None.

    Raises:
        SignatureError: ``reason`` is one of ``malformed_timestamp``, ``stale_timestamp``,
            ``future_timestamp``, ``malformed_signature``, ``bad_signature``.
    """
    try:
        ts = int(timestamp)
    except (TypeError, ValueError):
        raise SignatureError(
            "malformed_timestamp",
            f"X-RVC-Timestamp {str(timestamp)[:40]!r} is not unix seconds (an integer).",
        ) from None
    now = time.time() if now_s is None else now_s
    if ts < now - max_skew_s:
        raise SignatureError(
            "stale_timestamp",
            f"X-RVC-Timestamp {ts} is {now - ts:.0f} s old; at most {max_skew_s} s is accepted.",
        )
    if ts > now + max_skew_s:
        raise SignatureError(
            "future_timestamp",
            f"X-RVC-Timestamp {ts} is {ts - now:.0f} s in the future; "
            f"at most {max_skew_s} s is accepted.",
        )
    if not isinstance(signature_header, str) or not signature_header.startswith(SIGNATURE_PREFIX):
        raise SignatureError(
            "malformed_signature",
            f"X-RVC-Signature must look like 'sha256=<64 hex digits>', "
            f"got {str(signature_header)[:80]!r}.",
        )
    given = signature_header[len(SIGNATURE_PREFIX) :]
    if len(given) != 64 or any(c not in "0123456789abcdefABCDEF" for c in given):
        raise SignatureError(
            "malformed_signature",
            f"X-RVC-Signature must look like 'sha256=<64 hex digits>', "
            f"got {signature_header[:80]!r}.",
        )
    expected = sign(secret, ts, body)
    if not hmac.compare_digest(expected, given.lower()):
        raise SignatureError(
            "bad_signature",
            "X-RVC-Signature does not match the body and timestamp for this server's secret.",
        )


def verify(
    secret: str,
    timestamp: int | str,
    body: bytes,
    signature_header: str,
    *,
    max_skew_s: int = DEFAULT_MAX_SKEW_S,
    now_s: float | None = None,
) -> bool:
    """Return True if ``signature_header`` signs ``body`` at ``timestamp`` within the skew.

    Constant-time compare (``hmac.compare_digest``) plus the timestamp skew check; see
    :func:`check` for the variant that says why a body was rejected.
    """
    try:
        check(secret, timestamp, body, signature_header, max_skew_s=max_skew_s, now_s=now_s)
    except SignatureError:
        return False
    return True
