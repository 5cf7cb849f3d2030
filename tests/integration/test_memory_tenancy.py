"""Issue 10, memory spec §6a: per-robot tokens confine every tool, over real SSE and
streamable HTTP, against the server as a child process.

The fleet: group ``line-a`` (rap-1, rap-2), group ``line-b`` (rap-3), rap-4 ungrouped.
Documents: one per robot (``doc-rap-N``) and one fleet-wide (``fleet-wide``, shared).
Each test acts through a robot token and checks the §6a row it is about, including that
an out-of-scope document cannot be told from a missing one.
"""

from __future__ import annotations

import json
import re

import anyio
import httpx
import pytest

TOKEN = "integration-token-7f3a"  # the admin token the conftest's spawn() sets

pytestmark = pytest.mark.slow

TOKENS = {f"rap-{n}": f"robot-token-rap-{n}-{'x' * 12}" for n in range(1, 5)}
ROBOT_TOKENS = ",".join(f"{robot}:{token}" for robot, token in TOKENS.items())
MEMBERS = {"line-a": ("rap-1", "rap-2"), "line-b": ("rap-3",)}


def doc(id: str, robot: str, *, shared: bool = False, mission: str = "m-1") -> str:
    extra = "shared: true\n" if shared else ""
    return (
        f"---\nid: {id}\ntitle: Fetch the parcel from the mailroom ({id})\nrobot: {robot}\n"
        f"source_mission_id: {mission}\n{extra}---\n\n## Steps\n1. go to the mailroom\n"
    )


@pytest.fixture(params=["sse", "streamable-http"])
def fleet(request, spawn, mcp_call):
    """A running server with the fleet seeded by the admin."""
    return seeded(
        spawn(transport=request.param, env={"MEMORY_ROBOT_TOKENS": ROBOT_TOKENS}), mcp_call
    )


def seeded(server, mcp_call):
    """``server`` with the fleet seeded by the admin."""

    async def seed() -> None:
        async with server.session() as admin:
            for group, robots in MEMBERS.items():
                await mcp_call(admin, "upsert_group", group_id=group, customer="acme")
                for robot in robots:
                    await mcp_call(admin, "register_robot", robot_id=robot, group_id=group)
            await mcp_call(admin, "register_robot", robot_id="rap-4")
            await mcp_call(admin, "set_self_improve", enabled=True)
            for n in range(1, 5):
                await mcp_call(admin, "save_process", markdown=doc(f"doc-rap-{n}", f"rap-{n}"))
            await mcp_call(admin, "save_process", markdown=doc("fleet-wide", "rap-3", shared=True))

    anyio.run(seed)
    return server


def ids(answer: dict) -> set[str]:
    return {p["id"] for p in answer["processes"]}


def same_shape(out_of_scope: dict, missing: dict, hidden: str, absent: str) -> None:
    """An out-of-scope answer equals a missing-id answer but for the id it names."""
    assert json.loads(json.dumps(out_of_scope).replace(hidden, absent)) == missing


async def test_reads_are_confined_and_cannot_tell_out_of_scope_from_missing(fleet, mcp_call):
    """find/get/list: own group + shared; robot= cannot escape; out of scope reads as absent."""
    async with fleet.session(TOKENS["rap-1"]) as s:
        visible = {"doc-rap-1", "doc-rap-2", "fleet-wide"}
        assert ids(await mcp_call(s, "find_processes", query="parcel mailroom", k=50)) == visible
        escaped = await mcp_call(s, "find_processes", query="parcel", k=50, robot="rap-3")
        assert ids(escaped) == visible
        assert ids(await mcp_call(s, "list_processes")) == visible
        assert ids(await mcp_call(s, "list_processes", robot="rap-3")) == visible
        for tool, args in (
            ("get_process", {}),
            ("record_outcome", {"success": True}),
            ("delete_process", {}),
        ):
            hidden = await mcp_call(s, tool, id="doc-rap-3", **args)
            missing = await mcp_call(s, tool, id="doc-rap-9", **args)
            assert hidden["error"] == "not_found", (tool, hidden)
            same_shape(hidden, missing, "doc-rap-3", "doc-rap-9")
        assert (await mcp_call(s, "get_process", id="doc-rap-2"))["robot"] == "rap-2"
    async with fleet.session(TOKENS["rap-4"]) as s:  # ungrouped: its own and the shared
        assert ids(await mcp_call(s, "list_processes")) == {"doc-rap-4", "fleet-wide"}
    async with fleet.session() as admin:  # the admin sees all; robot= narrows
        assert len(ids(await mcp_call(admin, "list_processes"))) == 5
        narrowed = await mcp_call(admin, "list_processes", robot="rap-3")
        assert ids(narrowed) == {"doc-rap-3", "fleet-wide"}


