"""What a task may put into an event or its record: one JSON document within the limits.

Everything an author's code hands the kit (``ctx.progress``, ``ctx.emit``,
``ctx.fire_trigger`` and its extras, a body's result, the triggers given to ``start``) is
checked where it enters by :func:`json_payload`, which answers a JSON-safe deep copy or
raises :class:`~robot_mcp_kit.InvalidPayload` naming the key path and the reason. Nothing
stored is then anything but plain JSON, so ``get_task``, ``list_tasks`` and the poster can
always serialize what they hold.

A JSON value here is ``None``, ``bool``, ``int``, a finite ``float``, a ``str`` that
encodes as UTF-8, a ``list`` or ``tuple`` of JSON values (a tuple becomes a list), or a
``dict`` with ``str`` keys and JSON values; at most :data:`MAX_PAYLOAD_DEPTH` containers
deep, and at most ``max_bytes`` once serialized (compact UTF-8). A progress payload is
checked by :func:`progress_payload`, which also requires its ``percent``, when present, to
be a number or null: ``progress_above`` triggers compare it (contract §8.2), and a
``"75"`` would silently never fire them.
"""

from __future__ import annotations

import json
import math
from typing import Any

from robot_mcp_kit._exceptions import InvalidPayload

__all__ = ["DEFAULT_MAX_PAYLOAD_BYTES", "MAX_PAYLOAD_DEPTH", "json_payload", "progress_payload"]

MAX_PAYLOAD_DEPTH = 32
"""Containers (objects and arrays) one payload may nest, the outermost counted."""

DEFAULT_MAX_PAYLOAD_BYTES = 256 * 1024
"""The default size bound of one payload, serialized: a quarter of fake_rvc's (the brain's)
1 MiB body limit, so the event's envelope and signature headers always fit."""


def _path(path: tuple[str | int, ...]) -> str:
    out = "payload"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f"[{part!r}]"
    return out


def json_payload(value: object, what: str, *, max_bytes: int) -> dict[str, Any]:
    """A JSON-safe deep copy of the object ``value``, or :class:`InvalidPayload`.

    ``what`` names the value in the error (``"progress payload"``, ``"task result"``).
    """
    if not isinstance(value, dict):
        raise InvalidPayload(what, "payload", f"must be a dict, got {type(value).__name__}")
    copied = _copy(value, (), what, 1)
    size = len(json.dumps(copied, ensure_ascii=False, separators=(",", ":")).encode())
    if size > max_bytes:
        raise InvalidPayload(
            what, "payload", f"is {size} bytes as JSON, over the limit of {max_bytes}"
        )
    assert isinstance(copied, dict)
    return copied


def progress_payload(value: object, *, max_bytes: int) -> dict[str, Any]:
    """:func:`json_payload` for a progress payload, whose ``percent`` is a number or null.

    A bool, a string (``"75"``) or a container as ``percent`` raises
    :class:`~robot_mcp_kit.InvalidPayload` (a number in a string says which to send).
    """
    payload = json_payload(value, "progress payload", max_bytes=max_bytes)
    percent = payload.get("percent")
    if percent is None or (isinstance(percent, (int, float)) and not isinstance(percent, bool)):
        return payload
    hint = ""
    if isinstance(percent, str):
        try:
            number = float(percent)
        except ValueError:
            pass
        else:
            if math.isfinite(number):
                hint = f" (send {int(number) if number.is_integer() else number!r})"
    shown = repr(percent) if isinstance(percent, (bool, str)) else f"a {type(percent).__name__}"
    raise InvalidPayload(
        "progress payload",
        "payload['percent']",
        f"is {shown}; percent must be a number or null, which progress_above triggers "
        f"compare{hint}",
        problem="is refused",
    )


def _copy(value: object, path: tuple[str | int, ...], what: str, depth: int) -> Any:
    # bool before int: bool is an int subclass, and both are JSON as they are.
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidPayload(
                what, _path(path), f"is {value!r}; JSON has no NaN or infinity (send null)"
            )
        return value
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidPayload(
                what, _path(path), "is a string that is not valid UTF-8 (a lone surrogate)"
            ) from None
        return value
    if isinstance(value, (dict, list, tuple)):
        if depth > MAX_PAYLOAD_DEPTH:
            raise InvalidPayload(
                what, _path(path), f"nests deeper than {MAX_PAYLOAD_DEPTH} objects or arrays"
            )
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, item in value.items():
                if not isinstance(key, str):
                    raise InvalidPayload(
                        what,
                        _path(path),
                        f"has the key {key!r} ({type(key).__name__}); JSON keys are strings",
                    )
                out[_copy(key, (*path, key), what, depth)] = _copy(
                    item, (*path, key), what, depth + 1
                )
            return out
        return [_copy(item, (*path, i), what, depth + 1) for i, item in enumerate(value)]
    kind = type(value).__name__
    hint = " (decode bytes to str, or base64 them)" if isinstance(value, (bytes, bytearray)) else ""
    raise InvalidPayload(what, _path(path), f"is a {kind}, which is not JSON{hint}")
