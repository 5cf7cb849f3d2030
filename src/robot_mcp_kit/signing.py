"""HMAC signing of event bodies (kit spec §3.1, §4.3), shared by the poster and receivers.

The signature covers ``f"{timestamp}.".encode() + body`` with HMAC-SHA256 keyed by the
server's secret, and travels as ``X-RVC-Signature: sha256=<hex>`` next to
``X-RVC-Timestamp: <unix seconds>`` and ``X-RVC-Server: <name>``. A receiver accepts a
timestamp within ``max_skew_s`` (300 s) of its own clock, either side.

The timestamp header is canonical decimal unix seconds: ``0`` or 1 to 12 ASCII digits
without a leading zero (:data:`TIMESTAMP_PATTERN`). Anything else (a sign, leading zeros,
underscores, spaces, non-ASCII digits, a 300-digit number) is ``malformed_timestamp``,
so exactly one header string signs a given second (issue 9, finding 6).

Nothing here needs the network or the ``mcp`` extra.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time

from robot_mcp_kit._exceptions import SignatureError

__all__ = [
    "DEFAULT_MAX_SKEW_S",
    "HEADER_SERVER",
    "HEADER_SIGNATURE",
    "HEADER_TIMESTAMP",
    "SIGNATURE_PREFIX",
    "TIMESTAMP_PATTERN",
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

TIMESTAMP_PATTERN = re.compile(r"0|[1-9][0-9]{0,11}")
"""What an ``X-RVC-Timestamp`` header must fully match: canonical unix seconds, at most
12 digits (year 33658). ``[0-9]`` is ASCII only, and the match is a ``fullmatch``."""

_MAX_TIMESTAMP = 10**12 - 1
_SIGNATURE = re.compile(r"sha256=[0-9a-fA-F]{64}")


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

    The two header values may be anything a client sent (any ``str``, or any object):
    for every value of them, and any ``str`` secret, ``check`` raises
    :class:`SignatureError` and nothing else.

    Args:
        secret: the server's shared secret.
        timestamp: the ``X-RVC-Timestamp`` value: the raw header string, which must
            fully match :data:`TIMESTAMP_PATTERN`, or an ``int`` from 0 to 10**12 - 1.
        body: the raw request body, byte for byte as received.
        signature_header: the ``X-RVC-Signature`` value, ``sha256=<64 hex>``.
        max_skew_s: how far the timestamp may be from ``now_s``, either side.
        now_s: the receiver's clock in unix seconds; ``time.time()`` when None.

    Raises:
        SignatureError: ``reason`` is one of ``malformed_timestamp``, ``stale_timestamp``,
            ``future_timestamp``, ``malformed_signature``, ``bad_signature``, or
            ``unusable_secret`` (the secret is not text that encodes as UTF-8).
    """
    ts = _parse_timestamp(timestamp)
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
    if not isinstance(signature_header, str) or not _SIGNATURE.fullmatch(signature_header):
        shown = repr(signature_header[:80]) if isinstance(signature_header, str) else "no text"
        raise SignatureError(
            "malformed_signature",
            f"X-RVC-Signature must look like 'sha256=<64 hex digits>', got {shown}.",
        )
    given = signature_header[len(SIGNATURE_PREFIX) :]
    try:
        expected = sign(secret, ts, body)
    except (AttributeError, UnicodeEncodeError):  # not a str, or lone surrogates
        raise SignatureError(
            "unusable_secret",
            "The receiver's secret for this server is not text that encodes as UTF-8.",
        ) from None
    if not hmac.compare_digest(expected, given.lower()):
        raise SignatureError(
            "bad_signature",
            "X-RVC-Signature does not match the body and timestamp for this server's secret.",
        )


def _parse_timestamp(timestamp: object) -> int:
    """Return the unix seconds of an ``X-RVC-Timestamp`` value, or raise SignatureError."""
    if isinstance(timestamp, int) and not isinstance(timestamp, bool):
        if 0 <= timestamp <= _MAX_TIMESTAMP:
            return timestamp
        shown = "a negative integer" if timestamp < 0 else "an integer of more than 12 digits"
    elif isinstance(timestamp, str):
        if TIMESTAMP_PATTERN.fullmatch(timestamp):
            return int(timestamp)
        shown = repr(timestamp[:40])
        if len(timestamp) > 40:
            shown += f" ({len(timestamp)} characters)"
    else:
        shown = f"a {type(timestamp).__name__}"
    raise SignatureError(
        "malformed_timestamp",
        f"X-RVC-Timestamp must be unix seconds as 1 to 12 ASCII digits without a leading "
        f"zero, got {shown}.",
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
    :func:`check` for the variant that says why a body was rejected. Returns False, and
    never raises, for any header values and any ``str`` secret.
    """
    try:
        check(secret, timestamp, body, signature_header, max_skew_s=max_skew_s, now_s=now_s)
    except SignatureError:
        return False
    return True
