"""Process documents: YAML frontmatter plus a markdown body (memory spec §3).

A process is one row in ``processes``; this module is its wire format. :meth:`ProcessDoc.parse`
turns markdown into a validated :class:`ProcessDoc`, :meth:`ProcessDoc.render` turns it back.
The two are inverse on rendered text::

    ProcessDoc.parse(doc.render()) == doc
    ProcessDoc.parse(text).render() == text      # for any text render() produced

Decisions this module makes (and tests):

- **Unknown frontmatter fields are rejected**, naming the field and listing the valid ones.
  Keeping them would mean storing data nobody reads and silently dropping it on render;
  a typo (``sucess_count``) would vanish without a word.
- **Types are strict**: ``title: 2024`` is an error ("quote it"), not a coercion. The two
  identifier fields ``robot`` and ``source_mission_id`` accept a bare integer as its
  string, because YAML reads ``m-1``-less ids like ``1234`` as numbers.
- Single-line fields (``id``, ``title``, ``task_pattern``, ``robot``,
  ``source_mission_id``, each tag) may not contain control characters or line breaks.
- **Timestamps** are UTC with millisecond precision and render as ``format_ts`` writes
  them (``2026-06-12T14:00:00.000Z``). Parsing accepts any ISO 8601 datetime (naive means
  UTC) or a bare date (midnight UTC), and normalises it, so a parsed document re-renders
  in canonical form.
- **The body** has its line endings normalised to ``\\n``, leading blank lines dropped and
  trailing whitespace replaced by exactly one newline. It may not be empty.
- **Size**: a document over :data:`MAX_DOC_BYTES` (256 KiB, UTF-8) is :class:`DocTooLarge`
  before any parsing happens.

Errors are :class:`DocError` with ``field`` (a frontmatter field name, or ``"frontmatter"``,
``"body"``, ``"document"``) and ``reason``, a short code the MCP layer can map:

==================  ======================================================================
``too_large``       the document exceeds 256 KiB (:class:`DocTooLarge`)
``no_fences``       no ``---`` line opening or closing the frontmatter
``yaml_syntax``     the frontmatter is not YAML (the message names the line)
``not_mapping``     the frontmatter is YAML but not a mapping of fields
``unknown_field``   a field this format does not define
``missing``         a required field (``id``, ``title``) is absent
``empty``           a field (or the body) is present but empty
``invalid_slug``    ``id`` is not a kebab-case slug
``wrong_type``      a field has the wrong YAML type
``invalid_value``   right type, bad value (negative count, control characters, ...)
``too_deep``        lists and mappings nested deeper than ``MAX_YAML_DEPTH`` (pre-parse)
==================  ======================================================================

Added in 0.1 (issue 6).
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, date, datetime, time
from typing import Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from robot_mcp_kit.models import format_ts
from robot_mcp_memory.limits import (
    MAX_COUNT,
    MAX_DOC_BYTES,
    MAX_ID_LENGTH,
    MAX_YAML_DEPTH,
    MAX_YAML_INDENT,
)

__all__ = [
    "FIELDS",
    "MAX_DOC_BYTES",
    "MAX_ID_LENGTH",
    "SLUG_PATTERN",
    "DocError",
    "DocTooLarge",
    "ProcessDoc",
]

SLUG_PATTERN = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
"""A kebab-case slug: lowercase ASCII letters and digits in groups joined by single hyphens.

