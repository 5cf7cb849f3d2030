"""The memory tools below MCP: handlers called directly, the runner, answer_for, the wire.

The handlers (``robot_mcp_memory.tools._processes.find_processes`` …) run against real
SQLite services (:func:`robot_mcp_memory.open_memory`, lexical search); the §6a rules are
also checked against fakes of the ports. Through a real in-memory MCP client every tool's
``structuredContent`` is the same object as its JSON text, and the tool list (names,
descriptions, input schemas) equals the stored snapshot byte for byte.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from mcp.shared.memory import create_connected_server_and_client_session

from robot_mcp_memory import (
    DamagedRow,
    DocError,
    DocTooLarge,
    FleetError,
    Memory,
    Settings,
    StoreHolder,
    ToolFailure,
    build_server,
    open_memory,
)
from robot_mcp_memory._exceptions import WriteConflict
from robot_mcp_memory._policy import updatable, visible_owner
from robot_mcp_memory.processes import Owner
from robot_mcp_memory.tenant import ADMIN, Tenant
from robot_mcp_memory.tools import ToolRunner, answer_for
from robot_mcp_memory.tools import fleet as fleet_tools
from robot_mcp_memory.tools import lessons as lesson_tools
from robot_mcp_memory.tools import processes as process_tools
from robot_mcp_memory.tools._runner import ANSWER_SCHEMA

SNAPSHOT = Path(__file__).parent / "memory_tools.json"
ROBOT = Tenant.for_robot("rap-1")


def doc(id: str, title: str, **front: Any) -> str:
    lines = ["---", f"id: {id}", f"title: {title}", *(f"{k}: {v}" for k, v in front.items())]
    return "\n".join([*lines, "---", "", "## Steps\n1. walk to the mailroom\n"])


@pytest.fixture(autouse=True)
def _reset_structlog() -> Iterator[None]:
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()


@pytest.fixture
def settings(sqlite_backend: Any) -> Settings:
    """The tools' server settings (the tools are above the storage: tested once)."""
    settings: Settings = sqlite_backend.settings(robot_id="g1-test", search="lexical")
    return settings


@pytest.fixture
def memory(settings: Settings) -> Iterator[Memory]:
    opened = open_memory(settings)
    yield opened
    opened.close()


class TestProcessHandlers:
    def test_save_then_find_without_mcp(self, memory: Memory) -> None:
        """The handlers are plain functions over the services: save, then find it."""
        saved = process_tools.save_process(memory, None, markdown=doc("mailroom", "Mailroom"))
        assert (saved["id"], saved["inserted"]) == ("mailroom", True)
        found = process_tools.find_processes(memory, None, query="walk to the mailroom")
        assert found["truncated"] is False
        assert [p["id"] for p in found["processes"]] == ["mailroom"]

    def test_find_clamps_k_once(self, memory: Memory) -> None:
        """k past MAX_K is clamped, k below 1 returns one result."""
        for n in range(3):
            process_tools.save_process(memory, None, markdown=doc(f"d{n}", f"Mailroom {n}"))
        few = process_tools.find_processes(memory, None, query="mailroom", k=0)
        assert len(few["processes"]) == 1
        many = process_tools.find_processes(memory, None, query="mailroom", k=10_000)
        assert len(many["processes"]) == 3

    def test_missing_process_raises_not_found(self, memory: Memory) -> None:
        """get_process of an unknown id raises the not_found failure (answered by the runner)."""
        with pytest.raises(ToolFailure) as info:
            process_tools.get_process(memory, None, id="nope")
        assert info.value.payload() == {"error": "not_found", "detail": "no process with id 'nope'"}

    def test_scoped_tenant_may_not_reindex(self, memory: Memory) -> None:
        """reindex is fleet administration: a robot tenant gets forbidden, the admin a count."""
        with pytest.raises(ToolFailure) as info:
            process_tools.reindex(memory, ROBOT)
        assert info.value.code == "forbidden"
        assert process_tools.reindex(memory, ADMIN) == {"indexed": 0}

    def test_negative_offset_is_invalid_naming_the_field(self, memory: Memory) -> None:
        with pytest.raises(ToolFailure) as info:
            process_tools.list_processes(memory, None, offset=-1)
        assert (info.value.code, info.value.extra) == ("invalid", {"field": "offset"})


class TestFleetAndLessonHandlers:
    def test_register_and_list_robots(self, memory: Memory) -> None:
        robot = fleet_tools.register_robot(memory, None, robot_id="rap-1", name="Rapunzel")
        assert robot["robot_id"] == "rap-1"
        assert [r["robot_id"] for r in fleet_tools.list_robots(memory, None)["robots"]] == ["rap-1"]

    def test_scoped_robot_may_not_register_another(self, memory: Memory) -> None:
        with pytest.raises(ToolFailure) as info:
            fleet_tools.register_robot(memory, ROBOT, robot_id="rap-2")
        assert info.value.code == "forbidden"

    def test_lessons_act_as_the_tenants_own_robot(self, memory: Memory) -> None:
        """A scoped tenant's recall reads its own lessons whatever robot it names."""
        fleet_tools.set_self_improve(memory, None, enabled=True)
        lesson_tools.record_params(memory, ROBOT, robot="rap-1", skill="grasp", params={"x": 1})
        recalled = lesson_tools.recall_params(memory, ROBOT, robot="someone-else", skill="grasp")
        assert recalled["lesson"]["params"] == {"x": 1}


