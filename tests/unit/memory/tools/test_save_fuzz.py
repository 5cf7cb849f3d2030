"""Property-based fuzz of ``save_process`` (issue 9): never ``internal``, store stays readable.

Random frontmatter structures — known and unknown fields, scalars at type limits, unicode
(lone surrogates included), lists and mappings nested past the depth limit — go through
the server's own tool dispatch. Whatever is sent, the answer is a stored document or a
precise error, and afterwards ``find_processes`` and ``list_processes`` still answer.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robot_mcp_memory.processes._frontmatter import FIELDS
from robot_mcp_memory.server import build_server
from robot_mcp_memory.services import StoreHolder
from robot_mcp_memory.settings import Settings

pytestmark = pytest.mark.slow  # a few hundred random documents through the tool (about 10 s)

_LIMIT_INTS = st.sampled_from(
    [0, -1, 1, 2**31 - 1, 2**31, 2**53, 2**63 - 1, 2**63, 2**64, -(2**63), 10**400]
)
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    _LIMIT_INTS,
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(["0001-01-01", "9999-12-31T23:59:59Z", "2026-13-45", "\ud800", "a\nb"]),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)
_KEYS = st.one_of(st.sampled_from(FIELDS), st.text(max_size=12))


_HOSTILE_LINES = [
    "success_count: " + "9" * 5000,  # past Python's int-from-string limit
    "failure_count: 9223372036854775808",
    "tags: " + "[" * 2000 + "]" * 2000,
    "tags:\n  " + "- " * 2000 + "x",
    "a: &a [*a]",
    "x: !!python/object:os.system echo",
    "created: 0001-01-01T00:00:00+14:00",
]


def _deep(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


@st.composite
def frontmatters(draw: st.DrawFn) -> str:
    """Frontmatter text: a random mapping dumped as YAML, or raw hostile text."""
    fields = draw(st.dictionaries(_KEYS, _VALUES, max_size=8))
    if draw(st.booleans()):
        fields.setdefault("id", draw(st.sampled_from(["fuzz-doc", "fuzz-doc\n", "Fuzz"])))
        fields.setdefault("title", draw(st.text(min_size=1, max_size=30)))
    if draw(st.booleans()):
        fields["tags"] = _deep(draw(st.integers(min_value=1, max_value=200)))
    try:
        text = yaml.safe_dump(fields, allow_unicode=True, default_flow_style=draw(st.booleans()))
    except (yaml.YAMLError, UnicodeEncodeError, RecursionError):
        text = repr(fields)
    if draw(st.booleans()):
        text += draw(st.text(max_size=60))
    if draw(st.booleans()):
        text += "\n" + draw(st.sampled_from(_HOSTILE_LINES))
    return text


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    settings_ = Settings(data_dir=tmp_path_factory.mktemp("fuzz") / "data", robot_id="fuzz")
    holder = StoreHolder.for_settings(settings_)
    holder.acquire()
    yield build_server(settings_, holder=holder)
    holder.release()


def _call(server, tool: str, **args: Any) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        result = await server.call_tool(tool, args)
        content = result[0] if isinstance(result, tuple) else getattr(result, "content", result)
        return json.loads(content[0].text)  # type: ignore[no-any-return]

    return anyio.run(run)


@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(front=frontmatters(), body=st.text(max_size=200))
def test_save_process_never_answers_internal(server, front: str, body: str) -> None:
    """Any frontmatter and body: a saved document or a precise error, never ``internal``."""
    answer = _call(server, "save_process", markdown=f"---\n{front}\n---\n\n{body}")
    assert answer.get("error") != "internal", answer
    if "error" in answer:
        assert answer["error"] in {"invalid", "too_large", "conflict"}, answer
        assert answer["detail"]
        assert "Traceback" not in answer["detail"]
    found = _call(server, "find_processes", query="fuzz doc title", k=50)
    assert "processes" in found, found
    listed = _call(server, "list_processes", limit=500)
    assert "processes" in listed, listed