Always applied with ``fullmatch``: a ``$``-anchored ``match`` accepts a trailing newline.
"""

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

_REQUIRED = ("id", "title")
_FENCE = re.compile(r"^---[ \t]*$", re.MULTILINE)
# Characters that may not appear in a single-line field: C0/C1 controls (which include
# \n, \r, \t and NEL) and the two Unicode line/paragraph separators.
_LINE_BREAKING = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


class DocError(ValueError):
    """A process document failed to parse or validate.

    Attributes:
        field: the frontmatter field at fault, or ``"frontmatter"`` / ``"body"`` /
            ``"document"`` for the document's structure.
        reason: a short code (see the module docstring), e.g. ``"invalid_slug"``.

    ``str(error)`` is a sentence naming the field, quoting the bad value and saying what
    is valid.
    """

    def __init__(self, field: str, reason: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.reason = reason

    def __repr__(self) -> str:
        return f"{type(self).__name__}(field={self.field!r}, reason={self.reason!r}, {str(self)!r})"


class DocTooLarge(DocError):
    """A document (or a query, where the store says so) exceeds its size limit."""

    def __init__(self, size: int, limit: int = MAX_DOC_BYTES, *, field: str = "document") -> None:
        super().__init__(
            field,
            "too_large",
            f"the {field} is {size} bytes; the limit is {limit} bytes ({limit // 1024} KiB)",
        )
        self.size = size
        self.limit = limit


def _type_name(value: Any) -> str:
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


def _short(value: Any) -> str:
    if isinstance(value, int) and value.bit_length() > 200:
        # repr() of a huge int is slow, and refused past 4300 digits: describe it instead.
        return f"an integer of about {int(value.bit_length() * 0.30103)} digits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _single_line(value: str, what: str) -> str:
    bad = _LINE_BREAKING.search(value)
    if bad:
        raise PydanticCustomError(
            "invalid_value",
            "{what} {value} contains the control character {char}; it must be one line "
            "of printable text",
            {"what": what, "value": _short(value), "char": repr(bad.group())},
        )
    return value


def _require_str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise PydanticCustomError(
            "wrong_type",
            "{what} must be a string, got {kind} {value} (quote it in YAML)",
            {"what": what, "kind": _type_name(value), "value": _short(value)},
        )
    return value


def _timestamp(raw: Any, what: str) -> datetime | None:
    value: Any = raw
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            value = datetime.fromisoformat(text)
        except ValueError:
            raise PydanticCustomError(
                "invalid_value",
                "{what} {value} is not an ISO 8601 timestamp like 2026-06-12T14:00:00Z",
                {"what": what, "value": _short(value)},
            ) from None
    if isinstance(value, date) and not isinstance(value, datetime):
        value = datetime.combine(value, time(), tzinfo=UTC)
    if not isinstance(value, datetime):
        raise PydanticCustomError(
            "wrong_type",
            "{what} must be a timestamp like 2026-06-12T14:00:00Z, got {kind} {value}",
            {"what": what, "kind": _type_name(value), "value": _short(value)},
        )
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    try:
        value = value.astimezone(UTC)
        in_range = 1970 <= value.year <= 9999
    except OverflowError:  # e.g. 0001-01-01 with a positive offset
        in_range = False
    if not in_range:
        # format_ts writes four-digit years; older dates are typos, not process history.
        # Quote what was sent, not a normalised form the client never wrote.
        raise PydanticCustomError(
            "invalid_value",
            "{what} {value} is out of range; use a date between 1970 and 9999",
            {"what": what, "value": _short(raw if isinstance(raw, str) else str(raw))},
        )
    # Millisecond precision: what format_ts writes is what a parse reads back.
    stamp: datetime = value.replace(microsecond=value.microsecond // 1000 * 1000)
    return stamp


def _count(value: Any, what: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise PydanticCustomError(
            "wrong_type",
            "{what} must be a non-negative integer, got {kind} {value}",
            {"what": what, "kind": _type_name(value), "value": _short(value)},
        )
    if not 0 <= value <= MAX_COUNT:
        raise PydanticCustomError(
            "invalid_value",
            "{what} must be an integer from 0 to {max}, got {value}",
            {"what": what, "value": _short(value), "max": MAX_COUNT},
        )
    return value


def _normalise_body(body: str) -> str:
    body = body.replace("\r\n", "\n").replace("\r", "\n")
    return body.lstrip("\n").rstrip() + "\n"


class ProcessDoc(BaseModel):
    """One process document: the frontmatter fields of memory spec §3, plus ``body``.

    Construct one with :meth:`parse` (from markdown) or directly (fields are validated the
    same way; a direct construction raises pydantic's ``ValidationError``, :meth:`parse`
    turns it into :class:`DocError`). Assignment is validated too.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    id: str
    title: str
    task_pattern: str = ""
    tags: list[str] = Field(default_factory=list)
    robot: str = "unknown"
    created: datetime | None = None
    updated: datetime | None = None
    success_count: int = 0
    failure_count: int = 0
    last_used: datetime | None = None
    source_mission_id: str | None = None
    shared: bool = False
    body: str

    # ---- field validation (before pydantic's own, so the messages are ours) ----

    @field_validator("id", mode="before")
    @classmethod
    def _check_id(cls, raw: Any) -> str:
        value = _require_str(raw, "id")
        if not value.strip():
            raise PydanticCustomError("empty", "id is empty; it must be a kebab-case slug")
        if len(value) > MAX_ID_LENGTH or not SLUG_PATTERN.fullmatch(value):
            raise PydanticCustomError(
                "invalid_slug",
                "id {value} is not a valid slug: use lowercase letters a-z, digits and single "
                "hyphens between them, at most {max} characters, like 'fetch-package-mailroom'",
                {"value": _short(value), "max": MAX_ID_LENGTH},
            )
        return value

    @field_validator("title", mode="before")
    @classmethod
    def _check_title(cls, value: Any) -> str:
        value = _require_str(value, "title")
        if not value.strip():
            raise PydanticCustomError("empty", "title is empty; give the process a short title")
        return _single_line(value, "title")

    @field_validator("task_pattern", mode="before")
    @classmethod
    def _check_task_pattern(cls, value: Any) -> str:
        if value is None:
            return ""
        return _single_line(_require_str(value, "task_pattern"), "task_pattern")

    @field_validator("tags", mode="before")
    @classmethod
    def _check_tags(cls, value: Any) -> list[str]:
        if value is None:
            return []
        if not isinstance(value, list | tuple):
            raise PydanticCustomError(
                "wrong_type",
                "tags must be a list of strings like [delivery, mailroom], got {kind} {value}",
                {"kind": _type_name(value), "value": _short(value)},
            )
        tags: list[str] = []
        for index, tag in enumerate(value):
            what = f"tags[{index}]"
            tag = _single_line(_require_str(tag, what), what)
            if not tag.strip():
                raise PydanticCustomError("empty", "{what} is empty", {"what": what})
            tags.append(tag)
        return tags

    @field_validator("robot", "source_mission_id", mode="before")
    @classmethod
    def _check_identifier(cls, raw: Any, info: ValidationInfo) -> str | None:
        name = str(info.field_name)
        if raw is None:
            return "unknown" if name == "robot" else None
        if isinstance(raw, int) and not isinstance(raw, bool):
            raw = str(raw)
        value = _single_line(_require_str(raw, name), name)
        if not value.strip():
            raise PydanticCustomError("empty", "{what} is empty", {"what": name})
        return value

    @field_validator("created", "updated", "last_used", mode="before")
    @classmethod
    def _check_timestamp(cls, value: Any, info: ValidationInfo) -> datetime | None:
        return _timestamp(value, str(info.field_name))

    @field_validator("success_count", "failure_count", mode="before")
    @classmethod
    def _check_count(cls, value: Any, info: ValidationInfo) -> int:
        return _count(value, str(info.field_name))

    @field_validator("shared", mode="before")
    @classmethod
    def _check_shared(cls, value: Any) -> bool:
        if value is None:
            return False
        if not isinstance(value, bool):
            raise PydanticCustomError(
                "wrong_type",
                "shared must be true or false, got {kind} {value}",
                {"kind": _type_name(value), "value": _short(value)},
            )
        return value

    @field_validator("body", mode="before")
    @classmethod
    def _check_body(cls, raw: Any) -> str:
        value = _normalise_body(_require_str(raw, "body"))
        if not value.strip():
            raise PydanticCustomError(
                "empty", "the body is empty; a process needs its steps below the frontmatter"
            )
        size = len(value.encode("utf-8", "surrogatepass"))
        if size > MAX_DOC_BYTES:
            raise PydanticCustomError(
                "too_large",
                "the body is {size} bytes; the limit is {limit} bytes",
                {"size": size, "limit": MAX_DOC_BYTES},
            )
        return value

    # ---- the wire format ----

    @classmethod
    def parse(cls, text: str) -> ProcessDoc:
        """Parse markdown with YAML frontmatter into a validated document.

        Pure; thread-safe.

        Raises:
            DocTooLarge: the text exceeds :data:`MAX_DOC_BYTES`, checked before parsing.
            DocError: anything else wrong with it, naming the field (see the module
                docstring for the reasons).
        """
        if not isinstance(text, str):
            raise DocError(
                "document", "wrong_type", f"a document must be text, got {_type_name(text)}"
            )
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
        _check_nesting(fm_text, skipped_lines)
        try:
            loaded = yaml.safe_load(fm_text)
        except (ValueError, RecursionError) as exc:
            # ValueError: an integer past Python's 4300-digit conversion limit. RecursionError
            # cannot happen after _check_nesting; kept so a parser change cannot leak one.
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
                f"got a {_type_name(loaded)}",
            )
        for key in loaded:
            if not isinstance(key, str) or key not in FIELDS:
                raise DocError(
                    str(key),
                    "unknown_field",
                    f"unknown frontmatter field {str(key)!r}; the fields are {', '.join(FIELDS)}",
                )
        for key in _REQUIRED:
            if key not in loaded:
                raise DocError(key, "missing", f"the frontmatter has no {key!r}; it is required")
        try:
            return cls.model_validate({**loaded, "body": body})
        except ValidationError as exc:
            raise _doc_error(exc) from None

    def render(self) -> str:
        """Render as markdown: ``---``, the frontmatter in :data:`FIELDS` order, ``---``, a
        blank line, the body.

        ``None`` timestamps and ``source_mission_id`` are omitted, as is ``shared`` when
        false. Deterministic: the same document always renders to the same text.
        """
        lines = ["---"]
        for name in FIELDS:
            value = getattr(self, name)
            if value is None or (name == "shared" and not value):
                continue
            lines.append(f"{name}: {_yaml_value(value)}")
        lines.append("---")
        return "\n".join(lines) + "\n\n" + self.body

    def frontmatter(self) -> dict[str, Any]:
        """The frontmatter as a JSON-ready dict (timestamps as strings), without the body."""
        out: dict[str, Any] = {}
        for name in FIELDS:
            value = getattr(self, name)
            if isinstance(value, datetime):
                value = format_ts(value)
            elif isinstance(value, list):
                value = list(value)
            out[name] = value
        return out

    @property
    def reliability(self) -> float:
        """Laplace-smoothed success rate: ``(s + 1) / (s + f + 2)``; 0.5 with no history."""
        return (self.success_count + 1) / (self.success_count + self.failure_count + 2)


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


def _check_nesting(fm_text: str, skipped_lines: int) -> None:
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


def _doc_error(exc: ValidationError) -> DocError:
    error = exc.errors(include_url=False)[0]
    loc = error.get("loc") or ("document",)
    field = str(loc[0])
    reason = error["type"]
    message = error["msg"]
    if reason == "too_large":
        size = int((error.get("ctx") or {}).get("size", 0))
        return DocTooLarge(size)
    if reason == "extra_forbidden":
        reason = "unknown_field"
        message = f"unknown field {field!r}; the fields are {', '.join(FIELDS)}"
    elif reason == "missing":
        message = f"the frontmatter has no {field!r}; it is required"
    elif reason not in {"empty", "invalid_slug", "wrong_type", "invalid_value"}:
        reason = "invalid_value"
        message = f"{field}: {message}"
    return DocError(field, reason, message)
