"""The memory MCP server's seven process tools, driven through a real in-memory MCP client."""

from __future__ import annotations

import json
import sqlite3
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import structlog
from mcp.shared.memory import create_connected_server_and_client_session

from robot_mcp_memory.limits import MAX_DOC_BYTES
from robot_mcp_memory.server import (
    INSTRUCTIONS,
    build_server,
)
from robot_mcp_memory.services import (
    Memory,
    StoreHolder,
)
from robot_mcp_memory.settings import Settings
from robot_mcp_memory.tenant import (
    Tenant,
    current_tenant,
)

MAILROOM = (Path(__file__).resolve().parents[2] / "examples" / "mailroom.md").read_text(
    encoding="utf-8"
)

TOOLS = {
    "find_processes",
    "get_process",
    "save_process",
    "record_outcome",
    "delete_process",
    "list_processes",
    "reindex",
    "revert_process",
    "merge_processes",
    "register_robot",
    "set_robot_meta",
    "list_robots",
    "list_groups",
    "set_group",
    "upsert_group",
    "delete_group",
    "set_self_improve",
    "recall_params",
    "record_params",
    "list_lessons",
}


def doc(id, title, body="## Steps\n1. do the thing\n", **front):
    lines = ["---", f"id: {id}", f"title: {title}"]
    lines += [f"{k}: {v}" for k, v in front.items()]
    return "\n".join([*lines, "---", "", body])


@pytest.fixture(autouse=True)
def _reset_structlog():
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()


@pytest.fixture
def settings(tmp_path):
    return Settings(data_dir=tmp_path / "data", robot_id="g1-test")


@asynccontextmanager
async def connect(server):
    async with create_connected_server_and_client_session(server) as client:
        yield client


def session(settings):
    """A fresh server for ``settings`` and a connected in-memory client."""
    return connect(build_server(settings))


async def call(client, tool, **args):
    """Call a tool and decode its JSON string result (the transport itself must not fail)."""
    result = await client.call_tool(tool, args)
    assert not result.isError, result.content
    return json.loads(result.content[0].text)


class TestSurface:
    async def test_exactly_the_twenty_tools(self, settings):
        """The server named memory exposes DESIGN §5's 18 tools (processes, fleet, lessons)
        and issue 22's revert_process and merge_processes."""
        async with session(settings) as client:
            listed = await client.list_tools()
            assert {t.name for t in listed.tools} == TOOLS

    async def test_server_is_named_memory_with_advice_instructions(self, settings):
        """FastMCP name is 'memory' and its instructions frame processes as advice."""
        server = build_server(settings)
        assert server.name == "memory"
        assert "advice" in INSTRUCTIONS.lower()
        assert "deviate" in INSTRUCTIONS.lower()
        assert server.instructions == INSTRUCTIONS

    async def test_docstrings_tell_the_llm_processes_are_advice(self, settings):
        """find/get descriptions say advice + deviate; find says it's called automatically."""
        async with session(settings) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            for name in ("find_processes", "get_process"):
                text = tools[name].description.lower()
                assert "advice" in text
                assert "deviate" in text
            assert "automatically" in tools["find_processes"].description

    async def test_input_schemas(self, settings):
        """Snapshot of the argument names, required ones and defaults of each tool."""
        async with session(settings) as client:
            tools = {t.name: t.inputSchema for t in (await client.list_tools()).tools}
            shape = {
                name: (sorted(s["properties"]), sorted(s.get("required", [])))
                for name, s in tools.items()
            }
            assert shape == {
                "find_processes": (["k", "query", "robot"], ["query"]),
                "get_process": (["id", "life", "revision"], ["id"]),
                "save_process": (["expected_revision", "markdown"], ["markdown"]),
                "record_outcome": (["id", "note", "success"], ["id", "success"]),
                "delete_process": (["id"], ["id"]),
                "list_processes": (["limit", "offset", "robot", "stale"], []),
                "reindex": ([], []),
                "revert_process": (["id", "life", "revision"], ["id", "revision"]),
                "merge_processes": (["keep_id", "merge_id"], ["keep_id", "merge_id"]),
                "register_robot": (["group_id", "meta", "name", "robot_id"], ["robot_id"]),
                "set_robot_meta": (["meta", "robot_id"], ["meta", "robot_id"]),
                "list_robots": ([], []),
                "list_groups": ([], []),
                "set_group": (["group_id", "robot_id"], ["robot_id"]),
                "upsert_group": (["customer", "factory", "group_id", "name"], ["group_id"]),
                "delete_group": (["group_id"], ["group_id"]),
                "set_self_improve": (["enabled", "group_id"], ["enabled"]),
                "recall_params": (["place", "robot", "skill"], ["robot", "skill"]),
                "record_params": (
                    ["note", "params", "place", "private", "robot", "skill", "success"],
                    ["robot", "skill"],
                ),
                "list_lessons": (["robot", "skill"], []),
            }
            assert tools["find_processes"]["properties"]["k"]["default"] == 3
            assert tools["list_processes"]["properties"]["limit"]["default"] == 50


