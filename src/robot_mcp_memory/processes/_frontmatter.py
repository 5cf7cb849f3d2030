"""Process documents as text: ``---``, YAML frontmatter, ``---``, a markdown body (spec §3).

The wire format of :class:`~robot_mcp_memory.processes._model.ProcessDoc`: :func:`split_document`
checks a text's size, fences and frontmatter and returns the raw fields and the body, for
the model to validate; :func:`render_document` writes a document's fields back. Every
check here happens *before* a YAML parser or a validator sees the text: the size
(:data:`~robot_mcp_memory._limits.MAX_DOC_BYTES`), lone surrogates, and the nesting depth
(:func:`check_nesting`, so PyYAML's recursive composer only ever sees a shallow document).

Pure functions; thread-safe. Errors are :class:`~robot_mcp_memory.processes._model.DocError`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from datetime import date, datetime
from typing import Any

import yaml

from robot_mcp_kit.models import format_ts
from robot_mcp_memory._exceptions import (
    DocError,
    DocTooLarge,
)
from robot_mcp_memory._limits import (
    MAX_DOC_BYTES,
    MAX_YAML_DEPTH,
    MAX_YAML_INDENT,
)

__all__ = [
    "FIELDS",
    "REQUIRED",
    "check_nesting",
    "render_document",
    "short",
    "split_document",
    "type_name",
]

FIELDS: tuple[str, ...] = (
    "id",
    "title",
    "task_pattern",
    "tags",
    "robot",
    "created",
    "updated",
    "success_count",
    "failure_count",
    "last_used",
    "source_mission_id",
    "shared",
)
"""The frontmatter fields, in the order :meth:`ProcessDoc.render` writes them."""

REQUIRED = ("id", "title")
"""The fields a document's frontmatter must have."""

_FENCE = re.compile(r"^---[ \t]*$", re.MULTILINE)


