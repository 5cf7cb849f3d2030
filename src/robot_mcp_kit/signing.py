"""HMAC signing of event bodies (kit spec §3.1, §4.3), shared by the poster and receivers.

The signature covers ``f"{timestamp}.".encode() + body`` with HMAC-SHA256 keyed by the
server's secret, and travels as ``X-RVC-Signature: sha256=<hex>`` next to
``X-RVC-Timestamp: <unix seconds>`` and ``X-RVC-Server: <name>``. A receiver accepts a
timestamp within ``max_skew_s`` (300 s) of its own clock, either side.

The timestamp header is canonical decimal unix seconds: ``0`` or 1 to 12 ASCII digits
without a leading zero (:data:`TIMESTAMP_PATTERN`). Anything else (a sign, leading zeros,
underscores, spaces, non-ASCII digits, a 300-digit number) is ``malformed_timestamp``,
so exactly one header string signs a given second (issue 9, finding 6).

Standard Webhooks (issue 14, opt-in per poster): beside the ``X-RVC-*`` headers, a poster
built with ``standard_webhooks=True`` sends ``webhook-id`` (the ``event_id``),
``webhook-timestamp`` (the same unix seconds) and ``webhook-signature: v1,<base64
HMAC-SHA256 of "{id}.{timestamp}.{body}">`` keyed by the same secret's UTF-8 bytes, so a
receiver verifies with any Standard Webhooks library, configured with
:func:`standard_webhooks_secret` (``whsec_`` + base64 of the secret).

Secret rotation: every check here takes the secret or a list of the secrets currently
valid for a server, and passes when any of them matches. A sender given several secrets
signs ``X-RVC-Signature`` with the first and puts one ``v1,`` signature per secret in
``webhook-signature``.

Nothing here needs the network or the ``mcp`` extra.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import time
from collections.abc import Sequence
from enum import StrEnum

from robot_mcp_kit._exceptions import SignatureError

__all__ = [
    "DEFAULT_MAX_SKEW_S",
    "HEADER_SERVER",
    "HEADER_SIGNATURE",
    "HEADER_TIMESTAMP",
    "HEADER_WEBHOOK_ID",
    "HEADER_WEBHOOK_SIGNATURE",
    "HEADER_WEBHOOK_TIMESTAMP",
    "SIGNATURE_PREFIX",
    "TIMESTAMP_PATTERN",
    "Secrets",
    "SignatureReason",
    "check",
    "check_standard",
    "sign",
    "sign_standard",
    "signed_headers",
    "standard_headers",
    "standard_webhooks_secret",
    "verify",
    "verify_standard",
]


class SignatureReason(StrEnum):
    """Why a receiver refused a delivery's headers: the ``error`` code of its answer.

    The one list of the codes: :func:`check` / :func:`check_standard` raise
    :class:`SignatureError` with the ones they decide (``reason`` is a member), a receiver
    (``fake_rvc``) answers 401 (400 for the two header codes) with any of them, and the
    conformance suite reads them back. Each member is its wire string.

    .. versionadded:: 0.1.0
    """

    # Decided by the receiver before any check here (fake_rvc: 400 before the 401s).
    INVALID_HEADER = "invalid_header"  # an X-RVC-* value with control or non-ASCII characters
    DUPLICATE_HEADER = "duplicate_header"  # an X-RVC-* header sent twice
    # Decided by the receiver from its configuration and the headers present (401).
    UNKNOWN_SERVER = "unknown_server"  # X-RVC-Server missing or naming no configured secret
    MISSING_TIMESTAMP = "missing_timestamp"  # no X-RVC-Timestamp header
    MISSING_SIGNATURE = "missing_signature"  # no X-RVC-Signature header
    MISSING_WEBHOOK_HEADERS = "missing_webhook_headers"  # a webhook-* header missing
    # Decided by check() / check_standard() (401).
    MALFORMED_TIMESTAMP = "malformed_timestamp"  # not canonical unix seconds (1-12 digits)
    STALE_TIMESTAMP = "stale_timestamp"  # older than the skew allows (300 s)
    FUTURE_TIMESTAMP = "future_timestamp"  # further ahead than the skew allows (300 s)
    MALFORMED_SIGNATURE = "malformed_signature"  # not 'sha256=<64 hex>' (or 'v1,<base64>')
    BAD_SIGNATURE = "bad_signature"  # well formed, but no secret of the server made it
    # The receiver's secret is not UTF-8-encodable text.
    UNUSABLE_SECRET = "unusable_secret"  # noqa: S105 - a reason code, not a secret
    MALFORMED_WEBHOOK_ID = "malformed_webhook_id"  # webhook-id not 1-200 printable ASCII


Secrets = str | Sequence[str]
"""One secret, or the secrets currently valid for a server (rotation)."""

HEADER_SERVER = "X-RVC-Server"
HEADER_TIMESTAMP = "X-RVC-Timestamp"
HEADER_SIGNATURE = "X-RVC-Signature"
SIGNATURE_PREFIX = "sha256="
DEFAULT_MAX_SKEW_S = 300
HEADER_WEBHOOK_ID = "webhook-id"
HEADER_WEBHOOK_TIMESTAMP = "webhook-timestamp"
HEADER_WEBHOOK_SIGNATURE = "webhook-signature"

TIMESTAMP_PATTERN = re.compile(r"0|[1-9][0-9]{0,11}")
"""What an ``X-RVC-Timestamp`` header must fully match: canonical unix seconds, at most
12 digits (year 33658). ``[0-9]`` is ASCII only, and the match is a ``fullmatch``."""

_MAX_TIMESTAMP = 10**12 - 1
_SIGNATURE = re.compile(r"sha256=[0-9a-fA-F]{64}")
_STANDARD_SIGNATURES = re.compile(
    r"v[0-9]+,[A-Za-z0-9+/=]{1,200}( v[0-9]+,[A-Za-z0-9+/=]{1,200}){0,31}"
)
_WEBHOOK_ID = re.compile(r"[\x21-\x7e]{1,200}")


def _secret_list(secret: object) -> tuple[object, ...]:
    """The secrets to try: one ``str``, or each item of a list or tuple of them."""
    if isinstance(secret, list | tuple):
        return tuple(secret)
    return (secret,)


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
    secret: Secrets,
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
        secret: the server's shared secret, or the list of its current secrets (any one
            may match; rotation).
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
            SignatureReason.STALE_TIMESTAMP,
            f"X-RVC-Timestamp {ts} is {now - ts:.0f} s old; at most {max_skew_s} s is accepted.",
        )
    if ts > now + max_skew_s:
        raise SignatureError(
            SignatureReason.FUTURE_TIMESTAMP,
            f"X-RVC-Timestamp {ts} is {ts - now:.0f} s in the future; "
            f"at most {max_skew_s} s is accepted.",
        )
    if not isinstance(signature_header, str) or not _SIGNATURE.fullmatch(signature_header):
        shown = repr(signature_header[:80]) if isinstance(signature_header, str) else "no text"
        raise SignatureError(
            SignatureReason.MALFORMED_SIGNATURE,
            f"X-RVC-Signature must look like 'sha256=<64 hex digits>', got {shown}.",
        )
    given = signature_header[len(SIGNATURE_PREFIX) :].lower()
    usable = False
    for key in _secret_list(secret):
        try:
            expected = sign(key, ts, body)  # type: ignore[arg-type]
        except (AttributeError, TypeError, UnicodeEncodeError):  # not a str, lone surrogates
            continue
        usable = True
        if hmac.compare_digest(expected, given):
            return
    if not usable:
        raise SignatureError(
            SignatureReason.UNUSABLE_SECRET,
            "The receiver's secret for this server is not text that encodes as UTF-8.",
        )
    raise SignatureError(
        SignatureReason.BAD_SIGNATURE,
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
        SignatureReason.MALFORMED_TIMESTAMP,
        f"X-RVC-Timestamp must be unix seconds as 1 to 12 ASCII digits without a leading "
        f"zero, got {shown}.",
    )


def verify(
    secret: Secrets,
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


# -- Standard Webhooks (issue 14) ------------------------------------------------------------


def standard_webhooks_secret(secret: str) -> str:
    """The secret as a Standard Webhooks library takes it: ``whsec_`` + base64(UTF-8).

    E.g. ``standardwebhooks.Webhook(standard_webhooks_secret(s))`` verifies what a poster
    with secret ``s`` and ``standard_webhooks=True`` sends..
    """
    return "whsec_" + base64.b64encode(secret.encode()).decode()


def sign_standard(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """Return ``v1,<base64 HMAC-SHA256(secret, f"{msg_id}.{timestamp}.".encode() + body)>``."""
    message = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret.encode(), message, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def standard_headers(msg_id: str, secrets: Secrets, body: bytes, timestamp: int) -> dict[str, str]:
    """The three Standard Webhooks headers, one ``v1`` signature per secret.."""
    keys = [secrets] if isinstance(secrets, str) else list(secrets)
    return {
        HEADER_WEBHOOK_ID: msg_id,
        HEADER_WEBHOOK_TIMESTAMP: str(timestamp),
        HEADER_WEBHOOK_SIGNATURE: " ".join(sign_standard(k, msg_id, timestamp, body) for k in keys),
    }


def check_standard(
    secret: Secrets,
    msg_id: str,
    timestamp: int | str,
    body: bytes,
    signature_header: str,
    *,
    max_skew_s: int = DEFAULT_MAX_SKEW_S,
    now_s: float | None = None,
) -> None:
    """Verify Standard Webhooks headers, raising :class:`SignatureError` if they fail.

    Passes when any ``v1`` signature in ``signature_header`` matches any of the secrets.
    Reasons: those of :func:`check` (the timestamp rules are the same), plus
    ``malformed_webhook_id``. Raises nothing else, whatever the header values. Added in
    0.2.0 (the kit's own receivers; other receivers use a Standard Webhooks library).
    """
    if not isinstance(msg_id, str) or not _WEBHOOK_ID.fullmatch(msg_id):
        raise SignatureError(
            SignatureReason.MALFORMED_WEBHOOK_ID,
            "webhook-id must be 1 to 200 printable ASCII characters.",
        )
    ts = _parse_timestamp(timestamp)
    now = time.time() if now_s is None else now_s
    if ts < now - max_skew_s:
        raise SignatureError(SignatureReason.STALE_TIMESTAMP, f"webhook-timestamp {ts} is too old.")
    if ts > now + max_skew_s:
        raise SignatureError(
            SignatureReason.FUTURE_TIMESTAMP, f"webhook-timestamp {ts} is in the future."
        )
    if not isinstance(signature_header, str) or not _STANDARD_SIGNATURES.fullmatch(
        signature_header
    ):
        raise SignatureError(
            SignatureReason.MALFORMED_SIGNATURE,
            "webhook-signature must be space-separated 'v1,<base64>' signatures.",
        )
    given = [part[3:].encode() for part in signature_header.split(" ") if part.startswith("v1,")]
    usable = False
    for key in _secret_list(secret):
        try:
            expected = sign_standard(key, msg_id, ts, body)[3:].encode()  # type: ignore[arg-type]
        except (AttributeError, TypeError, UnicodeEncodeError):
            continue
        usable = True
        if any(hmac.compare_digest(expected, g) for g in given):
            return
    if not usable:
        raise SignatureError(
            SignatureReason.UNUSABLE_SECRET,
            "The receiver's secret for this server is not text that encodes as UTF-8.",
        )
    raise SignatureError(
        SignatureReason.BAD_SIGNATURE,
        "No webhook-signature matches the id, timestamp and body for this server's secrets.",
    )


def verify_standard(
    secret: Secrets,
    msg_id: str,
    timestamp: int | str,
    body: bytes,
    signature_header: str,
    *,
    max_skew_s: int = DEFAULT_MAX_SKEW_S,
    now_s: float | None = None,
) -> bool:
    """:func:`check_standard` as a bool; never raises.."""
    try:
        check_standard(
            secret, msg_id, timestamp, body, signature_header, max_skew_s=max_skew_s, now_s=now_s
        )
    except SignatureError:
        return False
    return True