async def test_writes_are_pinned_and_confined(fleet, mcp_call):
    """save/record_outcome/delete as §6a says; the refused ones change nothing."""
    async with fleet.session(TOKENS["rap-1"]) as s:
        mine = await mcp_call(s, "save_process", markdown=doc("new-one", "unknown"))
        assert mine["robot"] == "rap-1"
        for markdown in (
            doc("foreign-robot", "rap-3"),
            doc("new-shared", "rap-1", shared=True),
        ):
            out = await mcp_call(s, "save_process", markdown=markdown)
            assert out["error"] == "forbidden", out
        # An id another group holds (or a shared one) is passed over like another
        # mission's, whatever its mission id: suffixed, never an update and never refused.
        for taken in ("doc-rap-3", "fleet-wide"):
            moved = await mcp_call(s, "save_process", markdown=doc(taken, "rap-1"))
            assert (moved["id"], moved["robot"], moved["renamed_from"]) == (
                f"{taken}-2",
                "rap-1",
                taken,
            ), moved
            assert moved["inserted"] is True
        other = await mcp_call(s, "save_process", markdown=doc("doc-rap-3", "rap-1", mission="m-2"))
        assert (other["id"], other["renamed_from"]) == ("doc-rap-3-3", "doc-rap-3")
        assert (await mcp_call(s, "record_outcome", id="fleet-wide", success=True))["id"]
        refused = await mcp_call(s, "delete_process", id="fleet-wide")
        assert refused["error"] == "forbidden"
        assert await mcp_call(s, "delete_process", id="doc-rap-2") == {"deleted": "doc-rap-2"}
    async with fleet.session() as admin:
        original = await mcp_call(admin, "get_process", id="doc-rap-3")
        assert original["robot"] == "rap-3"
        assert "(doc-rap-3)" in original["title"]
        assert (await mcp_call(admin, "get_process", id="fleet-wide"))["shared"] is True


async def test_registry_and_administration(fleet, mcp_call):
    """register/meta only for itself; lists only its group; administration is forbidden."""
    async with fleet.session(TOKENS["rap-1"]) as s:
        assert (await mcp_call(s, "register_robot", robot_id="rap-1", name="Rap one"))["name"]
        assert (await mcp_call(s, "set_robot_meta", robot_id="rap-1", meta={"arm": "ur5"}))["meta"]
        for tool, args in (
            ("register_robot", {"robot_id": "rap-2"}),
            ("register_robot", {"robot_id": "rap-1", "group_id": "line-b"}),
            ("set_robot_meta", {"robot_id": "rap-3", "meta": {}}),
            ("set_group", {"robot_id": "rap-1", "group_id": "line-b"}),
            ("upsert_group", {"group_id": "line-c"}),
            ("delete_group", {"group_id": "line-b"}),
            ("set_self_improve", {"enabled": False}),
            ("set_self_improve", {"enabled": False, "group_id": "line-a"}),
            ("reindex", {}),
        ):
            out = await mcp_call(s, tool, **args)
            assert out["error"] == "forbidden", (tool, out)
            assert out["detail"]
        robots = await mcp_call(s, "list_robots")
        assert [r["robot_id"] for r in robots["robots"]] == ["rap-1", "rap-2"]
        groups = await mcp_call(s, "list_groups")
        assert [g["group_id"] for g in groups["groups"]] == ["line-a"]
    async with fleet.session(TOKENS["rap-4"]) as s:
        assert [r["robot_id"] for r in (await mcp_call(s, "list_robots"))["robots"]] == ["rap-4"]
        assert (await mcp_call(s, "list_groups"))["groups"] == []
    async with fleet.session() as admin:
        robots = await mcp_call(admin, "list_robots")
        assert len(robots["robots"]) == 4
        assert (await mcp_call(admin, "list_groups"))["global_self_improve"] is True
        conflict = await mcp_call(admin, "delete_group", group_id="line-b")
        assert conflict["error"] == "conflict"
        assert "rap-3" in conflict["detail"]


