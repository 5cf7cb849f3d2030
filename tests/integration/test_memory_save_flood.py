"""Issue 18, finding 2: one robot's saves neither slow nor break another group's searches.

A real server over SSE with a small ``MEMORY_ROBOT_MAX_DOCUMENTS``. The abusing robot (line-a)
saves documents full of distinct words as fast as its session allows, past its share, and
keeps rewriting them; meanwhile the victim (line-b) runs finds, with a misspelling among
them, so typo repair runs under every write. Every victim call must succeed with its own
documents, and the abuser must get ``too_large`` naming the setting past its share.
Timings belong to ``benchmarks/bench_fairness.py``, not here.
"""

from __future__ import annotations

import random

import anyio
import pytest

pytestmark = pytest.mark.slow

TOKENS = {"rap-1": "robot-token-rap-1-xxxxxxxxxxxx", "rap-3": "robot-token-rap-3-xxxxxxxxxxxx"}
ROBOT_TOKENS = ",".join(f"{robot}:{token}" for robot, token in TOKENS.items())
SHARE = 5


def doc(id: str, words: list[str]) -> str:
    return f"---\nid: {id}\ntitle: {' '.join(words[:4])}\n---\n\n## Steps\n1. {' '.join(words)}\n"


async def test_a_save_flood_leaves_another_groups_finds_whole(spawn, mcp_call):
    server = spawn(
        transport="sse",
        env={"MEMORY_ROBOT_TOKENS": ROBOT_TOKENS, "MEMORY_ROBOT_MAX_DOCUMENTS": str(SHARE)},
    )
    async with server.session() as admin:
        for group, robot in (("line-a", "rap-1"), ("line-b", "rap-3")):
            await mcp_call(admin, "upsert_group", group_id=group)
            await mcp_call(admin, "register_robot", robot_id=robot, group_id=group)
    async with server.session(TOKENS["rap-3"]) as victim:
        await mcp_call(
            victim,
            "save_process",
            markdown=doc("fetch-parcel", ["fetch", "the", "parcel", "mailroom"]),
        )
        await mcp_call(
            victim,
            "save_process",
            markdown=doc("water-plants", ["water", "the", "office", "plants"]),
        )

    rng = random.Random(1)
    refusals: list[dict] = []
    saved: list[str] = []
    stop = anyio.Event()

    async def flood() -> None:
        async with server.session(TOKENS["rap-1"]) as abuser:
            n = 0
            while not stop.is_set():
                words = ["".join(rng.choices("abcdefghijklmnop", k=9)) for _ in range(400)]
                out = await mcp_call(abuser, "save_process", markdown=doc(f"noise-{n % 8}", words))
                if "error" in out:
                    refusals.append(out)
                else:
                    saved.append(out["id"])
                n += 1

    answers: list[list[str]] = []

    async def victim_finds() -> None:
        async with server.session(TOKENS["rap-3"]) as victim:
            for i in range(40):
                query = ("bring the parcel from the mailroom", "watr the plnats")[i % 2]
                out = await mcp_call(victim, "find_processes", query=query, k=5)
                answers.append([p["id"] for p in out["processes"]])
        stop.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(flood)
        tg.start_soon(victim_finds)

    assert len(answers) == 40
    for i, found in enumerate(answers):
        assert found[:1] == [("fetch-parcel", "water-plants")[i % 2]], (i, found)
        assert all(id in ("fetch-parcel", "water-plants") for id in found), found
    # The abuser filled its share, was refused past it with the setting named, and its
    # rewrites of documents it owns kept going through.
    assert len(set(saved)) == SHARE
    assert len(saved) > SHARE
    assert refusals
    for out in refusals:
        assert out["error"] == "too_large", out
        assert out["field"] == "documents"
        assert "MEMORY_ROBOT_MAX_DOCUMENTS" in out["detail"]
