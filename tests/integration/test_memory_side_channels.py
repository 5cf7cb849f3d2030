"""Issue 18, findings 4, 5, 6: what a robot observes depends only on what it may read.

A real server over SSE (hybrid search, the default model when installed) with two groups:
``line-a`` (rap-1, the attacker) and ``line-b`` (rap-3, the other group). rap-1 probes with
finds — exact words, misspellings, words only line-b will hold — and with saves of ids
line-b holds. Every answer it gets must be byte-identical whether or not line-b holds
documents with the probed words, and a save's answer must not depend on the mission id
of a document it may not read.
"""

from __future__ import annotations

import json
import random

import anyio
import pytest

pytestmark = pytest.mark.slow

TOKENS = {"rap-1": "robot-token-rap-1-xxxxxxxxxxxx", "rap-3": "robot-token-rap-3-xxxxxxxxxxxx"}
ROBOT_TOKENS = ",".join(f"{robot}:{token}" for robot, token in TOKENS.items())

WORDS = ["parcel", "mailroom", "coffee", "kitchen", "pallet", "dock", "badge", "lobby"]
SECRET_WORDS = ["okapi", "zeppelin", "quokka", "marimba"]  # only line-b will hold these

PROBES = [
    "bring me the parcel from the mailroom",
    "coffee for the kitchen, then the dock",
    "okapi zeppelin",  # words only the other group holds
    "quokka marimba parcel",
    "okpai zepelin",  # misspelt: a repair could only come from line-b's words
    "parcle mailrom",  # misspelt own words: repaired from rap-1's documents alone
    "badge lobby pallet",
]


def doc(id: str, robot: str, words: list[str], *, mission: str = "m-1") -> str:
    return (
        f"---\nid: {id}\ntitle: {' '.join(words[:3]).capitalize()}\nrobot: {robot}\n"
        f"source_mission_id: {mission}\n---\n\n## Steps\n1. {' '.join(words)}\n"
    )


def observable(answer: dict) -> str:
    """The whole answer as the robot receives it (ids, scores, order, markdown)."""
    return json.dumps(answer, sort_keys=True)


@pytest.fixture(params=["sse"])
def server(request, spawn, mcp_call):
    server = spawn(transport=request.param, env={"MEMORY_ROBOT_TOKENS": ROBOT_TOKENS})

    async def seed() -> None:
        async with server.session() as admin:
            await mcp_call(admin, "upsert_group", group_id="line-a")
            await mcp_call(admin, "upsert_group", group_id="line-b")
            await mcp_call(admin, "register_robot", robot_id="rap-1", group_id="line-a")
            await mcp_call(admin, "register_robot", robot_id="rap-3", group_id="line-b")
        rng = random.Random(4)
        async with server.session(TOKENS["rap-1"]) as s:
            for i in range(12):
                words = rng.sample(WORDS, 5)
                await mcp_call(s, "save_process", markdown=doc(f"a-{i}", "rap-1", words))

    anyio.run(seed)
    return server


async def probe(server, mcp_call) -> list[str]:
    async with server.session(TOKENS["rap-1"]) as s:
        return [
            observable(await mcp_call(s, "find_processes", query=query, k=50)) for query in PROBES
        ]


async def test_scores_order_matches_and_repairs_ignore_the_other_group(server, mcp_call):
    """rap-1's every find answer is identical before and after line-b saves 40 documents
    full of rap-1's words and of words rap-1 has never stored."""
    before = await probe(server, mcp_call)
    rng = random.Random(9)
    async with server.session(TOKENS["rap-3"]) as s:
        for i in range(40):
            words = rng.sample(WORDS, 4) + rng.sample(SECRET_WORDS, 2)
            await mcp_call(s, "save_process", markdown=doc(f"b-{i}", "rap-3", words * 3))
        # line-b's own view did change: the probe could have seen it.
        own = await mcp_call(s, "find_processes", query="okapi zeppelin", k=5)
        assert own["processes"]
    assert await probe(server, mcp_call) == before
    # The finds matched something to compare: rap-1's own documents.
    assert any(json.loads(answer)["processes"] for answer in before)


async def test_a_save_answer_does_not_depend_on_another_groups_mission_ids(server, mcp_call):
    """Saving an id line-b holds answers "suffixed" the same way whether rap-1 guessed the
    holder's mission id right or wrong; line-b's documents are untouched."""
    async with server.session(TOKENS["rap-3"]) as s:
        await mcp_call(s, "save_process", markdown=doc("b-right", "rap-3", WORDS, mission="m-7"))
        await mcp_call(s, "save_process", markdown=doc("b-wrong", "rap-3", WORDS, mission="m-8"))
    async with server.session(TOKENS["rap-1"]) as s:
        right = await mcp_call(
            s, "save_process", markdown=doc("b-right", "unknown", WORDS, mission="m-7")
        )
        wrong = await mcp_call(
            s, "save_process", markdown=doc("b-wrong", "unknown", WORDS, mission="m-7")
        )
    for answer, id in ((right, "b-right"), (wrong, "b-wrong")):
        assert (answer["id"], answer["renamed_from"], answer["inserted"]) == (f"{id}-2", id, True)
        assert answer["robot"] == "rap-1"
    # near_duplicates name only rap-1's own documents (its second save finds its first),
    # never line-b's: they differ by rap-1's own state, not by line-b's mission ids.
    assert right["near_duplicates"] == []
    assert [n["id"] for n in wrong["near_duplicates"]] == ["b-right-2"]
    ignored = ("id", "renamed_from", "created", "updated", "near_duplicates")
    shape = {k: v for k, v in right.items() if k not in ignored}
    assert shape == {k: v for k, v in wrong.items() if k not in ignored}
    async with server.session() as admin:
        for id in ("b-right", "b-wrong"):
            assert (await mcp_call(admin, "get_process", id=id))["robot"] == "rap-3"