class FakeFleet:
    """The two registry calls the policy makes, over a fixed grouping."""

    def __init__(self, groups: dict[str, frozenset[str]]) -> None:
        self.groups = groups

    def visible_robots(self, robot_id: str) -> frozenset[str]:
        return self.groups.get(robot_id, frozenset({robot_id}))

    def group_of(self, robot_id: str) -> str | None:
        return None


class FakeProcesses:
    """The one processes call visible_owner makes."""

    def __init__(self, owners: dict[str, Owner]) -> None:
        self.owners = owners

    def owner(self, id: str) -> Owner | None:
        return self.owners.get(id)


class TestPolicyOverPorts:
    def test_a_scoped_save_may_update_only_in_scope_documents(self) -> None:
        """The save's predicate speaks Owner: in-scope yes, foreign and shared no (those are
        passed over like another mission's); the admin may update anything (None)."""
        may_update = updatable(FakeFleet({"rap-1": frozenset({"rap-1", "rap-2"})}), ROBOT)  # type: ignore[arg-type]
        assert may_update is not None
        assert may_update(Owner(id="a", robot="rap-2", shared=False))
        assert not may_update(Owner("b", "rap-9", False))
        assert not may_update(Owner("c", "rap-1", True))
        assert updatable(FakeFleet({}), ADMIN) is None  # type: ignore[arg-type]

    def test_out_of_scope_reads_as_absent(self) -> None:
        """A foreign robot's document is not_found for a scoped tenant, visible to the admin."""
        processes = FakeProcesses({"x": Owner("x", "rap-9", False), "s": Owner("s", "rap-9", True)})
        fleet = FakeFleet({})
        with pytest.raises(ToolFailure) as info:
            visible_owner(processes, fleet, "x", ROBOT)  # type: ignore[arg-type]
        assert info.value.code == "not_found"
        assert visible_owner(processes, fleet, "s", ROBOT).shared  # type: ignore[arg-type]
        assert visible_owner(processes, fleet, "x", ADMIN).robot == "rap-9"  # type: ignore[arg-type]


class TestAnswerFor:
    @pytest.mark.parametrize(
        ("exc", "outcome", "answer"),
        [
            (ToolFailure("forbidden", "no"), "forbidden", {"error": "forbidden", "detail": "no"}),
            (
                FleetError("not_found", "no robot 'r'"),
                "not_found",
                {"error": "not_found", "detail": "no robot 'r'"},
            ),
            (
                DocTooLarge(300_000, 262_144),
                "too_large",
                {
                    "error": "too_large",
                    "detail": "the document is 300000 bytes; the limit is 262144 bytes (256 KiB)",
                    "field": "document",
                    "size": 300_000,
                    "limit": 262_144,
                    "unit": "bytes",
                },
            ),
            (
                DocError("id", "conflict", "taken"),
                "conflict",
                {"error": "conflict", "detail": "taken", "field": "id", "reason": "conflict"},
            ),
            (
                DocError("title", "missing", "no title"),
                "invalid",
                {"error": "invalid", "detail": "no title", "field": "title", "reason": "missing"},
            ),
        ],
    )
    def test_expected_failures_answer_their_own_sentence(
        self, exc: Exception, outcome: str, answer: dict[str, Any]
    ) -> None:
        assert answer_for(exc, "t") == (outcome, answer)

    def test_a_write_conflict_is_a_retryable_conflict(self) -> None:
        """The backends' neutral WriteConflict (never a driver's error) is ``conflict``,
        without its text."""
        outcome, answer = answer_for(WriteConflict("UNIQUE constraint on processes"), "t")
        assert outcome == "conflict"
        assert "UNIQUE" not in answer["detail"]

    def test_a_driver_error_is_not_mapped(self) -> None:
        """answer_for knows no driver: an integrity error that escaped a backend is a bug,
        answered internal."""
        outcome, _ = answer_for(sqlite3.IntegrityError("UNIQUE constraint"), "t")
        assert outcome == "internal"

    def test_damaged_row_names_the_id(self) -> None:
        outcome, answer = answer_for(DamagedRow("bad"), "t")
        assert (outcome, answer["id"]) == ("internal", "bad")

    def test_a_bug_is_internal_with_a_logged_correlation_id(self, capture_logs) -> None:
        """Never the exception's text; the same correlation id in the answer and the log."""
        with capture_logs() as logs:
            outcome, answer = answer_for(KeyError("secret-internal-text"), "get_process")
        assert outcome == "internal"
        assert "secret" not in json.dumps(answer)
        [failed] = [e for e in logs if e["event"] == "tool_failed"]
        assert failed["correlation_id"] == answer["correlation_id"]
        assert failed["tool"] == "get_process"