def type_name(value: Any) -> str:
    """The YAML name of ``value``'s type, for a message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "mapping"
    if isinstance(value, datetime | date):
        return "timestamp"
    return type(value).__name__


def short(value: Any) -> str:
    """``repr(value)`` cut to 60 characters (a huge integer described), for a message."""
    if isinstance(value, int) and value.bit_length() > 200:
        # repr() of a huge int is slow, and refused past 4300 digits: describe it instead.
        return f"an integer of about {int(value.bit_length() * 0.30103)} digits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def split_document(text: str) -> tuple[dict[str, Any], str]:
    """``(frontmatter fields, body)`` of a document's text, unvalidated beyond the format.

    Checks, in order: text, size (before anything is parsed), lone surrogates, the two
    fences, nesting depth, YAML syntax, a mapping, only :data:`FIELDS`, the
    :data:`REQUIRED` ones present.

    Raises:
        DocTooLarge: the text exceeds :data:`~robot_mcp_memory._limits.MAX_DOC_BYTES`.
        DocError: any other format error, naming the field.
    """
    if not isinstance(text, str):
        raise DocError("document", "wrong_type", f"a document must be text, got {type_name(text)}")
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_DOC_BYTES:
        raise DocTooLarge(size)
    _refuse_surrogates(text)
    text = text.replace("\r\n", "\n").replace("\r", "\n").removeprefix("\ufeff")
    stripped = text.lstrip("\n")
    skipped_lines = len(text) - len(stripped)
    opening = _FENCE.match(stripped)
    if opening is None:
        raise DocError(
            "frontmatter",
            "no_fences",
            "the document must start with a '---' line, then the YAML frontmatter, then "
            "another '---' line, then the markdown body",
        )
    closing = _FENCE.search(stripped, opening.end() + 1)
    if closing is None or opening.end() == len(stripped):
        raise DocError(
            "frontmatter",
            "no_fences",
            "the frontmatter has no closing '---' line; put one between the YAML fields "
            "and the markdown body",
        )
    fm_text = stripped[opening.end() + 1 : closing.start()]
    body = stripped[closing.end() + 1 :]
    check_nesting(fm_text, skipped_lines)
    try:
        loaded = yaml.safe_load(fm_text)
    except (ValueError, RecursionError) as exc:
        # ValueError: an integer past Python's 4300-digit conversion limit. RecursionError
        # cannot happen after check_nesting; kept so a parser change cannot leak one.
        what = "nesting too deep" if isinstance(exc, RecursionError) else "a number too long"
        raise DocError(
            "frontmatter",
            "invalid_value",
            f"the frontmatter holds a value this format cannot store ({what})",
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        where = ""
        if mark is not None:
            # +2: the opening fence is line 1 and marks count from 0.
            where = f" at line {mark.line + 2 + skipped_lines}, column {mark.column + 1}"
        raise DocError(
            "frontmatter", "yaml_syntax", f"the frontmatter is not valid YAML{where}: {problem}"
        ) from None
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        raise DocError(
            "frontmatter",
            "not_mapping",
            f"the frontmatter must be a mapping of fields (id: ..., title: ...), "
            f"got a {type_name(loaded)}",
        )
    for key in loaded:
        if not isinstance(key, str) or key not in FIELDS:
            raise DocError(
                str(key),
                "unknown_field",
                f"unknown frontmatter field {str(key)!r}; the fields are {', '.join(FIELDS)}",
            )
    for key in REQUIRED:
        if key not in loaded:
            raise DocError(key, "missing", f"the frontmatter has no {key!r}; it is required")
    return loaded, body


def render_document(values: Mapping[str, Any], body: str) -> str:
    """``---``, the frontmatter in :data:`FIELDS` order, ``---``, a blank line, the body.

    ``None`` values are omitted, as is ``shared`` when false. Deterministic.
    """
    lines = ["---"]
    for name in FIELDS:
        value = values.get(name)
        if value is None or (name == "shared" and not value):
            continue
        lines.append(f"{name}: {_yaml_value(value)}")
    lines.append("---")
    return "\n".join(lines) + "\n\n" + body


def _refuse_surrogates(text: str) -> None:
    """Refuse a lone UTF-16 surrogate (valid in a JSON string, not storable as UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise DocError(
            "document",
            "invalid_value",
            f"the document contains a lone surrogate code point at character {exc.start}; "
            "send valid Unicode text",
        ) from None


_INDENT = re.compile(r"[ \t]*")
_BLOCK_INDICATORS = re.compile(r"(?:[-?:][ \t]+)*")


def check_nesting(fm_text: str, skipped_lines: int) -> None:
    """Refuse frontmatter nested deeper than :data:`MAX_YAML_DEPTH`, before YAML sees it.

    PyYAML's composer recurses once per level: 20 KB of ``[[[[…`` costs about a second of
    CPU and ends in ``RecursionError``. This linear scan bounds the three ways YAML nests —
    flow brackets (outside quotes), block indicators at the start of a line (``- - - x``)
    and indentation — so the parser only ever sees a shallow document. Conservative: it
    may refuse a bracket inside a plain scalar that YAML would read as text, which no
    real frontmatter has.
    """
    for number, line in enumerate(fm_text.split("\n"), start=2 + skipped_lines):
        indent = _INDENT.match(line)
        width = indent.end() if indent else 0
        if width > MAX_YAML_INDENT:
            raise _too_deep(number, f"it is indented {width} characters")
        lead = _BLOCK_INDICATORS.match(line, width)
        indicators = sum(1 for c in lead.group() if c in "-?:") if lead else 0
        if indicators > MAX_YAML_DEPTH:
            raise _too_deep(number, f"it opens {indicators} nested block entries")
    depth = 0
    quote = ""
    for char in fm_text:
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in "[{":
            depth += 1
            if depth > MAX_YAML_DEPTH:
                raise _too_deep(None, f"its brackets nest more than {MAX_YAML_DEPTH} deep")
        elif char in "]}":
            depth = max(0, depth - 1)
        elif char == "\n":
            quote = ""  # flow scalars in frontmatter are single-line; never carry a quote on


def _too_deep(line: int | None, why: str) -> DocError:
    where = f" at line {line}" if line is not None else ""
    return DocError(
        "frontmatter",
        "too_deep",
        f"the frontmatter is nested too deeply{where}: {why}; "
        f"at most {MAX_YAML_DEPTH} levels of lists and mappings are accepted",
    )


def _yaml_value(value: Any) -> str:
    if isinstance(value, datetime):
        return format_ts(value)
    if isinstance(value, list):
        return _yaml_dump(tuple(value))
    return _yaml_dump(value)


@functools.lru_cache(maxsize=8192, typed=True)  # typed: True and 1 must not share
def _yaml_dump(value: Any) -> str:
    # Memoized: yaml.safe_dump costs ~30 µs a value and every search result renders its
    # frontmatter again; the same titles, tags and robots recur from call to call.
    if isinstance(value, tuple):
        value = list(value)
    dumped = yaml.safe_dump(
        value, default_flow_style=True, allow_unicode=True, width=2**31 - 1, sort_keys=False
    )
    # A scalar dumps as "value\n...\n" (with an explicit document end); a list as "[a, b]\n".
    return dumped.removesuffix("\n").removesuffix("\n...").rstrip("\n")
