"""Issue 22, items 3-6: revisions, expected revisions, revert, near-duplicates, merge,
stale marks, and what a scoped connection sees of them.

Through the MCP surface (a real client over in-memory streams, ``build_server``) and the
handlers called as the runner calls them, on SQLite (the rules are the service's, above the
storage; ``backends/contract.py`` holds PostgreSQL's revisions and lives to the same
answers).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import asynccontextmanager

import pytest
from mcp.shared.memory import create_connected_server_and_client_session

from robot_mcp_memory.server import build_server
from robot_mcp_memory.services import Memory, open_memory
from robot_mcp_memory.settings import Settings
from robot_mcp_memory.tenant import Tenant, current_tenant
from robot_mcp_memory.tools import ADMIN_TOOLS
from robot_mcp_memory.tools._processes import (
    delete_process,
    find_processes,
    get_process,
    list_processes,
    merge_processes,
    record_outcome,
    revert_process,
    save_process,
)


def doc(id: str, title: str, body: str, **fields: object) -> str:
    extra = "".join(f"{k}: {v}\n" for k, v in fields.items())
    return f"---\nid: {id}\ntitle: {title}\n{extra}---\n\n{body}"


PARCEL = (
    "## Steps\n1. Drive to the mailroom on floor 2\n2. Ask the clerk for the parcel\n"
    "3. Scan the parcel label\n4. Carry it to the requester's desk\n"
)


@pytest.fixture
def settings(sqlite_backend):
    return sqlite_backend.settings(search="lexical", revisions_keep=3)


def flush(memory: Memory) -> None:
    """Write the queued outcome counters (SQLite's; PostgreSQL counts them as it answers)."""
    memory.processes.repo.flush()


@pytest.fixture
def memory(settings) -> Iterator[Memory]:
    opened = open_memory(settings)
    yield opened
    opened.close()


@asynccontextmanager
async def client(settings, tenant: Tenant | None = None):
    token = current_tenant.set(tenant)
    try:
        async with create_connected_server_and_client_session(
            build_server(settings)._mcp_server
        ) as session:
            yield session
    finally:
        current_tenant.reset(token)


async def call(session, tool, **args):
    result = await session.call_tool(tool, args)
    assert not result.isError, result.content
    return json.loads(result.content[0].text)


class TestRevisions:
    async def test_a_changed_save_keeps_the_previous_version_for_get_process(self, settings):
        """Each save that changes the document bumps its revision and keeps the old one."""
        async with client(settings) as session:
            first = await call(session, "save_process", markdown=doc("fetch", "Fetch", PARCEL))
            assert first["revision"] == 1
            second = await call(
                session, "save_process", markdown=doc("fetch", "Fetch", PARCEL + "5. Done\n")
            )
            assert (second["inserted"], second["revision"]) == (False, 2)
            now = await call(session, "get_process", id="fetch")
            assert now["revision"] == now["current_revision"] == 2
            assert [r["revision"] for r in now["revisions"]] == [1]
            assert now["revisions"][0]["reason"] == "save"
            old = await call(session, "get_process", id="fetch", revision=1)
            assert old["revision"] == 1
            assert old["current_revision"] == 2
            assert "5. Done" not in old["markdown"]
            assert "5. Done" in now["markdown"]
            missing = await call(session, "get_process", id="fetch", revision=7)
            assert missing["error"] == "not_found"
            assert "kept: 1" in missing["detail"]

    async def test_a_save_of_the_same_content_is_not_a_revision(self, settings):
        async with client(settings) as session:
            await call(session, "save_process", markdown=doc("fetch", "Fetch", PARCEL))
            again = await call(session, "save_process", markdown=doc("fetch", "Fetch", PARCEL))
            assert again["revision"] == 1
            got = await call(session, "get_process", id="fetch")
            assert got["revisions"] == []

    async def test_the_newest_revisions_are_kept_past_the_setting(self, settings):
        """MEMORY_REVISIONS_KEEP=3: six changes leave revisions 3, 4 and 5 (and 6 current)."""
        async with client(settings) as session:
            for n in range(6):
                await call(
                    session, "save_process", markdown=doc("fetch", "Fetch", PARCEL + f"v{n}\n")
                )
            got = await call(session, "get_process", id="fetch")
            assert got["revision"] == 6
            assert [r["revision"] for r in got["revisions"]] == [5, 4, 3]
            kept = await call(session, "get_process", id="fetch", revision=3)
            assert "v2\n" in kept["markdown"]


class TestExpectedRevision:
    async def test_two_brains_saving_one_process_cannot_overwrite_each_other(self, settings):
        """Both read revision 1; the second save answers conflict with the current revision
        and stores nothing."""
        async with client(settings) as session:
            await call(
                session,
                "save_process",
                markdown=doc("fetch", "Fetch", PARCEL, source_mission_id="m-1"),
            )
            read = await call(session, "get_process", id="fetch")
            brain_a = doc("fetch", "Fetch", PARCEL + "A: take the lift\n", source_mission_id="m-2")
            brain_b = doc(
                "fetch", "Fetch", PARCEL + "B: take the stairs\n", source_mission_id="m-3"
            )
            saved = await call(
                session, "save_process", markdown=brain_a, expected_revision=read["revision"]
            )
            assert (saved["id"], saved["revision"]) == ("fetch", 2)
            conflict = await call(
                session, "save_process", markdown=brain_b, expected_revision=read["revision"]
            )
            assert conflict["error"] == "conflict"
            assert conflict["current_revision"] == 2
            assert conflict["expected_revision"] == 1
            assert "revision 2" in conflict["detail"]
            now = await call(session, "get_process", id="fetch")
            assert "A: take the lift" in now["markdown"]
            assert "B: take" not in now["markdown"]
            listed = await call(session, "list_processes")
            assert [p["id"] for p in listed["processes"]] == ["fetch"]
            # With the current revision, B's edit goes in (in place, whatever its mission).
            retried = await call(session, "save_process", markdown=brain_b, expected_revision=2)
            assert (retried["id"], retried["revision"]) == ("fetch", 3)

    async def test_expected_revision_0_means_the_id_must_be_new(self, settings):
        async with client(settings) as session:
            new = await call(
                session, "save_process", markdown=doc("fetch", "Fetch", PARCEL), expected_revision=0
            )
            assert new["inserted"] is True
            taken = await call(
                session, "save_process", markdown=doc("fetch", "Other", PARCEL), expected_revision=0
            )
            assert taken["error"] == "conflict"
            assert taken["current_revision"] == 1
            gone = await call(
                session, "save_process", markdown=doc("nope", "Nope", PARCEL), expected_revision=4
            )
            assert gone["error"] == "conflict"
            assert gone["current_revision"] is None
            bad = await call(
                session, "save_process", markdown=doc("x", "X", PARCEL), expected_revision=-1
            )
            assert (bad["error"], bad["field"]) == ("invalid", "expected_revision")


class TestRevertAndMerge:
    def test_revert_brings_a_revision_back_and_keeps_the_counters(self, memory):
        save_process(memory, None, markdown=doc("fetch", "Fetch", PARCEL))
        record_outcome(memory, None, id="fetch", success=True)
        save_process(memory, None, markdown=doc("fetch", "Fetch v2", PARCEL + "extra\n"))
        flush(memory)
        out = revert_process(memory, None, id="fetch", revision=1)
        assert (out["revision"], out["reverted_to"], out["recreated"]) == (3, 1, False)
        assert out["title"] == "Fetch"
        assert out["success_count"] == 1
        got = get_process(memory, None, id="fetch")
        assert "extra" not in got["markdown"]
        assert [r["revision"] for r in got["revisions"]] == [2, 1]
        # The revert is itself revertible.
        assert revert_process(memory, None, id="fetch", revision=2)["title"] == "Fetch v2"

    def test_a_deleted_process_comes_back_by_revert(self, memory):
        save_process(memory, None, markdown=doc("fetch", "Fetch", PARCEL))
        memory.processes.delete("fetch")
        kept = get_process(memory, None, id="fetch", revision=1)  # the admin reads it
        assert kept["current_revision"] is None
        back = revert_process(memory, None, id="fetch", revision=1)
        assert (back["recreated"], back["revision"]) == (True, 2)
        assert find_processes(memory, None, query="parcel mailroom")["processes"][0]["id"] == (
            "fetch"
        )

    def test_save_names_near_copies_and_a_merge_is_undone_by_two_reverts(self, memory):
        save_process(memory, None, markdown=doc("fetch", "Fetch the parcel", PARCEL))
        other = save_process(
            memory, None, markdown=doc("water", "Water plants", "## Steps\n1. Fill the can\n")
        )
        assert other["near_duplicates"] == []
        copy = save_process(
            memory,
            None,
            markdown=doc("fetch-copy", "Fetch the parcel", PARCEL + "5. Say thanks\n"),
        )
        assert [n["id"] for n in copy["near_duplicates"]] == ["fetch"]
        assert copy["near_duplicates"][0]["similarity"] >= 0.8
        for ok in (True, True, False):
            record_outcome(memory, None, id="fetch", success=ok, note=f"fetch run {ok}")
        record_outcome(memory, None, id="fetch-copy", success=True, note="copy run")
        flush(memory)

        merged = merge_processes(memory, None, keep_id="fetch", merge_id="fetch-copy")
        assert (merged["success_count"], merged["failure_count"]) == (3, 1)
        assert merged["merged_revision"] == 1  # outcome notes make no revision
        after = get_process(memory, None, id="fetch")
        assert "copy run" in after["markdown"]
        assert "fetch run True" in after["markdown"]
        assert get_process(memory, None, id="fetch-copy", revision=1)["current_revision"] is None
        assert [p["id"] for p in list_processes(memory, None)["processes"]] == ["fetch", "water"]

        revert_process(memory, None, id="fetch", revision=merged["revision"] - 1)
        revert_process(memory, None, id="fetch-copy", revision=merged["merged_revision"])
        fetch = get_process(memory, None, id="fetch")
        copy_back = get_process(memory, None, id="fetch-copy")
        assert (fetch["success_count"], fetch["failure_count"]) == (2, 1)
        assert "copy run" not in fetch["markdown"]
        assert (copy_back["success_count"], copy_back["failure_count"]) == (1, 0)
        assert "copy run" in copy_back["markdown"]


class TestStale:
    def test_mostly_failing_recent_outcomes_mark_a_process_stale(self, memory):
        save_process(memory, None, markdown=doc("fetch", "Fetch the parcel", PARCEL))
        save_process(memory, None, markdown=doc("water", "Water plants", "## Steps\n1. Fill\n"))
        record_outcome(memory, None, id="fetch", success=True)
        for _ in range(3):
            record_outcome(memory, None, id="fetch", success=False)
        flush(memory)
        summaries = {p["id"]: p for p in list_processes(memory, None)["processes"]}
        assert summaries["fetch"]["stale"] is False  # 3 of 4 failed, but 5 are needed...
        assert summaries["fetch"]["last_success"] is not None
        record_outcome(memory, None, id="fetch", success=False)
        flush(memory)
        summaries = {p["id"]: p for p in list_processes(memory, None)["processes"]}
        assert summaries["fetch"]["stale"] is True  # ... 4 of 5: stale
        assert summaries["water"]["stale"] is False
        found = find_processes(memory, None, query="fetch the parcel")["processes"][0]
        assert (found["id"], found["stale"]) == ("fetch", True)
        assert [p["id"] for p in list_processes(memory, None, stale=True)["processes"]] == ["fetch"]
        assert [p["id"] for p in list_processes(memory, None, stale=False)["processes"]] == [
            "water"
        ]
        # Successes bring it back; nothing was deleted.
        for _ in range(6):
            record_outcome(memory, None, id="fetch", success=True)
        flush(memory)
        assert list_processes(memory, None, stale=True)["processes"] == []


class TestImports:
    """What ``load`` calls on each backend: a record stored exactly as given, then
    skipped when the same, a conflict (nothing written) when not."""

    def test_groups_and_robots_are_inserted_skipped_or_in_conflict(self, memory):
        from robot_mcp_memory._exceptions import FleetError
        from robot_mcp_memory.fleet import Group, Robot

        stamp = "2026-01-02T03:04:05Z"
        group = Group("line-a", "Line A", "ACME", None, False, stamp, stamp)
        robot = Robot("rap-1", "line-a", "Räp", {"arm": "ur5"}, stamp, stamp)
        fleet = memory.fleet
        assert fleet.import_group(group) == "inserted"
        assert fleet.import_group(group) == "skipped"
        assert fleet.import_group(Group("line-a", "Other", None, None, None, stamp, stamp)) == (
            "conflict"
        )
        assert fleet.import_robot(robot) == "inserted"
        assert fleet.import_robot(robot) == "skipped"
        assert fleet.import_robot(Robot("rap-1", None, None, {}, stamp, stamp)) == "conflict"
        assert fleet.get_robot("rap-1") == robot  # exactly as given, the conflict wrote nothing
        stored = fleet.get_group("line-a")
        assert (stored.name, stored.self_improve, stored.created) == ("Line A", False, stamp)
        with pytest.raises(FleetError) as info:
            fleet.import_robot(Robot("rap-2", "no-such-line", None, {}, stamp, stamp))
        assert info.value.code == "not_found"
        assert fleet.get_robot("rap-2") is None

    def test_a_document_is_stored_exactly_then_skipped_or_suffixed(self, memory):
        from robot_mcp_memory.processes import ProcessDoc

        text = doc(
            "fetch",
            "Fetch",
            PARCEL,
            created="2025-05-01T08:00:00Z",
            updated="2025-06-01T08:00:00Z",
            success_count=7,
            failure_count=2,
        )
        original = ProcessDoc.parse(text)
        processes = memory.processes
        first = processes.import_document(original)
        assert (first.action, first.id) == ("inserted", "fetch")
        assert processes.get("fetch").render() == original.render()
        assert processes.import_document(original).action == "skipped"
        other = ProcessDoc.parse(text.replace("Fetch\n", "Fetch it\n", 1))
        assert processes.import_document(other).action == "conflict"
        assert processes.get("fetch").title == "Fetch"
        moved = processes.import_document(other, suffix=True)
        assert (moved.action, moved.id) == ("suffixed", "fetch-2")
        assert processes.get("fetch-2").success_count == 7


class TestTenancy:
    @pytest.fixture
    def fleet(self, memory):
        memory.fleet.upsert_group("line-a")
        memory.fleet.upsert_group("line-b")
        memory.fleet.register_robot("rap-1", group_id="line-a")
        memory.fleet.register_robot("rap-2", group_id="line-b")
        return memory

    def test_a_robot_sees_revisions_and_near_copies_only_inside_its_scope(self, fleet):
        rap1, rap2 = Tenant.for_robot("rap-1"), Tenant.for_robot("rap-2")
        save_process(fleet, rap2, markdown=doc("b-fetch", "Fetch the parcel", PARCEL))
        save_process(fleet, rap2, markdown=doc("b-fetch", "Fetch the parcel", PARCEL + "x\n"))
        mine = save_process(fleet, rap1, markdown=doc("a-fetch", "Fetch the parcel", PARCEL))
        assert mine["near_duplicates"] == []  # line-b's copy is not line-a's to see
        admin_view = memory_near(fleet, "a-fetch")
        assert admin_view == ["b-fetch"]
        hidden = _failure(get_process, fleet, rap1, id="b-fetch", revision=1)
        assert hidden.code == "not_found"
        assert get_process(fleet, rap2, id="b-fetch", revision=1)["revision"] == 1
        for tool, args in (
            (revert_process, {"id": "a-fetch", "revision": 1}),
            (merge_processes, {"keep_id": "a-fetch", "merge_id": "b-fetch"}),
        ):
            assert _failure(tool, fleet, rap1, **args).code == "forbidden"

    async def test_a_scoped_connection_lists_no_admin_tool(self, settings):
        """A robot's planner is not offered the tools that would only answer forbidden."""
        async with client(settings) as session:
            admin = {t.name for t in (await session.list_tools()).tools}
        async with client(settings, Tenant.for_robot("rap-1")) as session:
            scoped = {t.name for t in (await session.list_tools()).tools}
            refused = await call(session, "reindex")
        assert admin >= ADMIN_TOOLS
        assert len(admin) == 20
        assert scoped == admin - ADMIN_TOOLS
        assert len(scoped) == 13
        assert refused["error"] == "forbidden"


SECRET = "cage code 7391"


def coil(id: str, robot: str, step: str, **fields: object) -> str:
    return doc(id, "Copper coil intake", f"## Steps\n1. {step}\n", robot=robot, **fields)


class TestLives:
    """Issue 32, finding 1: an id freed by a delete, a merge or an admin delete and saved
    again starts a new life whose earlier revisions no robot lists, reads or reverts to;
    each kept revision is read by the owner it had; the admin reads every life."""

    @pytest.fixture
    def fleet(self, memory):
        memory.fleet.upsert_group("line-a")
        memory.fleet.upsert_group("line-b")
        memory.fleet.register_robot("rap-1", group_id="line-a")
        memory.fleet.register_robot("rap-3", group_id="line-a")
        memory.fleet.register_robot("rap-2", group_id="line-b")
        return memory

    def _freed(self, memory: Memory, how: str, id: str) -> None:
        """line-b's rap-2 saves ``id`` twice (a secret in each), then ``how`` frees it."""
        rap2 = Tenant.for_robot("rap-2")
        for step in (f"open the cage with {SECRET}", f"open the cage twice, {SECRET}"):
            assert save_process(memory, rap2, markdown=coil(id, "rap-2", step))["id"] == id
        if how == "merge":
            save_process(memory, rap2, markdown=coil("b-keep", "rap-2", "keep the coil"))
            merged = merge_processes(memory, None, keep_id="b-keep", merge_id=id)
            assert (merged["merged_revision"], merged["merged_life"]) == (2, 1)
        else:
            deleter = rap2 if how == "delete" else None
            assert delete_process(memory, deleter, id=id) == {"deleted": id}

    @pytest.mark.parametrize("how", ["delete", "admin delete", "merge"])
    def test_a_recreated_id_shows_its_new_robot_nothing_of_the_earlier_life(self, fleet, how):
        self._freed(fleet, how, "coil")
        rap1 = Tenant.for_robot("rap-1")
        mine = save_process(fleet, rap1, markdown=coil("coil", "rap-1", "sweep the floor"))
        assert (mine["id"], mine["inserted"], mine["revision"]) == ("coil", True, 1)
        now = get_process(fleet, rap1, id="coil")
        assert (now["revision"], now["current_revision"], now["revisions"]) == (1, 1, [])
        assert "life" not in now
        assert "lives" not in now
        hidden = _failure(get_process, fleet, rap1, id="coil", revision=2)
        assert hidden.code == "not_found"
        assert "kept: none" in hidden.detail
        assert _failure(get_process, fleet, rap1, id="coil", life=1).code == "forbidden"
        assert _failure(revert_process, fleet, rap1, id="coil", revision=2).code == "forbidden"
        assert SECRET not in json.dumps([now, hidden.detail])
        # Its own second version is revision 2 of the new life, and that is all it lists.
        save_process(fleet, rap1, markdown=coil("coil", "rap-1", "sweep the floor twice"))
        assert [r["revision"] for r in get_process(fleet, rap1, id="coil")["revisions"]] == [1]

        admin = get_process(fleet, None, id="coil")
        assert (admin["life"], admin["lives"], admin["revision"]) == (2, [1, 2], 2)
        earlier = get_process(fleet, None, id="coil", life=1)
        assert (earlier["life"], earlier["revision"], earlier["robot"]) == (1, 2, "rap-2")
        assert SECRET in earlier["markdown"]
        assert [r["revision"] for r in earlier["revisions"]] == [2, 1]
        assert earlier["revisions"][0]["reason"] == ("merged" if how == "merge" else "delete")
        first = get_process(fleet, None, id="coil", life=1, revision=1)
        assert "open the cage with" in first["markdown"]
        missing = _failure(get_process, fleet, None, id="coil", life=3)
        assert missing.code == "not_found"
        elsewhere = _failure(get_process, fleet, None, id="coil", revision=5)
        assert "other lives: 1, read with life=n" in elsewhere.detail

    def test_the_admin_brings_an_earlier_life_back_into_the_current_one(self, fleet):
        self._freed(fleet, "delete", "coil")
        rap1 = Tenant.for_robot("rap-1")
        save_process(fleet, rap1, markdown=coil("coil", "rap-1", "sweep the floor"))
        back = revert_process(fleet, None, id="coil", revision=1, life=1)
        assert (back["revision"], back["robot"], back["recreated"]) == (2, "rap-2", False)
        # Now line-b's document again: rap-2 reads it and its current life, in which
        # rap-1's version stays line-a's.
        rap2 = Tenant.for_robot("rap-2")
        got = get_process(fleet, rap2, id="coil")
        assert SECRET in got["markdown"]
        assert got["revisions"] == []
        assert _failure(get_process, fleet, rap2, id="coil", revision=1).code == "not_found"
        unknown = _failure(revert_process, fleet, None, id="coil", revision=9, life=1)
        assert "in life 1" in unknown.detail

    def test_a_revert_of_a_deleted_id_resumes_its_life(self, fleet):
        """Undoing a delete brings the document back with its own history."""
        rap2 = Tenant.for_robot("rap-2")
        save_process(fleet, rap2, markdown=coil("coil", "rap-2", "open the cage"))
        save_process(fleet, rap2, markdown=coil("coil", "rap-2", "open the cage twice"))
        delete_process(fleet, rap2, id="coil")
        back = revert_process(fleet, None, id="coil", revision=2)
        assert (back["recreated"], back["revision"]) == (True, 3)
        got = get_process(fleet, rap2, id="coil")
        assert [r["revision"] for r in got["revisions"]] == [2, 1]
        assert get_process(fleet, None, id="coil")["lives"] == [1]

    def test_each_revision_is_read_by_the_owner_it_had(self, fleet):
        """rap-3 (line-a) took over rap-1's document, then moved to line-b: line-b reads
        the versions rap-3 and the admin wrote, never rap-1's; a version that was
        fleet-wide is everyone's."""
        rap1, rap2, rap3 = (Tenant.for_robot(f"rap-{n}") for n in (1, 2, 3))
        save_process(fleet, rap1, markdown=coil("bench", "rap-1", f"press with {SECRET}"))
        taken = save_process(fleet, rap3, markdown=coil("bench", "rap-3", "press the bench"))
        assert (taken["inserted"], taken["revision"]) == (False, 2)
        fleet.fleet.set_group("rap-3", "line-b")
        for robot in (rap2, rap3):
            now = get_process(fleet, robot, id="bench")
            assert now["revisions"] == []
            hidden = _failure(get_process, fleet, robot, id="bench", revision=1)
            assert hidden.code == "not_found"
            assert SECRET not in json.dumps([now, hidden.detail])
        assert _failure(get_process, fleet, rap1, id="bench").code == "not_found"
        # The admin makes it fleet-wide: line-a reads it again, and of its versions its
        # own (rap-1's), not rap-3's (line-b's).
        save_process(fleet, None, markdown=coil("bench", "rap-3", "press it", shared="true"))
        seen = get_process(fleet, rap1, id="bench")
        assert [r["revision"] for r in seen["revisions"]] == [1]
        assert SECRET in get_process(fleet, rap1, id="bench", revision=1)["markdown"]
        assert _failure(get_process, fleet, rap1, id="bench", revision=2).code == "not_found"
        # Once it is saved again as line-b's, the fleet-wide version is line-b's to read too.
        save_process(fleet, None, markdown=coil("bench", "rap-3", "press it again"))
        assert [r["revision"] for r in get_process(fleet, rap2, id="bench")["revisions"]] == [
            3,
            2,
        ]

    def test_a_merge_undo_names_the_life_and_works_after_the_id_is_taken_again(self, fleet):
        save_process(fleet, None, markdown=coil("keep", "rap-2", "keep the coil"))
        save_process(fleet, None, markdown=coil("gone", "rap-2", "the coil that goes"))
        record_outcome(fleet, None, id="gone", success=True)
        flush(fleet)
        merged = merge_processes(fleet, None, keep_id="keep", merge_id="gone")
        assert "revision=1, life=1)" in merged["undo"]
        save_process(fleet, None, markdown=coil("gone", "rap-1", "another coil"))
        revert_process(fleet, None, id="keep", revision=merged["revision"] - 1)
        back = revert_process(
            fleet,
            None,
            id="gone",
            revision=merged["merged_revision"],
            life=merged["merged_life"],
        )
        assert "the coil that goes" in get_process(fleet, None, id="gone")["markdown"]
        assert back["revision"] == 2  # a new revision of the id's current life
        keep = get_process(fleet, None, id="keep")
        assert keep["success_count"] == 0  # the merge's counts went with its undo


class TestLivesThroughOperations:
    """A backup restores every life with its owners; a loaded document that takes a freed
    id starts a new life."""

    def test_a_backup_restores_every_life_and_the_owners_that_guard_them(self, tmp_path):
        from robot_mcp_memory.operations import backup, restore

        settings = Settings(data_dir=tmp_path / "data", search="lexical")
        memory = open_memory(settings)
        try:
            memory.fleet.upsert_group("line-a")
            memory.fleet.upsert_group("line-b")
            memory.fleet.register_robot("rap-1", group_id="line-a")
            memory.fleet.register_robot("rap-2", group_id="line-b")
            TestLives()._freed(memory, "delete", "coil")
            rap1 = Tenant.for_robot("rap-1")
            save_process(memory, rap1, markdown=coil("coil", "rap-1", "sweep the floor"))
            save_process(memory, rap1, markdown=coil("coil", "rap-1", "sweep it twice"))
        finally:
            memory.close()
        backup(settings, tmp_path / "backup")
        elsewhere = settings.model_copy(update={"data_dir": tmp_path / "restored"})
        restore(elsewhere, tmp_path / "backup")
        restored = open_memory(elsewhere)
        try:
            mine = get_process(restored, Tenant.for_robot("rap-1"), id="coil")
            assert [r["revision"] for r in mine["revisions"]] == [1]
            assert SECRET not in json.dumps(mine)
            admin = get_process(restored, None, id="coil")
            assert (admin["life"], admin["lives"]) == (2, [1, 2])
            assert SECRET in get_process(restored, None, id="coil", life=1)["markdown"]
            (kept,) = restored.processes.revisions("coil")
            assert (kept.robot, kept.shared) == ("rap-1", False)
        finally:
            restored.close()

    def test_a_loaded_document_on_a_freed_id_starts_a_new_life(self, memory):
        from robot_mcp_memory.processes import ProcessDoc

        memory.fleet.upsert_group("line-a")
        memory.fleet.upsert_group("line-b")
        memory.fleet.register_robot("rap-1", group_id="line-a")
        memory.fleet.register_robot("rap-2", group_id="line-b")
        TestLives()._freed(memory, "delete", "coil")
        loaded = memory.processes.import_document(
            ProcessDoc.parse(coil("coil", "rap-1", "sweep the floor"))
        )
        assert (loaded.action, loaded.id) == ("inserted", "coil")
        got = get_process(memory, Tenant.for_robot("rap-1"), id="coil")
        assert (got["revision"], got["revisions"]) == (1, [])
        assert get_process(memory, None, id="coil")["lives"] == [1, 2]


class TestMayReadRevision:
    """The rule itself: a revision's own owner against what the call may read, as the
    registry says at the call."""

    def test_each_owner_is_judged_as_a_document_would_be(self, memory):
        from robot_mcp_memory._policy import may_read_revision, visible_robots

        memory.fleet.upsert_group("line-a")
        memory.fleet.register_robot("rap-1", group_id="line-a")
        memory.fleet.register_robot("rap-3", group_id="line-a")
        memory.fleet.register_robot("rap-2")
        rap1 = Tenant.for_robot("rap-1")
        visible = visible_robots(memory.fleet, None, rap1)
        assert may_read_revision(visible, "rap-1", False)
        assert may_read_revision(visible, "rap-3", False)  # its group's
        assert not may_read_revision(visible, "rap-2", False)
        assert may_read_revision(visible, "rap-2", True)  # fleet-wide then
        assert not may_read_revision(visible, None, False)  # owner not known
        assert not may_read_revision(visible, None, True)
        for admin in (None, Tenant(name="admin")):
            everything = visible_robots(memory.fleet, None, admin)
            assert may_read_revision(everything, None, False)
            assert may_read_revision(everything, "rap-2", False)
        memory.fleet.set_group("rap-3", None)  # regrouped: the next call judges anew
        again = visible_robots(memory.fleet, None, rap1)
        assert not may_read_revision(again, "rap-3", False)


def memory_near(memory: Memory, id: str) -> list[str]:
    return [n.id for n in memory.processes.near_duplicates(id)]


def _failure(handler, memory, tenant, **args):
    from robot_mcp_memory._exceptions import ToolFailure

    with pytest.raises(ToolFailure) as info:
        handler(memory, tenant, **args)
    return info.value


WHOLE_NUMBER_CASES = [
    ("get_process", {"id": "fetch", "life": 2**63}, "life", "at most 9223372036854775807"),
    ("get_process", {"id": "fetch", "revision": 2**64}, "revision", "at most"),
    ("get_process", {"id": "fetch", "life": True}, "life", "got true (a boolean)"),
    ("get_process", {"id": "fetch", "revision": True}, "revision", "got true (a boolean)"),
    ("revert_process", {"id": "fetch", "revision": 1, "life": 2**64}, "life", "at most"),
    ("revert_process", {"id": "fetch", "revision": 2**64}, "revision", "at most"),
    ("revert_process", {"id": "fetch", "revision": True}, "revision", "(a boolean)"),
    ("revert_process", {"id": "fetch", "revision": 0}, "revision", "must be >= 1, got 0"),
    ("save_process", {"expected_revision": 2**64}, "expected_revision", "at most"),
    ("save_process", {"expected_revision": False}, "expected_revision", "(a boolean)"),
    ("list_processes", {"offset": 2**64}, "offset", "at most"),
    ("list_processes", {"limit": True}, "limit", "(a boolean)"),
]


class TestWholeNumberArguments:
    """A revision, life, expected revision, limit or offset the stores cannot hold (beyond
    2**63 - 1), or a boolean, is refused as invalid naming the argument before any store
    is asked; on SQLite such a number was an internal error, and true read as 1."""

    @pytest.mark.parametrize(("tool", "args", "field", "says"), WHOLE_NUMBER_CASES)
    async def test_refused_naming_the_argument(self, settings, tool, args, field, says):
        async with client(settings) as session:
            first = await call(session, "save_process", markdown=doc("fetch", "Fetch", PARCEL))
            await call(session, "save_process", markdown=doc("fetch", "Fetch", PARCEL + "5.\n"))
            if tool == "save_process":
                args = {"markdown": doc("fetch", "Fetch", PARCEL), **args}
            answer = await call(session, tool, **args)
            assert (answer["error"], answer["field"]) == ("invalid", field), answer
            assert says in answer["detail"], answer
            now = await call(session, "get_process", id="fetch")
            assert (now["revision"], now["lives"]) == (2, [1])  # nothing was reverted or saved
        assert first["revision"] == 1

    async def test_the_largest_whole_number_is_asked_for_and_not_found(self, settings):
        """2**63 - 1 is in range: the store is asked and answers not_found."""
        async with client(settings) as session:
            await call(session, "save_process", markdown=doc("fetch", "Fetch", PARCEL))
            largest = 2**63 - 1
            for tool, args in (
                ("get_process", {"revision": largest}),
                ("get_process", {"life": largest}),
                ("revert_process", {"revision": largest}),
            ):
                answer = await call(session, tool, id="fetch", **args)
                assert answer["error"] == "not_found", (tool, args, answer)