class TestDemo:
    async def test_mailroom_document_is_found_first_with_full_markdown(self, settings):
        """Spec acceptance: save the §3 mailroom doc, a paraphrase finds it first, verbatim."""
        async with session(settings) as client:
            saved = await call(client, "save_process", markdown=MAILROOM)
            assert saved["id"] == "fetch-package-mailroom"
            assert saved["inserted"] is True
            await call(
                client, "save_process", markdown=doc("water-plants", "Water the office plants")
            )

            found = await call(
                client, "find_processes", query="bring me the parcel from the mail room"
            )
            first = found["processes"][0]
            assert first["id"] == "fetch-package-mailroom"
            assert set(first) == {
                "id",
                "title",
                "score",
                "bm25",
                "semantic",
                "reliability",
                "success_count",
                "failure_count",
                "updated",
                "revision",
                "stale",
                "last_success",
                "markdown",
            }
            assert first["score"] > 0
            assert first["bm25"] > 0
            assert first["semantic"] > 0  # hybrid is the default (issue 11)
            assert first["reliability"] == pytest.approx((3 + 1) / (3 + 1 + 2))
            # the fused relevance is at most 1, then × reliability
            assert first["score"] <= first["reliability"]
            full = await call(client, "get_process", id="fetch-package-mailroom")
            assert first["markdown"] == full["markdown"]
            assert "Visitor packages are on the lower shelf." in first["markdown"]

    async def test_query_without_words_finds_nothing(self, settings):
        """A query of FTS operators only is not an error: it finds nothing."""
        async with session(settings) as client:
            await call(client, "save_process", markdown=MAILROOM)
            found = await call(client, "find_processes", query='" * ( NEAR )')
            assert found == {"processes": [], "truncated": False}

    async def test_k_is_clamped(self, settings):
        """k=0 returns one process, k=10_000 does not fail."""
        async with session(settings) as client:
            await call(client, "save_process", markdown=doc("mail-a", "Mailroom parcel A"))
            await call(client, "save_process", markdown=doc("mail-b", "Mailroom parcel B"))
            assert (
                len((await call(client, "find_processes", query="mailroom", k=0))["processes"]) == 1
            )
            many = await call(client, "find_processes", query="mailroom", k=10_000)
            assert len(many["processes"]) == 2


class TestSave:
    async def test_resave_same_mission_updates_in_place_keeping_counters(self, settings):
        """Same id and source mission: updated, not created; counters survive."""
        async with session(settings) as client:
            await call(client, "save_process", markdown=MAILROOM)
            edited = MAILROOM.replace("lower shelf", "upper shelf").replace(
                "success_count: 3", "success_count: 0"
            )
            again = await call(client, "save_process", markdown=edited)
            assert again["id"] == "fetch-package-mailroom"
            assert again["inserted"] is False
            assert "renamed_from" not in again
            assert again["success_count"] == 3
            got = await call(client, "get_process", id="fetch-package-mailroom")
            assert "upper shelf" in got["markdown"]
            assert got["updated"] >= "2026-06-12T14:00:00"

    async def test_collision_from_another_mission_is_suffixed(self, settings):
        """Same id, different source_mission_id: stored as <id>-2, the original untouched."""
        async with session(settings) as client:
            await call(client, "save_process", markdown=MAILROOM)
            other = MAILROOM.replace("m-9af31c", "m-other").replace("lower shelf", "shelf B")
            saved = await call(client, "save_process", markdown=other)
            assert saved["id"] == "fetch-package-mailroom-2"
            assert saved["renamed_from"] == "fetch-package-mailroom"
            assert saved["inserted"] is True
            original = await call(client, "get_process", id="fetch-package-mailroom")
            assert "lower shelf" in original["markdown"]
            listed = await call(client, "list_processes")
            assert len(listed["processes"]) == 2

    async def test_unknown_robot_becomes_robot_id(self, settings):
        """A document saved without a robot gets ROBOT_ID as provenance."""
        async with session(settings) as client:
            saved = await call(client, "save_process", markdown=doc("wipe-table", "Wipe the table"))
            assert saved["robot"] == "g1-test"

    async def test_invalid_frontmatter_names_the_field(self, settings):
        """A bad slug is invalid and the error names the id field."""
        async with session(settings) as client:
            out = await call(client, "save_process", markdown=doc("Not A Slug", "x"))
            assert out["error"] == "invalid"
            assert out["field"] == "id"
            assert "id" in out["detail"]

    async def test_document_over_256_kib_is_too_large(self, settings):
        """A document over the limit is refused before parsing."""
        async with session(settings) as client:
            big = doc("big-doc", "Big", body="x" * (MAX_DOC_BYTES + 1))
            out = await call(client, "save_process", markdown=big)
            assert out["error"] == "too_large"
            assert str(MAX_DOC_BYTES) in out["detail"]