class TestToolRunner:
    async def test_closed_holder_answers_unavailable_and_logs_once(self, capture_logs) -> None:
        holder = StoreHolder(lambda: pytest.fail("never opened"))  # type: ignore[arg-type,return-value]
        runner = ToolRunner(holder, lambda: ROBOT)
        with capture_logs() as logs:
            result = await runner.run("reindex", process_tools.reindex, {}, extra=1)
        assert result.structuredContent == {
            "error": "unavailable",
            "detail": "the memory store is not open",
        }
        assert json.loads(result.content[0].text) == result.structuredContent  # type: ignore[union-attr]
        [event] = [e for e in logs if e["event"] == "tool_call"]
        assert (event["tool"], event["outcome"], event["tenant"], event["extra"]) == (
            "reindex",
            "unavailable",
            "robot:rap-1",
            1,
        )

    async def test_handler_runs_with_the_tenant_of_the_call(self, settings: Settings) -> None:
        seen: list[Tenant | None] = []

        def handler(memory: Memory, tenant: Tenant | None, *, value: int) -> dict[str, Any]:
            seen.append(tenant)
            return {"value": value, "ünïcode": "✓"}

        holder = StoreHolder.for_settings(settings)
        holder.acquire()
        try:
            result = await ToolRunner(holder, lambda: ADMIN).run("t", handler, {"value": 3})
        finally:
            holder.release()
        assert seen == [ADMIN]
        assert result.content[0].text == '{"value": 3, "ünïcode": "✓"}'  # type: ignore[union-attr]
        assert result.structuredContent == {"value": 3, "ünïcode": "✓"}


# One valid call of every tool, in an order where each finds what it needs.
EVERY_TOOL: list[tuple[str, dict[str, Any]]] = [
    ("save_process", {"markdown": doc("mailroom", "Mailroom")}),
    ("find_processes", {"query": "mailroom"}),
    ("get_process", {"id": "mailroom"}),
    ("record_outcome", {"id": "mailroom", "success": True, "note": "fine"}),
    ("list_processes", {}),
    ("reindex", {}),
    ("upsert_group", {"group_id": "g1", "name": "Group"}),
    ("register_robot", {"robot_id": "rap-1", "group_id": "g1"}),
    ("set_robot_meta", {"robot_id": "rap-1", "meta": {"arm": "left"}}),
    ("list_robots", {}),
    ("list_groups", {}),
    ("set_self_improve", {"enabled": True}),
    ("record_params", {"robot": "rap-1", "skill": "grasp", "params": {"x": 1}}),
    ("recall_params", {"robot": "rap-1", "skill": "grasp"}),
    ("list_lessons", {}),
    ("set_group", {"robot_id": "rap-1", "group_id": None}),
    ("delete_group", {"group_id": "g1"}),
    ("save_process", {"markdown": doc("mailroom", "Mailroom, second version")}),
    ("revert_process", {"id": "mailroom", "revision": 1}),
    ("save_process", {"markdown": doc("mailroom-copy", "Mailroom")}),
    ("merge_processes", {"keep_id": "mailroom", "merge_id": "mailroom-copy"}),
    ("delete_process", {"id": "mailroom"}),
    ("get_process", {"id": "mailroom"}),  # an error answer, too
]


class TestWire:
    async def test_structured_content_is_the_text_for_every_tool(self, settings: Settings) -> None:
        """Each tool answers its JSON object as text and as structuredContent, the same."""
        called = set()
        async with create_connected_server_and_client_session(
            build_server(settings)._mcp_server
        ) as client:
            for tool, args in EVERY_TOOL:
                result = await client.call_tool(tool, args)
                assert not result.isError, (tool, result.content)
                text = result.content[0].text  # type: ignore[union-attr]
                assert result.structuredContent == json.loads(text), tool
                assert "error" not in result.structuredContent or tool == "get_process", (
                    tool,
                    text,
                )
                called.add(tool)
        assert len(called) == 20

    async def test_tool_list_matches_the_snapshot(self, settings: Settings) -> None:
        """Names, descriptions and input schemas are wire: byte-identical to the snapshot;
        every tool declares the object output schema."""
        async with create_connected_server_and_client_session(
            build_server(settings)._mcp_server
        ) as client:
            tools = (await client.list_tools()).tools
        listed = [t.model_dump(mode="json", exclude_none=True) for t in tools]
        assert all(t.pop("outputSchema") == ANSWER_SCHEMA for t in listed)
        assert listed == json.loads(SNAPSHOT.read_text(encoding="utf-8"))