async def test_regrouping_moves_what_a_robot_sees_at_once(fleet, mcp_call):
    """After set_group, the next call of a live session sees the new group's documents."""
    async with fleet.session(TOKENS["rap-1"]) as s:
        assert "doc-rap-3" not in ids(await mcp_call(s, "list_processes"))
        async with fleet.session() as admin:
            await mcp_call(admin, "set_group", robot_id="rap-3", group_id="line-a")
        assert "doc-rap-3" in ids(await mcp_call(s, "list_processes"))
        assert (await mcp_call(s, "get_process", id="doc-rap-3"))["robot"] == "rap-3"


async def test_lessons_act_as_the_tenant_and_stay_in_its_group(fleet, mcp_call):
    """A lesson recorded by rap-1 (whatever robot= says) is recalled by rap-2, not rap-3."""
    lesson = {"skill": "grasp.mug", "params": {"offset_mm": 12}, "place": "kitchen"}
    async with fleet.session(TOKENS["rap-1"]) as s:
        recorded = await mcp_call(s, "record_params", robot="rap-3", **lesson)
        assert recorded["recorded"] is True
        assert recorded["scope"] == "group:line-a"
        secret = await mcp_call(
            s, "record_params", robot="rap-1", skill="grasp.cup", params={"z": 1}, private=True
        )
        assert secret["scope"] == "robot:rap-1"
    async with fleet.session(TOKENS["rap-2"]) as s:
        found = await mcp_call(
            s, "recall_params", robot="rap-2", skill="grasp.mug", place="kitchen"
        )
        assert found["lesson"]["params"] == {"offset_mm": 12}
        listed = await mcp_call(s, "list_lessons", robot="rap-1")
        assert {lsn["scope"] for lsn in listed["lessons"]} == {"group:line-a"}
        assert (await mcp_call(s, "recall_params", robot="rap-1", skill="grasp.cup"))[
            "lesson"
        ] is None
    async with fleet.session(TOKENS["rap-3"]) as s:
        other = await mcp_call(
            s, "recall_params", robot="rap-1", skill="grasp.mug", place="kitchen"
        )
        assert other["lesson"] is None
        assert (await mcp_call(s, "list_lessons"))["lessons"] == []
    async with fleet.session() as admin:
        everything = await mcp_call(admin, "list_lessons")
        assert {lsn["scope"] for lsn in everything["lessons"]} == {"group:line-a", "robot:rap-1"}


@pytest.mark.parametrize("transport", ["sse", "streamable-http"])
def test_no_token_wrong_token_prefix_and_other_schemes_are_401(spawn, transport):
    """Every way of not presenting a valid token is 401 with a Bearer challenge."""
    server = spawn(transport=transport, env={"MEMORY_ROBOT_TOKENS": ROBOT_TOKENS})
    path = "/sse" if transport == "sse" else "/mcp"
    token = TOKENS["rap-1"]
    for headers in (
        {},
        {"Authorization": "Bearer wrong-token-0123456789"},
        {"Authorization": f"Bearer {token[:-1]}"},
        {"Authorization": f"Bearer {token}x"},
        {"Authorization": f"Basic {token}"},
        {"Authorization": token},
    ):
        if transport == "sse":
            reply = httpx.get(server.base + path, headers=headers, timeout=5)
        else:
            reply = httpx.post(server.base + path, headers=headers, json={}, timeout=5)
        assert reply.status_code == 401, headers
        assert reply.headers["www-authenticate"].startswith("Bearer")
        assert token not in reply.text


