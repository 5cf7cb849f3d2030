"""Reading untrusted bodies without trusting them: nesting depth, a peek, error words.

Nothing here raises on a hostile body: a body too deep or not JSON peeks as nothing, and
validation errors are described by field path and pydantic's error *type* only (never
pydantic's message, its documentation URL or the value sent).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["body_server", "describe_errors", "json_depth", "peek", "reject_constant"]

_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_JSON_BRACKET = re.compile(rb"[\[\]{}]")


def json_depth(body: bytes) -> int:
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


def reject_constant(name: str) -> None:
    """``json.loads(parse_constant=...)``: refuse NaN and Infinity."""
    raise ValueError(f"{name} is not valid JSON")


def _loads_shallow(body: bytes, max_depth: int) -> Any:
    """``json.loads(body)`` when it nests at most ``max_depth`` and parses, else None."""
    try:
        if json_depth(body) > max_depth:
            return None
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def peek(body: bytes, max_depth: int) -> dict[str, Any]:
    """Best-effort event_id/task_id/seq/type from an unverified body, for the attempt log."""
    obj = _loads_shallow(body, max_depth)
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


def body_server(body: bytes, max_depth: int) -> str | None:
    """The body's ``server`` (names the server of a Standard Webhooks post), or None."""
    obj = _loads_shallow(body, max_depth)
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


def describe_errors(errors: Iterable[Mapping[str, Any]], what: str) -> str:
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