class TestReadsAndWrites:
    async def test_record_outcome_updates_counters_and_logs_the_note(self, settings):
        """Counters move, and a note lands under '## Outcome log' in the document."""
        async with session(settings) as client:
            await call(client, "save_process", markdown=MAILROOM)
            out = await call(client, "record_outcome", id="fetch-package-mailroom", success=True)
            assert (out["success_count"], out["failure_count"]) == (4, 1)
            out = await call(
                client,
                "record_outcome",
                id="fetch-package-mailroom",
                success=False,
                note="door was locked",
            )
            # The reply counts this call's increment on top of the row as read; the first
            # call's increment may still be queued (hot path), so only this one is certain.
            assert out["failure_count"] == 2
            assert out["last_used"]
            await call(client, "reindex")  # flushes the hot counter writes
            got = await call(client, "get_process", id="fetch-package-mailroom")
            assert (got["success_count"], got["failure_count"]) == (4, 2)
            assert "## Outcome log" in got["markdown"]
            assert "door was locked" in got["markdown"]

    async def test_delete_removes_row_and_index_entry(self, settings):
        """After delete the doc is neither gettable nor findable; a second delete is not_found."""
        async with session(settings) as client:
            await call(client, "save_process", markdown=MAILROOM)
            assert await call(client, "delete_process", id="fetch-package-mailroom") == {
                "deleted": "fetch-package-mailroom"
            }
            assert (await call(client, "get_process", id="fetch-package-mailroom"))["error"] == (
                "not_found"
            )
            assert (await call(client, "find_processes", query="mailroom parcel"))[
                "processes"
            ] == []
            again = await call(client, "delete_process", id="fetch-package-mailroom")
            assert again["error"] == "not_found"

    async def test_list_with_limit_zero_returns_nothing(self, settings):
        """limit=0 answers an empty page that says limit 0 (regression: it returned one)."""
        async with session(settings) as client:
            await call(client, "save_process", markdown=doc("proc-0", "Process 0"))
            page = await call(client, "list_processes", limit=0)
        assert page["processes"] == []
        assert page["limit"] == 0

    async def test_list_pages_frontmatter_without_bodies(self, settings):
        """list_processes returns summaries (no body/markdown), paged by limit/offset."""
        async with session(settings) as client:
            for i in range(5):
                await call(client, "save_process", markdown=doc(f"proc-{i}", f"Process {i}"))
            page = await call(client, "list_processes", limit=2, offset=1)
            assert len(page["processes"]) == 2
            assert (page["limit"], page["offset"]) == (2, 1)
            for summary in page["processes"]:
                assert "body" not in summary
                assert "markdown" not in summary
                assert summary["id"].startswith("proc-")
            everything = await call(client, "list_processes", limit=10_000)
            assert everything["limit"] == 500
            assert len(everything["processes"]) == 5

    async def test_reindex_counts_every_document(self, settings):
        """reindex reports as many indexed documents as there are rows."""
        async with session(settings) as client:
            for i in range(3):
                await call(client, "save_process", markdown=doc(f"proc-{i}", f"Process {i}"))
            assert await call(client, "reindex") == {"indexed": 3}

    async def test_robot_argument_narrows_to_own_plus_shared(self, settings):
        """robot= sees that robot's documents plus shared ones, not another robot's."""
        async with session(settings) as client:
            await call(client, "save_process", markdown=doc("mail-a", "Mailroom A", robot="rap-1"))
            await call(client, "save_process", markdown=doc("mail-b", "Mailroom B", robot="rap-2"))
            await call(
                client,
                "save_process",
                markdown=doc("mail-s", "Mailroom shared", robot="rap-3", shared="true"),
            )
            found = await call(client, "find_processes", query="mailroom", k=10, robot="rap-1")
            assert {p["id"] for p in found["processes"]} == {"mail-a", "mail-s"}
            listed = await call(client, "list_processes", robot="rap-1")
            assert {p["id"] for p in listed["processes"]} == {"mail-a", "mail-s"}
            unscoped = await call(client, "find_processes", query="mailroom", k=10)
            assert len(unscoped["processes"]) == 3