def test_posting_into_another_tenants_sse_session_is_403_and_not_executed(spawn, mcp_initialize):
    """rap-1 opens an SSE session; rap-2's and the admin's posts to it are refused, unrun."""
    server = spawn(transport="sse", env={"MEMORY_ROBOT_TOKENS": ROBOT_TOKENS})

    def auth(robot: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {TOKENS[robot] if robot else TOKEN}"}

    with (
        httpx.Client(base_url=server.base, timeout=10) as http,
        http.stream("GET", "/sse", headers=auth("rap-1")) as stream,
    ):
        endpoint = None
        lines = stream.iter_lines()  # kept referenced: a dropped iterator closes the stream
        for line in lines:
            found = re.match(r"data: (/messages/\?session_id=\w+)", line)
            if found:
                endpoint = found.group(1)
                break
        assert endpoint is not None
        assert http.post(endpoint, json=mcp_initialize, headers=auth("rap-1")).status_code == 202
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "upsert_group", "arguments": {"group_id": "hijacked"}},
        }
        for intruder in ("rap-2", None):
            refused = http.post(endpoint, json=call, headers=auth(intruder))
            assert refused.status_code == 403
            assert refused.json()["error"] == "forbidden"
        # The opener itself is still served on its session.
        listed = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}
        http.post(
            endpoint,
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            headers=auth("rap-1"),
        )
        assert http.post(endpoint, json=listed, headers=auth("rap-1")).status_code == 202
        assert any('"id":3' in line.replace(" ", "") for line in lines)
    groups = httpx.get(server.base + "/healthz", timeout=5)
    assert groups.status_code == 200
    events = [e for e in server.log_events() if e.get("event") == "tool_call"]
    assert not [e for e in events if e.get("tool") == "upsert_group"]  # nothing executed
    assert sum(e.get("event") == "session_tenant_mismatch" for e in server.log_events()) == 2


def test_a_streamable_http_session_used_with_another_token_is_refused_unrun(
    spawn, mcp_initialize, mcp_accept
):
    """The admin opens a session; rap-3's calls on it are answered like an unknown session
    and never run (decision 0020); the admin's own calls on it go on."""
    server = spawn(
        transport="streamable-http", env={"MEMORY_ROBOT_TOKENS": ROBOT_TOKENS}, token=TOKEN
    )

    def rpc(http: httpx.Client, token: str, session: str | None, body: dict) -> httpx.Response:
        headers = {**mcp_accept, "Authorization": f"Bearer {token}"}
        if session:
            headers["mcp-session-id"] = session
        return http.post("/mcp", json=body, headers=headers)

    def result(reply: httpx.Response) -> dict:
        text = reply.text
        if "data:" in text:
            text = next(x[5:] for x in text.splitlines() if x.startswith("data:"))
        return json.loads(json.loads(text)["result"]["content"][0]["text"])

    with httpx.Client(base_url=server.base, timeout=10) as http:
        session = rpc(http, TOKEN, None, mcp_initialize).headers["mcp-session-id"]
        rpc(http, TOKEN, session, {"jsonrpc": "2.0", "method": "notifications/initialized"})

        def call(token: str, name: str, arguments: dict, id: int) -> httpx.Response:
            body = {
                "jsonrpc": "2.0",
                "id": id,
                "method": "tools/call",
                "params": {"name": name, "arguments": arguments},
            }
            return rpc(http, token, session, body)

        saved = result(call(TOKEN, "save_process", {"markdown": doc("admin-doc", "rap-1")}, 2))
        assert saved["robot"] == "rap-1"
        for name, arguments in (
            ("get_process", {"id": "admin-doc"}),
            ("upsert_group", {"group_id": "g"}),
        ):
            refused = call(TOKENS["rap-3"], name, arguments, 3)
            assert refused.status_code == 404
            assert refused.json()["error"]["message"] == "Session not found"
        assert result(call(TOKEN, "get_process", {"id": "admin-doc"}, 5))["id"] == "admin-doc"
        assert result(call(TOKEN, "list_groups", {}, 6))["groups"] == []  # "g" was never made


