"""Argument checks of the fleet registry and the lesson store, and the error they raise.

Every argument a tool passes to :class:`~robot_mcp_memory.fleet.FleetService` or
:class:`~robot_mcp_memory.params.ScopedParams` goes through one of these functions; each
returns the checked value or raises :class:`FleetError` with code ``invalid``, the
argument's name in ``field`` and one sentence that quotes the bad value (shortened and
safely rendered: a 10 000-digit integer is "an integer of N bits") and says what is valid.
None of them raises anything else, whatever it is given: JSON objects are walked
iteratively — depth and types first — before they are serialised, so hostile nesting,
NaN, integers beyond 64 bits, non-string keys or lone surrogates are all ``invalid``,
never a RecursionError, OverflowError or TypeError.

``FleetError`` lives in :mod:`robot_mcp_memory._exceptions`; :mod:`robot_mcp_memory.fleet`
re-exports it (its home in the API).
Pure functions; thread-safe. The limits are :mod:`robot_mcp_memory._limits`'.
"""

from __future__ import annotations

import json
import math
import unicodedata

from robot_mcp_memory._exceptions import (
    FleetError,
)
from robot_mcp_memory._limits import (
    ID_PATTERN,
    MAX_JSON_BYTES,
    MAX_JSON_DEPTH,
    MAX_LABEL_CHARS,
)

__all__ = ["check_bool", "check_id", "check_json_object", "check_label", "show"]


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def show(value: object) -> str:
    """A short, safe rendering of a bad value for a message (never raises)."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        if value.bit_length() > 64:
            return f"an integer of {value.bit_length()} bits"
        return repr(int(value))
    if isinstance(value, str):
        return repr(value) if len(value) <= 60 else repr(value[:60]) + "…"
    if isinstance(value, float):
        return repr(float(value))
    if isinstance(value, bytes | bytearray):
        return f"{len(value)} bytes of binary data"
    name = type(value).__name__
    article = "an" if name[:1].lower() in "aeiou" else "a"
    if isinstance(value, dict | list | tuple | set | frozenset):
        n = len(value)
        return f"{article} {name} of {n} item{'' if n == 1 else 's'}"
    return f"{article} {name}"


def _invalid(field: str, detail: str) -> FleetError:
    return FleetError("invalid", detail, field=field)


def check_id(value: object, field: str) -> str:
    """``value`` if it is a valid robot/group id (:data:`ID_PATTERN`), else FleetError invalid."""
    if not isinstance(value, str):
        raise _invalid(field, f"{field} must be a string such as 'rap-1', got {show(value)}")
    if ID_PATTERN.fullmatch(value) is None:
        raise _invalid(
            field,
            f"{field} {show(value)} is not a valid id: 1 to 64 characters, letters, digits, "
            "'.', '_' or '-', starting with a letter or a digit",
        )
    return value


def _one_line(value: str) -> bool:
    return not any(unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp") for c in value)


def check_label(value: object, field: str) -> str | None:
    """A valid name/customer/factory: one line, no control characters, at most 200 chars.

    Returns the text, or None for ``""`` (an empty label clears the field). Raises
    FleetError invalid otherwise.
    """
    if not isinstance(value, str):
        raise _invalid(field, f"{field} must be a string, got {show(value)}")
    if len(value) > MAX_LABEL_CHARS:
        raise _invalid(
            field,
            f"{field} is {len(value)} characters long; at most {MAX_LABEL_CHARS} are allowed",
        )
    if not _one_line(value):
        raise _invalid(field, f"{field} {show(value)} must be one line without control characters")
    return value or None


def check_json_object(value: object, field: str, *, max_bytes: int = MAX_JSON_BYTES) -> str:
    """Validate a JSON object and return it serialised (compact UTF-8 JSON text).

    A dict with string keys whose values are JSON values: objects, arrays, strings,
    finite floats, 64-bit integers, booleans, null; nested at most :data:`MAX_JSON_DEPTH`
    deep; at most ``max_bytes`` serialised. The depth and the types are checked by an
    iterative walk before anything is serialised, so hostile nesting never reaches a
    recursive encoder. Raises FleetError invalid (``field``) for anything else.
    """
    if not isinstance(value, dict):
        raise _invalid(
            field, f"{field} must be a JSON object (a dict with string keys), got {show(value)}"
        )
    too_big = _invalid(field, f"{field} is larger than {max_bytes} bytes as JSON")
    stack: list[tuple[object, int]] = [(value, 1)]
    approx = 0  # a lower bound of the serialised size
    while stack:
        node, depth = stack.pop()
        approx += 1
        if isinstance(node, str):
            approx += len(node)
        elif isinstance(node, dict | list | tuple):
            if depth > MAX_JSON_DEPTH:
                raise _invalid(
                    field,
                    f"{field} is nested deeper than {MAX_JSON_DEPTH} levels of objects/arrays",
                )
            if len(node) > max_bytes:
                raise too_big
            if isinstance(node, dict):
                for key, item in node.items():
                    if not isinstance(key, str):
                        raise _invalid(
                            field,
                            f"{field} has the key {show(key)}, which is not a string "
                            "(JSON object keys are strings)",
                        )
                    approx += len(key) + 1
                    stack.append((item, depth + 1))
            else:
                stack.extend((item, depth + 1) for item in node)
        elif node is None or isinstance(node, bool):
            pass
        elif isinstance(node, int):
            if not _INT64_MIN <= node <= _INT64_MAX:
                raise _invalid(
                    field,
                    f"{field} holds {show(node)}; integers must fit in 64 bits (-2**63 to 2**63-1)",
                )
        elif isinstance(node, float):
            if not math.isfinite(node):
                raise _invalid(
                    field, f"{field} holds {node!r}, which JSON cannot carry (finite numbers only)"
                )
        else:
            raise _invalid(
                field,
                f"{field} holds {show(node)}, which is not a JSON value (object, array, "
                "string, number, true/false or null)",
            )
        if approx > max_bytes:
            raise too_big
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise _invalid(
            field, f"{field} holds text that is not valid Unicode (a lone surrogate)"
        ) from None
    except (TypeError, ValueError, RecursionError):  # pragma: no cover - the walk prevents it
        raise _invalid(field, f"{field} is not serialisable as a JSON object") from None
    if size > max_bytes:
        raise _invalid(field, f"{field} is {size} bytes as JSON; at most {max_bytes} are allowed")
    return text


def check_bool(value: object, field: str) -> bool:
    if not isinstance(value, bool):
        raise _invalid(field, f"{field} must be true or false, got {show(value)}")
    return value
