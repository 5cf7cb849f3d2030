"""Process documents: YAML frontmatter plus a markdown body (memory spec §3).

A process is one row in ``processes``; this module is its model and its validators.
:meth:`ProcessDoc.parse` turns markdown into a validated :class:`ProcessDoc`,
:meth:`ProcessDoc.render` turns it back; the text format itself (fences, the pre-parse
size and nesting checks, YAML in and out) is :mod:`._frontmatter`'s.
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
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from robot_mcp_kit import reliability as _reliability
from robot_mcp_kit.models import format_ts
from robot_mcp_memory._exceptions import (
    DocError,
    DocTooLarge,
)
from robot_mcp_memory._limits import (
    MAX_COUNT,
    MAX_DOC_BYTES,
    MAX_ID_LENGTH,
)
from robot_mcp_memory.processes._frontmatter import (
    FIELDS,
    render_document,
    short,
    split_document,
    type_name,
)

__all__ = ["SLUG_PATTERN", "Owner", "ProcessDoc"]

SLUG_PATTERN = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
"""A kebab-case slug: lowercase ASCII letters and digits in groups joined by single hyphens.

Always applied with ``fullmatch``: a ``$``-anchored ``match`` accepts a trailing newline.
"""

# Characters that may not appear in a single-line field: C0/C1 controls (which include
# \n, \r, \t and NEL) and the two Unicode line/paragraph separators.
_LINE_BREAKING = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _single_line(value: str, what: str) -> str:
    bad = _LINE_BREAKING.search(value)
    if bad:
        raise PydanticCustomError(
            "invalid_value",
            "{what} {value} contains the control character {char}; it must be one line "
            "of printable text",
            {"what": what, "value": short(value), "char": repr(bad.group())},
        )
    return value


def _require_str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise PydanticCustomError(
            "wrong_type",
            "{what} must be a string, got {kind} {value} (quote it in YAML)",
            {"what": what, "kind": type_name(value), "value": short(value)},
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
                {"what": what, "value": short(value)},
            ) from None
    if isinstance(value, date) and not isinstance(value, datetime):
        value = datetime.combine(value, time(), tzinfo=UTC)
    if not isinstance(value, datetime):
        raise PydanticCustomError(
            "wrong_type",
            "{what} must be a timestamp like 2026-06-12T14:00:00Z, got {kind} {value}",
            {"what": what, "kind": type_name(value), "value": short(value)},
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
            {"what": what, "value": short(raw if isinstance(raw, str) else str(raw))},
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
            {"what": what, "kind": type_name(value), "value": short(value)},
        )
    if not 0 <= value <= MAX_COUNT:
        raise PydanticCustomError(
            "invalid_value",
            "{what} must be an integer from 0 to {max}, got {value}",
            {"what": what, "value": short(value), "max": MAX_COUNT},
        )
    return value


def _normalise_body(body: str) -> str:
    # Every stored body is read back through here: skip the two replaces (each a scan and a
    # copy of up to 256 KiB, under the GIL) when there is no carriage return to replace.
    if "\r" in body:
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
                {"value": short(value), "max": MAX_ID_LENGTH},
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
                {"kind": type_name(value), "value": short(value)},
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
                {"kind": type_name(value), "value": short(value)},
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
        loaded, body = split_document(text)
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
        return render_document({name: getattr(self, name) for name in FIELDS}, self.body)

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
        """Laplace-smoothed success rate (:func:`robot_mcp_kit.reliability`); 0.5 with no
        history."""
        return _reliability(self.success_count, self.failure_count)


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


@dataclass(frozen=True)
class Owner:
    """Who a stored document belongs to: what visibility checks need, without the body."""

    id: str
    robot: str
    shared: bool