@pytest.mark.parametrize(
    ("tokens", "names"),
    [
        ("rap-1", "entry 1 has no ':'"),
        ("rap-1:short", "at least 16"),
        (f"rap-1:{TOKENS['rap-1']},rap-1:{TOKENS['rap-2']}", "given twice"),
        (f"rap-1:{TOKENS['rap-1']},rap-2:{TOKENS['rap-1']}", "already robot 'rap-1'"),
        (f"rap-1:{TOKEN}", "equals MEMORY_TOKEN"),
    ],
)
def test_malformed_robot_tokens_refuse_to_start(tmp_path, tokens, names, run_memory_server):
    """A bad MEMORY_ROBOT_TOKENS: exit 2, one line naming the entry, never a token."""
    result = run_memory_server(
        {"MEMORY_DATA_DIR": str(tmp_path), "MEMORY_TOKEN": TOKEN, "MEMORY_ROBOT_TOKENS": tokens}
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert "MEMORY_ROBOT_TOKENS" in result.stderr
    assert names in result.stderr
    for secret in (*TOKENS.values(), TOKEN):
        assert secret not in result.stderr
    assert not (tmp_path / "index.db").exists()


class TestOperationsTenancy:
    """Issue 22, item 6: revisions, near-copies and staleness within the robot's scope; the
    admin tools are left out of a robot's tools/list and answer forbidden. On each backend
    (SSE only: the transports are the module's other tests')."""

    @pytest.fixture(params=["sqlite", "postgres"])
    def fleet(self, request, spawn, mcp_call):
        env = {"MEMORY_ROBOT_TOKENS": ROBOT_TOKENS}
        if request.param == "postgres":
            env["MEMORY_DATABASE_URL"] = request.getfixturevalue("pg_url")
        return seeded(spawn(transport="sse", env=env), mcp_call)

    async def test_a_robot_lists_no_admin_tool_and_cannot_call_one(self, fleet, mcp_call):
        async with fleet.session() as admin:
            everything = {t.name for t in (await admin.list_tools()).tools}
        async with fleet.session(TOKENS["rap-1"]) as robot:
            offered = {t.name for t in (await robot.list_tools()).tools}
            for tool, args in (
                ("revert_process", {"id": "doc-rap-1", "revision": 1}),
                ("merge_processes", {"keep_id": "doc-rap-1", "merge_id": "doc-rap-2"}),
                ("reindex", {}),
            ):
                assert (await mcp_call(robot, tool, **args))["error"] == "forbidden"
        admin_only = {
            "reindex",
            "revert_process",
            "merge_processes",
            "set_group",
            "upsert_group",
            "delete_group",
            "set_self_improve",
        }
        assert len(everything) == 20
        assert offered == everything - admin_only

    async def test_revisions_and_near_copies_stay_inside_the_robots_scope(self, fleet, mcp_call):
        async with fleet.session(TOKENS["rap-1"]) as robot:
            read = await mcp_call(robot, "get_process", id="doc-rap-1")
            assert read["current_revision"] == 1
            edited = doc("doc-rap-1", "rap-1").replace("go to the mailroom", "take the lift")
            saved = await mcp_call(robot, "save_process", markdown=edited, expected_revision=1)
            assert saved["revision"] == 2
            near = {n["id"] for n in saved["near_duplicates"]}
            # Its group's and the fleet-wide documents may be named; line-b's never.
            assert near <= {"doc-rap-2", "fleet-wide"}
            assert "doc-rap-3" not in near
            stale_write = await mcp_call(
                robot, "save_process", markdown=edited, expected_revision=1
            )
            assert stale_write["error"] == "conflict"
            assert stale_write["current_revision"] == 2
            old = await mcp_call(robot, "get_process", id="doc-rap-1", revision=1)
            assert "go to the mailroom" in old["markdown"]
            hidden = await mcp_call(robot, "get_process", id="doc-rap-3", revision=1)
            missing = await mcp_call(robot, "get_process", id="no-such-doc", revision=1)
            assert hidden["error"] == missing["error"] == "not_found"
            listed = await mcp_call(robot, "list_processes", stale=False)
            assert ids(listed) == {"doc-rap-1", "doc-rap-2", "fleet-wide"}
        async with fleet.session() as admin:
            reverted = await mcp_call(admin, "revert_process", id="doc-rap-1", revision=1)
            assert reverted["revision"] == 3

    async def test_a_recreated_id_starts_a_new_life_its_robot_cannot_read(self, fleet, mcp_call):
        """Issue 32, finding 1: line-b's robot saves an id twice (a secret in the body), then
        the id is freed (its delete, a merge, an admin delete); line-a's robot saving the
        freed id starts a new life at revision 1 and can list, read and address none of the
        earlier life's revisions. The admin reads the earlier life with ``life``."""
        secret = "cage code 7391"

        def coil(id: str, robot: str, step: str) -> str:
            return (
                f"---\nid: {id}\ntitle: Copper coil intake\nrobot: {robot}\n---\n\n"
                f"## Steps\n1. {step}\n"
            )

        freed = ("copper-coil-intake", "coil-merged-away", "coil-admin-deleted")
        async with fleet.session(TOKENS["rap-3"]) as line_b:
            for id in freed:
                for step in (f"open the cage with {secret}", f"open the cage twice, {secret}"):
                    saved = await mcp_call(line_b, "save_process", markdown=coil(id, "rap-3", step))
                    assert saved["id"] == id, saved
            assert await mcp_call(line_b, "delete_process", id=freed[0]) == {"deleted": freed[0]}
        async with fleet.session() as admin:
            merged = await mcp_call(
                admin, "merge_processes", keep_id="doc-rap-3", merge_id=freed[1]
            )
            assert merged["merged_revision"] == 2
            assert await mcp_call(admin, "delete_process", id=freed[2]) == {"deleted": freed[2]}
        async with fleet.session(TOKENS["rap-1"]) as line_a:
            for id in freed:
                mine = await mcp_call(
                    line_a, "save_process", markdown=coil(id, "rap-1", "sweep the floor")
                )
                assert (mine["id"], mine["inserted"], mine["revision"]) == (id, True, 1), mine
                now = await mcp_call(line_a, "get_process", id=id)
                assert (now["revision"], now["current_revision"], now["revisions"]) == (1, 1, [])
                assert "life" not in now
                assert "lives" not in now
                answers = [now]
                for n in (2, 3):
                    old = await mcp_call(line_a, "get_process", id=id, revision=n)
                    assert old["error"] == "not_found", old
                    answers.append(old)
                refused = await mcp_call(line_a, "get_process", id=id, life=1)
                assert refused["error"] == "forbidden"
                answers.append(refused)
                reverted = await mcp_call(line_a, "revert_process", id=id, revision=1)
                assert reverted["error"] == "forbidden"
                assert secret not in json.dumps(answers)
        async with fleet.session() as admin:
            for id in freed:
                now = await mcp_call(admin, "get_process", id=id)
                assert (now["life"], now["lives"], now["robot"]) == (2, [1, 2], "rap-1"), now
                assert now["revisions"] == []
                earlier = await mcp_call(admin, "get_process", id=id, life=1)
                assert (earlier["life"], earlier["robot"]) == (1, "rap-3")
                assert secret in earlier["markdown"]
                assert earlier["revision"] == earlier["revisions"][0]["revision"] == 2
                first = await mcp_call(admin, "get_process", id=id, life=1, revision=1)
                assert "open the cage with" in first["markdown"]
            # The merge's undo names the life of the merged-away version.
            assert merged["merged_life"] == 1
            assert f"id={freed[1]!r}, revision=2, life=1" in merged["undo"]
            # The admin brings the earlier life's text back into the current life.
            back = await mcp_call(admin, "revert_process", id=freed[0], revision=1, life=1)
            assert (back["revision"], back["robot"], back["recreated"]) == (2, "rap-3", False)

    async def test_each_revision_is_read_by_the_owner_it_had(self, fleet, mcp_call):
        """Issue 32, finding 1: a document that changed hands inside one life (rap-2 of
        line-a updated rap-1's, then rap-2 moved to line-b) shows line-b only the versions
        whose own owner line-b may read: rap-1's revision stays line-a's."""
        secret = "line-a gate pin 4410"
        text = doc("bench-press", "rap-1").replace("go to the mailroom", secret)
        async with fleet.session(TOKENS["rap-1"]) as rap1:
            assert (await mcp_call(rap1, "save_process", markdown=text))["revision"] == 1
        async with fleet.session(TOKENS["rap-2"]) as rap2:
            update = doc("bench-press", "rap-2").replace("go to the mailroom", "press the bench")
            taken = await mcp_call(rap2, "save_process", markdown=update)
            assert (taken["inserted"], taken["revision"], taken["robot"]) == (False, 2, "rap-2")
        async with fleet.session() as admin:
            await mcp_call(admin, "set_group", robot_id="rap-2", group_id="line-b")
        for robot in ("rap-3", "rap-2"):  # line-b now
            async with fleet.session(TOKENS[robot]) as line_b:
                now = await mcp_call(line_b, "get_process", id="bench-press")
                assert (now["revision"], now["revisions"]) == (2, []), now
                old = await mcp_call(line_b, "get_process", id="bench-press", revision=1)
                assert old["error"] == "not_found"
                assert secret not in json.dumps([now, old])
        async with fleet.session(TOKENS["rap-1"]) as rap1:
            gone = await mcp_call(rap1, "get_process", id="bench-press", revision=1)
            assert gone["error"] == "not_found"  # the document is line-b's now
        async with fleet.session() as admin:
            everything = await mcp_call(admin, "get_process", id="bench-press", revision=1)
            assert secret in everything["markdown"]