class TestErrors:
    @pytest.mark.parametrize(
        ("tool", "args"),
        [
            ("get_process", {"id": "nope"}),
            ("record_outcome", {"id": "nope", "success": True}),
            ("delete_process", {"id": "nope"}),
        ],
    )
    async def test_unknown_id_is_not_found(self, settings, tool, args):
        """Every id-taking tool answers not_found for an unknown id, as data."""
        async with session(settings) as client:
            out = await call(client, tool, **args)
            assert out["error"] == "not_found"
            assert "nope" in out["detail"]

    async def test_query_over_2_kib_is_searched_truncated(self, settings):
        """A query over 2 KiB is never refused: its first 2 KiB is searched, truncated: true."""
        async with session(settings) as client:
            await call(client, "save_process", markdown=MAILROOM)
            long = "bring me the parcel from the mail room " * 100
            out = await call(client, "find_processes", query=long)
            assert out["truncated"] is True
            assert out["processes"][0]["id"] == "fetch-package-mailroom"
            short = await call(client, "find_processes", query="parcel")
            assert short["truncated"] is False

    async def test_huge_note_is_too_large(self, settings):
        """An outcome note over its limit is too_large, and the counters do not move."""
        async with session(settings) as client:
            await call(client, "save_process", markdown=MAILROOM)
            out = await call(
                client, "record_outcome", id="fetch-package-mailroom", success=True, note="n" * 5000
            )
            assert out["error"] == "too_large"
            await call(client, "reindex")
            got = await call(client, "get_process", id="fetch-package-mailroom")
            assert got["success_count"] == 3

    async def test_negative_offset_is_invalid(self, settings):
        """offset < 0 is invalid and names the field."""
        async with session(settings) as client:
            out = await call(client, "list_processes", offset=-1)
            assert out == {
                "error": "invalid",
                "detail": "limit and offset must be >= 0, got limit=50, offset=-1",
                "field": "offset",
            }

    async def test_store_integrity_error_is_conflict_and_bug_is_internal(
        self, settings, capture_logs
    ):
        """A store IntegrityError maps to conflict; any other exception to internal, logged."""

        class ExplodingStore:
            def save(self, doc, may_update=None, max_robot_documents=None, expected_revision=None):
                raise sqlite3.IntegrityError("UNIQUE constraint failed: processes.id")

            def owner(self, id):
                raise RuntimeError("disk on fire")

            def close(self):
                pass

        class Nothing:
            def close(self):
                pass

        holder = StoreHolder(lambda: Memory(ExplodingStore(), Nothing(), Nothing()))  # type: ignore[arg-type]
        async with connect(build_server(settings, holder=holder)) as client:
            conflict = await call(client, "save_process", markdown=MAILROOM)
            assert conflict["error"] == "conflict"
            with capture_logs() as logs:
                internal = await call(client, "get_process", id="x")
        # The client never sees the exception's text, only a correlation id the log has too.
        assert internal["error"] == "internal"
        assert "disk on fire" not in json.dumps(internal)
        assert "RuntimeError" not in json.dumps(internal)
        assert "UNIQUE" not in json.dumps(conflict)
        failed = [e for e in logs if e["event"] == "tool_failed"]
        assert [e["correlation_id"] for e in failed] == [internal["correlation_id"]]
        assert internal["correlation_id"] in internal["detail"]


