"""ProcessDoc: parsing, rendering and validation of process documents (memory spec §3, §7)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from robot_mcp_memory._exceptions import (
    DocError,
    DocTooLarge,
)
from robot_mcp_memory._limits import MAX_COUNT, MAX_DOC_BYTES
from robot_mcp_memory.processes import ProcessDoc
from robot_mcp_memory.processes._frontmatter import FIELDS
from robot_mcp_memory.processes._model import SLUG_PATTERN

# The example document of memory spec §3, comments and all.
MAILROOM = (Path(__file__).resolve().parents[4] / "examples" / "mailroom.md").read_text(
    encoding="utf-8"
)


def _doc(**fields: object) -> str:
    """A minimal valid document with ``fields`` overriding or adding frontmatter lines."""
    base: dict[str, object] = {"id": "wipe-table", "title": "Wipe the table"}
    base.update(fields)
    lines = [f"{key}: {value}" for key, value in base.items() if value is not None]
    return "---\n" + "\n".join(lines) + "\n---\n\n## Steps\n1. wipe\n"


class TestParse:
    def test_spec_example_parses_with_every_field(self) -> None:
        """The §3 example parses; YAML comments are ignored and timestamps are UTC."""
        doc = ProcessDoc.parse(MAILROOM)
        assert doc.id == "fetch-package-mailroom"
        assert doc.title == "Fetch a package from the mailroom"
        assert doc.task_pattern == "fetch|get|bring ... package|parcel ... mailroom"
        assert doc.tags == ["delivery", "mailroom"]
        assert doc.robot == "g1-lab-01"
        assert doc.created == datetime(2026, 6, 12, 14, 0, tzinfo=UTC)
        assert doc.last_used == datetime(2026, 6, 12, 16, 20, tzinfo=UTC)
        assert (doc.success_count, doc.failure_count) == (3, 1)
        assert doc.source_mission_id == "m-9af31c"
        assert doc.shared is False
        assert doc.body.startswith("## Steps\n1. navigation.navigate_to(mailroom)")
        assert doc.body.endswith("- Visitor packages are on the lower shelf.\n")

    def test_defaults_fill_optional_fields(self) -> None:
        """Only id, title and a body are required."""
        doc = ProcessDoc.parse(_doc())
        assert doc.task_pattern == ""
        assert doc.tags == []
        assert doc.robot == "unknown"
        assert doc.created is None
        assert doc.updated is None
        assert doc.last_used is None
        assert (doc.success_count, doc.failure_count) == (0, 0)
        assert doc.source_mission_id is None

    def test_crlf_and_bom_are_accepted(self) -> None:
        """Windows line endings and a byte-order mark do not break the fences."""
        doc = ProcessDoc.parse("\ufeff" + MAILROOM.replace("\n", "\r\n"))
        assert doc == ProcessDoc.parse(MAILROOM)

    def test_naive_and_date_timestamps_become_utc(self) -> None:
        """A timestamp without zone is UTC; a bare date is midnight UTC."""
        doc = ProcessDoc.parse(_doc(created="2026-06-12T14:00:00", updated="2026-06-12"))
        assert doc.created == datetime(2026, 6, 12, 14, 0, tzinfo=UTC)
        assert doc.updated == datetime(2026, 6, 12, tzinfo=UTC)

    def test_offset_timestamp_is_converted_to_utc(self) -> None:
        """A +02:00 timestamp is stored as the same instant in UTC."""
        doc = ProcessDoc.parse(_doc(created="2026-06-12T16:00:00+02:00"))
        assert doc.created == datetime(2026, 6, 12, 14, 0, tzinfo=UTC)
        assert "created: 2026-06-12T14:00:00.000Z" in doc.render()

    def test_numeric_mission_id_is_read_as_text(self) -> None:
        """YAML reads 1234 as a number; an identifier field takes it as the string."""
        assert ProcessDoc.parse(_doc(source_mission_id=1234)).source_mission_id == "1234"

    def test_reliability_is_laplace_smoothed(self) -> None:
        """(s + 1) / (s + f + 2)."""
        assert ProcessDoc.parse(MAILROOM).reliability == pytest.approx(4 / 6)
        assert ProcessDoc.parse(_doc()).reliability == 0.5


class TestRender:
    def test_render_is_canonical_and_reparses(self) -> None:
        """The spec example renders without comments, in field order, and reparses equal."""
        doc = ProcessDoc.parse(MAILROOM)
        text = doc.render()
        assert text.startswith("---\nid: fetch-package-mailroom\ntitle: Fetch a package")
        assert "created: 2026-06-12T14:00:00.000Z\n" in text
        assert "tags: [delivery, mailroom]\n" in text
        assert "#" not in text.split("---\n")[1]
        assert ProcessDoc.parse(text) == doc
        assert ProcessDoc.parse(text).render() == text

    def test_render_orders_fields_and_omits_unset(self) -> None:
        """Unset optional fields and shared=false are not written."""
        text = ProcessDoc.parse(_doc()).render()
        keys = [line.split(":")[0] for line in text.split("---\n")[1].splitlines()]
        assert keys == [
            "id",
            "title",
            "task_pattern",
            "tags",
            "robot",
            "success_count",
            "failure_count",
        ]
        assert keys == [name for name in FIELDS if name in keys]

    def test_shared_true_is_written(self) -> None:
        """A fleet-wide document says so in its frontmatter."""
        doc = ProcessDoc.parse(_doc(shared="true"))
        assert doc.shared is True
        assert "shared: true\n" in doc.render()

    def test_strings_yaml_would_misread_are_quoted(self) -> None:
        """Titles that look like booleans, numbers or dates survive the round trip."""
        for title in ["yes", "2024", "2026-06-12", "null", "a: b", "[x]", "# hash", "'q'"]:
            doc = ProcessDoc(id="t", title=title, body="b")
            assert ProcessDoc.parse(doc.render()).title == title

    def test_frontmatter_is_json_ready_without_body(self) -> None:
        """frontmatter() has every field, timestamps as Z strings, and no body."""
        fm = ProcessDoc.parse(MAILROOM).frontmatter()
        assert list(fm) == list(FIELDS)
        assert fm["created"] == "2026-06-12T14:00:00.000Z"
        assert fm["shared"] is False
        assert "body" not in fm


class TestInvalid:
    @pytest.mark.parametrize(
        ("text", "field", "reason", "quoted"),
        [
            ("just markdown\n", "frontmatter", "no_fences", "'---'"),
            ("---\nid: a\ntitle: b\n", "frontmatter", "no_fences", "closing"),
            ("---\n- a\n- b\n---\nbody\n", "frontmatter", "not_mapping", "list"),
            ("---\nplain words\n---\nbody\n", "frontmatter", "not_mapping", "string"),
            (_doc(id=None), "id", "missing", "'id'"),
            (_doc(title=None), "title", "missing", "'title'"),
            (_doc(id="''"), "id", "empty", "id"),
            (_doc(title="'  '"), "title", "empty", "title"),
            (_doc(id="Fetch Package"), "id", "invalid_slug", "'Fetch Package'"),
            (_doc(id="fetch--package"), "id", "invalid_slug", "fetch--package"),
            (_doc(id="-fetch"), "id", "invalid_slug", "lowercase"),
            (_doc(id="a" * 101), "id", "invalid_slug", "100"),
            (_doc(id=12), "id", "wrong_type", "integer"),
            (_doc(title=2024), "title", "wrong_type", "quote it"),
            (_doc(tags="delivery"), "tags", "wrong_type", "list"),
            (_doc(tags="[ok, 3]"), "tags", "wrong_type", "tags[1]"),
            (_doc(success_count="three"), "success_count", "wrong_type", "'three'"),
            (_doc(success_count=1.5), "success_count", "wrong_type", "number"),
            (_doc(failure_count=-1), "failure_count", "invalid_value", "-1"),
            (_doc(success_count="true"), "success_count", "wrong_type", "boolean"),
            (_doc(shared="'yes'"), "shared", "wrong_type", "'yes'"),
            (_doc(created="soon"), "created", "invalid_value", "'soon'"),
            (_doc(created="1900-01-01"), "created", "invalid_value", "1970"),
            (_doc(last_used="[1]"), "last_used", "wrong_type", "list"),
            (_doc(title='"two\\nlines"'), "title", "invalid_value", "control character"),
            (_doc(sucess_count=1), "sucess_count", "unknown_field", "success_count"),
            ("---\nid: a\ntitle: b\n---\n\n  \n\n", "body", "empty", "body"),
        ],
    )
    def test_invalid_document_names_the_field(
        self, text: str, field: str, reason: str, quoted: str
    ) -> None:
        """Each invalid document raises DocError naming the field and the problem."""
        with pytest.raises(DocError) as info:
            ProcessDoc.parse(text)
        assert (info.value.field, info.value.reason) == (field, reason)
        assert quoted in str(info.value)

    def test_yaml_syntax_error_names_the_line(self) -> None:
        """A YAML error reports the document line it is on."""
        text = "---\nid: a\ntitle: b\ntags: [x, y\nrobot: r\n---\nbody\n"
        with pytest.raises(DocError) as info:
            ProcessDoc.parse(text)
        assert info.value.reason == "yaml_syntax"
        assert info.value.field == "frontmatter"
        assert "line 5" in str(info.value)

    def test_oversized_document_is_too_large_before_parsing(self) -> None:
        """A document over 256 KiB is DocTooLarge, even if it would not parse."""
        with pytest.raises(DocTooLarge) as info:
            ProcessDoc.parse("x" * (MAX_DOC_BYTES + 1))
        assert info.value.reason == "too_large"
        assert info.value.size == MAX_DOC_BYTES + 1
        assert "256 KiB" in str(info.value)

    def test_document_at_the_limit_is_accepted(self) -> None:
        """Exactly 256 KiB of document is fine."""
        head = "---\nid: a\ntitle: b\n---\n\n"
        text = head + "y" * (MAX_DOC_BYTES - len(head) - 1) + "\n"
        assert len(text.encode()) == MAX_DOC_BYTES
        assert ProcessDoc.parse(text).id == "a"

    def test_direct_construction_validates_and_assignment_too(self) -> None:
        """The model enforces the same rules when built or changed in code."""
        with pytest.raises(ValidationError):
            ProcessDoc(id="Bad Id", title="t", body="b")
        doc = ProcessDoc(id="ok", title="t", body="b")
        with pytest.raises(ValidationError):
            doc.id = "also bad"


# ---- properties ----------------------------------------------------------------------

_line_text = st.text(
    alphabet=st.characters(exclude_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=40
).filter(lambda s: s.strip() != "")
_timestamps = st.one_of(
    st.none(),
    st.datetimes(
        min_value=datetime(1970, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
    ),
)
_docs = st.builds(
    ProcessDoc,
    id=st.from_regex(SLUG_PATTERN, fullmatch=True).filter(lambda s: len(s) <= 100),
    title=_line_text,
    task_pattern=st.one_of(st.just(""), _line_text),
    tags=st.lists(_line_text, max_size=5),
    robot=_line_text,
    created=_timestamps,
    updated=_timestamps,
    success_count=st.integers(min_value=0, max_value=MAX_COUNT),
    failure_count=st.integers(min_value=0, max_value=MAX_COUNT),
    last_used=_timestamps,
    source_mission_id=st.one_of(st.none(), _line_text),
    shared=st.booleans(),
    body=st.text(alphabet=st.characters(exclude_categories=("Cs",)), min_size=1).filter(
        lambda s: s.strip() != ""
    ),
)


@pytest.mark.slow  # 300 random documents (about 5 s)
@settings(max_examples=300, deadline=None)
@given(_docs)
def test_parse_render_round_trip(doc: ProcessDoc) -> None:
    """parse(render(d)) == d, and render(parse(t)) == t for rendered t."""
    text = doc.render()
    again = ProcessDoc.parse(text)
    assert again == doc
    assert again.render() == text


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_parse_raises_only_doc_error(text: str) -> None:
    """Arbitrary text either parses or raises DocError, never anything else."""
    try:
        ProcessDoc.parse(text)
    except DocError as exc:
        error = exc
    else:
        return
    assert error.field
    assert str(error)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(FIELDS),
        st.from_type(type(None))
        | st.integers()
        | st.text()
        | st.booleans()
        | st.lists(st.integers()),
    )
)
def test_random_frontmatter_raises_only_doc_error(fields: dict[str, object]) -> None:
    """Well-formed YAML with random field values parses or raises DocError naming a field."""
    import yaml

    text = "---\n" + yaml.safe_dump(fields) + "---\nbody\n"
    try:
        ProcessDoc.parse(text)
    except DocError as exc:
        error = exc
    else:
        return
    assert error.field in (*FIELDS, "frontmatter", "body")


def test_render_keeps_true_and_one_apart() -> None:
    """``shared: true`` and a count of 1 render as themselves whichever came first.

    Regression guard for the memoized YAML scalar rendering (True == 1 in Python).
    """
    shared = ProcessDoc.parse(
        MAILROOM.replace("failure_count: 1", "failure_count: 1\nshared: true")
    )
    one = ProcessDoc.parse(MAILROOM)
    assert "shared: true" in shared.render()
    assert "failure_count: 1\n" in one.render()
    assert "failure_count: 1\n" in shared.render()