class TestScopedTenant:
    """A scoped tenant (a robot token) is confined to its group's and shared documents."""

    @staticmethod
    @asynccontextmanager
    async def scoped(settings):
        """Seed own/foreign/fleet docs as admin, then connect as tenant rap-1."""
        async with session(settings) as admin:
            await call(admin, "save_process", markdown=doc("own", "Mailroom own", robot="rap-1"))
            await call(
                admin, "save_process", markdown=doc("foreign", "Mailroom foreign", robot="rap-2")
            )
            await call(
                admin,
                "save_process",
                markdown=doc("fleet", "Mailroom fleet", robot="rap-9", shared="true"),
            )
        token = current_tenant.set(Tenant(name="rap-1", robot="rap-1"))
        try:
            async with session(settings) as client:
                yield client
        finally:
            current_tenant.reset(token)

    async def test_reads_are_confined_and_robot_argument_cannot_escape(self, settings):
        """rap-1 sees own + shared, even when it asks for rap-2; foreign ids read as absent."""
        async with self.scoped(settings) as client:
            found = await call(client, "find_processes", query="mailroom", k=10, robot="rap-2")
            missing = await call(client, "get_process", id="foreign")
        assert {p["id"] for p in found["processes"]} == {"own", "fleet"}
        assert missing["error"] == "not_found"

    @pytest.mark.parametrize(
        ("tool", "args"),
        [
            ("save_process", {"markdown": doc("x-new", "x", robot="rap-2")}),
            ("save_process", {"markdown": doc("x-new", "x", shared="true")}),
            ("delete_process", {"id": "fleet"}),
            ("reindex", {}),
        ],
    )
    async def test_crossing_the_scope_is_forbidden(self, settings, tool, args):
        """Foreign or fleet-wide writes and administration are forbidden for a scoped tenant."""
        async with self.scoped(settings) as client:
            out = await call(client, tool, **args)
        assert out["error"] == "forbidden"
        assert out["detail"]

    async def test_save_pins_unknown_robot_to_the_tenant(self, settings):
        """A scoped save of a robot-less document is stored as the tenant's own."""
        async with self.scoped(settings) as client:
            saved = await call(client, "save_process", markdown=doc("mine-now", "Mine"))
        assert saved["robot"] == "rap-1"


class TestLogging:
    async def test_one_tool_call_event_per_call_with_duration(self, settings, capture_logs):
        """Each tool call logs exactly one tool_call event: tool, duration_ms, outcome."""
        async with session(settings) as client:
            with capture_logs() as logs:
                await call(client, "get_process", id="nope")
                await call(client, "reindex")
            events = [e for e in logs if e["event"] == "tool_call"]
            assert [(e["tool"], e["outcome"]) for e in events] == [
                ("get_process", "not_found"),
                ("reindex", "ok"),
            ]
            for e in events:
                assert isinstance(e["duration_ms"], float)
                assert e["duration_ms"] >= 0

    async def test_tool_call_event_says_what_the_call_did(self, settings, capture_logs):
        """A save logs the stored id; a find logs how many processes it returned."""
        async with session(settings) as client:
            with capture_logs() as logs:
                await call(client, "save_process", markdown=MAILROOM)
                await call(client, "find_processes", query="mailroom parcel")
        save, find = [e for e in logs if e["event"] == "tool_call"]
        assert save["id"] == "fetch-package-mailroom"
        assert save["markdown_chars"] == len(MAILROOM)
        assert (find["results"], find["k"], find["robot"]) == (1, 3, None)
        assert "markdown" not in find  # bodies never go to the log


class TestStoreHolder:
    def test_last_release_closes(self):
        """The store opens on first acquire and closes on the last release, once."""
        opened, closed = [], []

        class Fake:
            def close(self):
                closed.append(self)

        def opener():
            opened.append(Memory(Fake(), Fake(), Fake()))  # type: ignore[arg-type]
            return opened[-1]

        holder = StoreHolder(opener)  # type: ignore[arg-type]
        a = holder.acquire()
        b = holder.acquire()
        assert a is b
        holder.release()
        assert closed == []
        holder.release()
        assert closed == [opened[0].lessons, a]
        assert holder.store is None
        holder.release()  # extra release is harmless
        assert len(opened) == 1


class TestHostileText:
    @pytest.mark.parametrize(
        ("tool", "args", "field"),
        [
            ("get_process", {"id": "x\udfff"}, "id"),
            ("record_outcome", {"id": "x", "success": True, "note": "n\ud800"}, "note"),
            ("list_processes", {"robot": "r\ud800"}, "robot"),
            ("save_process", {"markdown": doc("s", "Bad \ud800 title")}, "document"),
        ],
    )
    async def test_a_lone_surrogate_is_invalid_naming_the_field(self, settings, tool, args, field):
        """Text that cannot be stored as UTF-8 is invalid with the field named (a transport
        that lets it through must not turn it into an internal error)."""
        async with session(settings) as client:
            out = await call(client, tool, **args)
        assert out["error"] == "invalid", out
        assert out["field"] == field
        assert "surrogate" in out["detail"]
