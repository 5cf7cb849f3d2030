"""ProcessService.find latency next to the raw FTS5 query, save throughput, RSS, and find over SSE.

    uv run python benchmarks/bench_memory.py [--sizes 1000,10000,100000] [--queries N]
                                             [--no-sse] [--sse-calls N]

For each corpus size a fresh temp directory gets an ``index.db`` filled through
``ProcessService.save`` with synthetic, varied process documents (seeded, so every run builds
the same corpora). Then, on that same file and in the same run, interleaved query by query
(who goes first alternates):

- find: ``ProcessService.find(query, k=3)`` in process — sanitizing, the join to the rows,
  reliability ranking over all matches, and building the ``ProcessDoc`` results;
- raw:  ``SELECT id, bm25(processes_fts) FROM processes_fts WHERE processes_fts MATCH ?
  ORDER BY bm25(processes_fts) LIMIT 3`` on a plain sqlite3 connection, given the same
  (already sanitized) MATCH expression.

Target: find p50 <= 3 x raw p50 at 10 000 documents. Save throughput is documents/s over
the whole build; RSS (VmRSS and its peak VmHWM from /proc/self/status) is read after the
largest corpus is built and searched.

Over SSE (skipped with ``--no-sse``): the ``robot-mcp-memory`` console script is started
as a subprocess on a free port with ``MCP_TRANSPORT=sse`` and ``MEMORY_DATA_DIR`` set to the
corpus directory; an MCP client session then times ``find_processes`` calls next to MCP
``ping`` round trips, interleaved. Target: find_processes p50 <= 2 x ping p50.

Fleet load (``--fleet``, instead of the above; issue 10):

    uv run python benchmarks/bench_memory.py --fleet [--calls 500] [--clients 6]
                                             [--fleet-docs 1000] [--rounds 2]

Six brains, each its own process with one SSE session, run the same seeded plan of mixed
calls (find_processes 40 %, record_outcome 20 %, recall_params 25 %, list_robots 15 %)
concurrently against one server, twice per round: once *scoped* (a server with
``MEMORY_ROBOT_TOKENS``, each brain on its robot's token: six robots in three groups) and
once *unscoped* (a server with ``MEMORY_TOKEN`` only, each brain on the admin token).
Both servers start from copies of one seeded data directory (documents owned by the six
robots, 10 % ``shared``) and are given the same registry, self-improve switched on and the
same lessons through the admin token. Each brain warms up (unrecorded), waits on a
barrier, then runs its plan. Reported: p50/p99 per tool, errors (error answers, MCP
errors and exceptions), answers outside the caller's scope (scoped: a found id or a
listed robot that its group may not see), and throughput (all calls / wall time from the
first brain's start to the last one's end), with the ratio scoped/unscoped. Rounds
alternate which side goes first. Target: zero errors, zero out-of-scope answers,
scoped >= 0.85 x unscoped throughput.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import random
import secrets
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robot_mcp_kit.testing import ServiceProcess, free_port
from robot_mcp_memory.backends import storage_at
from robot_mcp_memory.processes import ProcessDoc, ProcessService, match_expression
from robot_mcp_memory.processes._words import search_terms

TARGET_FIND_VS_RAW = 3.0
TARGET_SSE_VS_PING = 2.0
TARGET_SIZE = 10_000
TARGET_SCOPED_VS_UNSCOPED = 0.85

VERBS = [
    "fetch", "bring", "deliver", "carry", "pick up", "place", "wipe", "clean", "open",
    "close", "inspect", "check", "scan", "sort", "stack", "refill", "water", "charge",
    "greet", "escort", "patrol", "restock", "collect", "return", "move", "label", "count",
    "unload", "load", "empty", "fold", "hand over", "photograph", "measure", "tidy",
]  # fmt: skip
OBJECTS = [
    "package", "parcel", "letter", "box", "cup", "mug", "tray", "bottle", "printer paper",
    "toner cartridge", "keys", "badge", "laptop", "charger", "plant", "towel", "trash bag",
    "coffee beans", "sample tube", "pallet", "tool kit", "first aid kit", "umbrella",
    "chair", "cart", "medication", "lab coat", "document folder", "spare battery", "glove",
    "screwdriver", "pipette rack", "water jug", "visitor", "envelope", "monitor", "cable",
]  # fmt: skip
PLACES = [
    "mailroom", "kitchen", "lobby", "reception", "storage room", "loading dock",
    "server room", "break room", "workshop", "pharmacy", "garage", "cafeteria", "library",
    "clean room", "cold store", "meeting room", "front desk", "archive", "roof terrace",
]  # fmt: skip
MODIFIERS = [
    "red", "blue", "green", "heavy", "fragile", "small", "large", "labeled", "sealed",
    "empty", "full", "spare", "urgent", "wet", "hot", "cold", "new", "old", "broken",
]  # fmt: skip
TOOLS = [
    "navigation.navigate_to", "perception.find_object", "perception.prewarm",
    "manipulation.grasp", "manipulation.place", "speech.say", "doors.request_open",
    "elevator.call", "arm.home", "gripper.open", "gripper.close", "base.dock",
]  # fmt: skip
ROBOT_WORDS = [
    "arm", "gripper", "camera", "wait", "retry", "slowly", "align", "approach", "shelf",
    "door", "handle", "corridor", "elevator", "battery", "dock", "map", "waypoint", "lidar",
    "obstacle", "person", "operator", "confirm", "announce", "height", "grip", "force",
]  # fmt: skip
FUNCTION_WORDS = ["the", "a", "then", "and", "if", "with", "near", "to", "from", "on", "it"]
# The corpus, in short: each document is about one (verb, object, place) task; its body is
# mostly made-up domain jargon (3 000 pseudo-words) and robot vocabulary, with its own
# object and place recurring and others mentioned now and then. The table's `matches/q`
# column says how much of the corpus an average query touches (all of it is ranked).
ERRORS = ["DOOR_CLOSED", "OBJECT_NOT_FOUND", "GRASP_FAILED", "PATH_BLOCKED", "TIMEOUT"]


def _pseudo_words(rng: random.Random, n: int) -> list[str]:
    consonants, vowels = "bcdfghklmnprstvz", "aeiou"
    words: set[str] = set()
    while len(words) < n:
        syllables = rng.randint(2, 4)
        words.add("".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(syllables)))
    return sorted(words)


@dataclass
class Corpus:
    rng: random.Random
    jargon: list[str]

    def sentence(self, words: int, topic: tuple[str, ...]) -> str:
        """A sentence of a document about ``topic``: mostly domain jargon and robot words,
        the document's own objects and places, now and then another one."""
        parts = []
        for _ in range(words):
            roll = self.rng.random()
            if roll < 0.40:
                parts.append(self.rng.choice(self.jargon))
            elif roll < 0.55:
                parts.append(self.rng.choice(ROBOT_WORDS))
            elif roll < 0.70:
                parts.append(self.rng.choice(topic))
            elif roll < 0.75:
                parts.append(self.rng.choice(OBJECTS + PLACES + MODIFIERS))
            else:
                parts.append(self.rng.choice(FUNCTION_WORDS))
        return " ".join(parts).capitalize() + "."

    def doc(self, i: int) -> ProcessDoc:
        rng = self.rng
        verb, obj, place = rng.choice(VERBS), rng.choice(OBJECTS), rng.choice(PLACES)
        mod = rng.choice(MODIFIERS)
        other_place = rng.choice(PLACES)
        topic = (verb, obj, place, mod, other_place)
        steps = [f"1. {TOOLS[0]}({place}) with trigger eta_below:{rng.randint(3, 30)}"]
        for n in range(2, rng.randint(4, 10)):
            tool = rng.choice(TOOLS)
            # Mostly the task's own object; now and then another one it meets on the way.
            thing = obj if rng.random() < 0.7 else rng.choice(OBJECTS)
            steps.append(f'{n}. {tool}("{mod} {thing}")')
        body = (
            "## Steps\n"
            + "\n".join(steps)
            + "\n\n## Pitfalls & fixes\n"
            + "\n".join(
                f"- {rng.choice(ERRORS)}: {self.sentence(rng.randint(6, 16), topic)}"
                for _ in range(rng.randint(1, 4))
            )
            + "\n\n## Operator notes\n- "
            + self.sentence(rng.randint(8, 24), topic)
            + "\n"
        )
        return ProcessDoc(
            id=f"{verb.replace(' ', '-')}-{obj.replace(' ', '-')}-{place.replace(' ', '-')}-{i}",
            title=f"{verb.capitalize()} the {mod} {obj} {rng.choice(['from', 'to', 'in'])} "
            f"the {place}",
            task_pattern=f"{verb}|{rng.choice(VERBS)} ... {obj} ... {place}|{other_place}",
            tags=[
                place.replace(" ", "-"),
                obj.split()[0],
                rng.choice(["delivery", "cleaning", "inspection", "logistics", "care", "lab"]),
            ],
            robot=f"g1-lab-{rng.randint(1, 12):02d}",
            success_count=rng.randint(0, 20),
            failure_count=rng.randint(0, 8),
            source_mission_id=f"m-{rng.getrandbits(32):08x}",
            body=body,
        )

    def query(self) -> str:
        rng = self.rng
        verb, obj, place, mod = (
            rng.choice(VERBS),
            rng.choice(OBJECTS),
            rng.choice(PLACES),
            rng.choice(MODIFIERS),
        )
        templates = [
            f"please {verb} me the {obj} from the {place}",
            f"can you {verb} the {mod} {obj} to the {place}?",
            f"{verb} {obj} {place}",
            f"go to the {place} and {verb} the {obj}, it is {mod}",
            f'I need the "{obj}" from ({place}) NEAR the {rng.choice(OBJECTS)} - quickly!',
        ]
        return rng.choice(templates)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def rss_kib() -> tuple[int, int]:
    fields = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


@dataclass
class SizeResult:
    size: int
    build_s: float
    save_per_s: float
    find_ms: list[float]
    raw_ms: list[float]
    hits: int
    db_mib: float
    matches: float
    rss_kib: tuple[int, int] = (0, 0)
    sse_find_ms: list[float] | None = None
    sse_ping_ms: list[float] | None = None
    sse_tool_ms: list[float] | None = None
    sse_note: str = ""


def build(directory: Path, size: int, seed: int) -> tuple[ProcessService, float]:
    corpus = Corpus(random.Random(seed), _pseudo_words(random.Random(seed + 1), 3000))
    store = ProcessService(storage_at(str(directory)).open().processes, robot_id="bench")
    docs = (corpus.doc(i) for i in range(size))
    started = time.perf_counter()
    for doc in docs:
        store.save(doc)
    return store, time.perf_counter() - started


def measure_local(
    store: ProcessService, queries: list[str]
) -> tuple[list[float], list[float], int, float]:
    raw = sqlite3.connect(f"{store.repo.store.path.as_uri()}?mode=ro", uri=True)
    raw_sql = (
        "SELECT id, bm25(processes_fts) FROM processes_fts WHERE processes_fts MATCH ? "
        "ORDER BY bm25(processes_fts) LIMIT 3"
    )
    find_ms: list[float] = []
    raw_ms: list[float] = []
    hits = 0
    try:
        for q in queries[:20]:  # warm both paths (page cache, statement caches)
            store.find(q, k=3)
            terms = search_terms(q)
            if terms:
                raw.execute(raw_sql, (match_expression(terms),)).fetchall()
        for n, q in enumerate(queries):
            for side in ("find", "raw") if n % 2 == 0 else ("raw", "find"):
                if side == "find":
                    t0 = time.perf_counter_ns()
                    found = store.find(q, k=3)
                    find_ms.append((time.perf_counter_ns() - t0) / 1e6)
                    hits += bool(found)
                else:
                    t0 = time.perf_counter_ns()
                    # The raw side gets the same MATCH expression find builds.
                    terms = search_terms(q)
                    if terms:
                        raw.execute(raw_sql, (match_expression(terms),)).fetchall()
                    raw_ms.append((time.perf_counter_ns() - t0) / 1e6)
        matches = [
            raw.execute(
                "SELECT count(*) FROM processes_fts WHERE processes_fts MATCH ?",
                (match_expression(search_terms(q)),),
            ).fetchone()[0]
            if search_terms(q)
            else 0
            for q in queries
        ]
    finally:
        raw.close()
    return find_ms, raw_ms, hits, sum(matches) / len(matches)


@contextlib.contextmanager
def memory_server(data_dir: Path, extra_env: Mapping[str, str] | None = None) -> Iterator[str]:
    """Start robot-mcp-memory over SSE on a free port; yield its base URL; stop it.

    The caller's ``MEMORY_TOKEN`` / ``MEMORY_ROBOT_TOKENS`` are dropped; ``extra_env``
    sets the server's own. Raises ``ServiceStartError`` if it exits or does not answer
    ``/healthz`` within 30 s.
    """
    exe = shutil.which("robot-mcp-memory") or str(
        Path(sys.executable).with_name("robot-mcp-memory")
    )
    port = free_port()
    env = {
        **os.environ,
        "MCP_TRANSPORT": "sse",
        "MCP_PORT": str(port),
        "MCP_HOST": "127.0.0.1",
        "MEMORY_DATA_DIR": str(data_dir),
        "ROBOT_ID": "bench",
    }
    for name in ("MEMORY_TOKEN", "MEMORY_ROBOT_TOKENS"):
        env.pop(name, None)
    env.update(extra_env or {})
    base = f"http://127.0.0.1:{port}"
    server = ServiceProcess(
        "robot-mcp-memory", [exe], port, env=env, inherit_env=False, ready=f"{base}/healthz"
    )
    with server.start(ready_timeout_s=30):
        yield base


async def measure_sse(
    base: str, queries: list[str]
) -> tuple[list[float], list[float], list[float]]:
    """find_processes, ping and a cheap tool (list_processes limit=1), interleaved."""
    from mcp import ClientSession
    from mcp.client.sse import sse_client

    timings: dict[str, list[float]] = {"find": [], "ping": [], "tool": []}
    async with sse_client(f"{base}/sse") as (read, write), ClientSession(read, write) as session:
        await session.initialize()

        async def one(side: str, query: str) -> None:
            t0 = time.perf_counter_ns()
            if side == "find":
                result = await session.call_tool("find_processes", {"query": query, "k": 3})
            elif side == "tool":
                result = await session.call_tool("list_processes", {"limit": 1})
            else:
                await session.send_ping()
                result = None
            elapsed = (time.perf_counter_ns() - t0) / 1e6
            if result is not None and result.isError:
                raise RuntimeError(f"{side} call failed: {result.content}")
            timings[side].append(elapsed)

        for q in queries[:10]:  # warm-up, not recorded
            for side in ("find", "ping", "tool"):
                await one(side, q)
        for side in timings:
            timings[side].clear()
        orders = [("find", "ping", "tool"), ("ping", "tool", "find"), ("tool", "find", "ping")]
        for n, q in enumerate(queries):
            for side in orders[n % 3]:
                await one(side, q)
    return timings["find"], timings["ping"], timings["tool"]


def sse_available() -> str:
    """'' if the memory server can be started, else why not."""
    try:
        import robot_mcp_memory.server  # noqa: F401
    except Exception as exc:
        return f"robot_mcp_memory.server is not importable ({type(exc).__name__}: {exc})"
    exe = shutil.which("robot-mcp-memory") or str(
        Path(sys.executable).with_name("robot-mcp-memory")
    )
    if not Path(exe).exists():
        return "the robot-mcp-memory console script is not installed"
    return ""


def run_size(size: int, n_queries: int, sse: bool, sse_calls: int) -> SizeResult:
    with tempfile.TemporaryDirectory(prefix=f"bench-memory-{size}-") as tmp:
        directory = Path(tmp)
        print(f"[{size}] building corpus ...", flush=True)
        store, build_s = build(directory, size, seed=size)
        qrng = Corpus(random.Random(size + 7), [])
        queries = [qrng.query() for _ in range(n_queries)]
        print(f"[{size}] saved {size} docs in {build_s:.1f} s; measuring find ...", flush=True)
        find_ms, raw_ms, hits, matches = measure_local(store, queries)
        db_mib = sum(p.stat().st_size for p in directory.iterdir()) / 2**20
        result = SizeResult(
            size, build_s, size / build_s, find_ms, raw_ms, hits, db_mib, matches, rss_kib()
        )
        store.close()
        if sse:
            why = sse_available()
            if why:
                result.sse_note = f"SSE part skipped: {why}"
            else:
                print(f"[{size}] measuring find_processes over SSE ...", flush=True)
                try:
                    with memory_server(directory) as base:
                        (
                            result.sse_find_ms,
                            result.sse_ping_ms,
                            result.sse_tool_ms,
                        ) = asyncio.run(measure_sse(base, queries[:sse_calls]))
                except Exception as exc:  # report, do not lose the in-process figures
                    result.sse_note = f"SSE part failed: {type(exc).__name__}: {exc}"
        return result


def report(results: list[SizeResult]) -> int:
    print()
    print(
        f"{'docs':>8} {'save/s':>8} {'db MiB':>7} {'find p50':>9} {'find p95':>9} "
        f"{'raw p50':>8} {'raw p95':>8} {'p50 x':>6} {'hit%':>5} {'matches/q':>10}"
    )
    failures = 0
    for r in results:
        f50, f95 = percentile(r.find_ms, 0.5), percentile(r.find_ms, 0.95)
        r50, r95 = percentile(r.raw_ms, 0.5), percentile(r.raw_ms, 0.95)
        print(
            f"{r.size:>8} {r.save_per_s:>8.0f} {r.db_mib:>7.1f} {f50:>8.3f}ms {f95:>8.3f}ms "
            f"{r50:>7.3f}ms {r95:>7.3f}ms {f50 / r50:>6.2f} {100 * r.hits / len(r.find_ms):>5.0f} "
            f"{r.matches:>10.0f}"
        )
    print()
    for r in results:
        if r.size == TARGET_SIZE:
            ratio = percentile(r.find_ms, 0.5) / percentile(r.raw_ms, 0.5)
            ok = ratio <= TARGET_FIND_VS_RAW
            failures += not ok
            print(
                f"target find p50 <= {TARGET_FIND_VS_RAW:g} x raw p50 at {TARGET_SIZE}: "
                f"{ratio:.2f} x  {'PASS' if ok else 'FAIL'}"
            )
    if all(r.size != TARGET_SIZE for r in results):
        print(f"target find vs raw: not measured (no {TARGET_SIZE}-document corpus in --sizes)")
    for r in results:
        print(
            f"RSS with the {r.size}-document store open, after its searches: "
            f"{r.rss_kib[0] / 1024:.0f} MiB (process peak so far {r.rss_kib[1] / 1024:.0f} MiB)"
        )
    print()
    for r in results:
        if r.sse_find_ms and r.sse_ping_ms and r.sse_tool_ms:
            f50, f95 = percentile(r.sse_find_ms, 0.5), percentile(r.sse_find_ms, 0.95)
            p50, p95 = percentile(r.sse_ping_ms, 0.5), percentile(r.sse_ping_ms, 0.95)
            t50, t95 = percentile(r.sse_tool_ms, 0.5), percentile(r.sse_tool_ms, 0.95)
            ratio = f50 / p50
            ok = ratio <= TARGET_SSE_VS_PING
            failures += not ok
            print(
                f"SSE {r.size:>7} docs: find_processes p50 {f50:.2f} ms p95 {f95:.2f} ms | "
                f"ping p50 {p50:.2f} ms p95 {p95:.2f} ms | cheap tool (list_processes "
                f"limit=1) p50 {t50:.2f} ms p95 {t95:.2f} ms\n"
                f"      find/ping {ratio:.2f} (target <= {TARGET_SSE_VS_PING:g})  "
                f"{'PASS' if ok else 'FAIL'};  find/cheap-tool {f50 / t50:.2f}"
            )
        elif r.sse_note:
            print(f"SSE {r.size:>7} docs: {r.sse_note}")
    return 1 if failures else 0


# --- fleet load (--fleet) -----------------------------------------------------------------

FLEET_GROUPS = {
    "line-a": ("rap-1", "rap-2"),
    "line-b": ("rap-3", "rap-4"),
    "line-c": ("rap-5", "rap-6"),
}
FLEET_MIX = {
    "find_processes": 0.40,
    "record_outcome": 0.20,
    "recall_params": 0.25,
    "list_robots": 0.15,
}
FLEET_SKILLS = ["grasp.mug", "grasp.box", "place.tray", "open.door"]
FLEET_LESSON_PLACES = PLACES[:3]  # lessons are seeded here; recalls also ask two more places
FLEET_RECALL_PLACES = PLACES[:5]
FLEET_SHARED_FRACTION = 0.10
FLEET_WARMUP = 20


def fleet_robots(clients: int) -> list[tuple[str, str]]:
    """``(robot, group)`` for each brain: the groups' robots in order, repeated if needed."""
    pairs = [(robot, group) for group, robots in FLEET_GROUPS.items() for robot in robots]
    return [pairs[i % len(pairs)] for i in range(clients)]


def seed_fleet_documents(directory: Path, n_docs: int, seed: int) -> dict[str, str | None]:
    """Save ``n_docs`` documents owned by the fleet's robots (some shared); ``{id: robot}``.

    A shared document maps to None (every robot sees it).
    """
    corpus = Corpus(random.Random(seed), _pseudo_words(random.Random(seed + 1), 3000))
    robots = [robot for group in FLEET_GROUPS.values() for robot in group]
    owners: dict[str, str | None] = {}
    store = ProcessService(storage_at(str(directory)).open().processes, robot_id="bench")
    try:
        for i in range(n_docs):
            shared = corpus.rng.random() < FLEET_SHARED_FRACTION
            doc = corpus.doc(i).model_copy(
                update={"robot": robots[i % len(robots)], "shared": shared}
            )
            saved = store.save(doc)
            owners[saved.doc.id] = None if shared else doc.robot
    finally:
        store.close()
    return owners


def visible_ids(owners: Mapping[str, str | None], group: str) -> list[str]:
    """The ids a robot of ``group`` may see: its group's documents and the shared ones."""
    members = set(FLEET_GROUPS[group])
    return sorted(i for i, robot in owners.items() if robot is None or robot in members)


def fleet_plan(
    robot: str, visible: list[str], calls: int, seed: int
) -> list[tuple[str, dict[str, Any]]]:
    """A brain's seeded sequence of ``(tool, arguments)``; both sides run the same plans."""
    rng = random.Random(seed)
    queries = Corpus(random.Random(seed + 1), [])
    tools, weights = list(FLEET_MIX), list(FLEET_MIX.values())
    plan: list[tuple[str, dict[str, Any]]] = []
    for _ in range(calls):
        tool = rng.choices(tools, weights)[0]
        if tool == "find_processes":
            args: dict[str, Any] = {"query": queries.query(), "k": 3}
        elif tool == "record_outcome":
            args = {"id": rng.choice(visible), "success": rng.random() < 0.8}
        elif tool == "recall_params":
            args = {
                "robot": robot,
                "skill": rng.choice(FLEET_SKILLS),
                "place": rng.choice(FLEET_RECALL_PLACES),
            }
        else:
            args = {}
        plan.append((tool, args))
    return plan


async def _admin_call(session: Any, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await session.call_tool(tool, args)
    text = "".join(getattr(part, "text", "") for part in result.content)
    value = json.loads(text)
    if result.isError or not isinstance(value, dict) or "error" in value:
        raise RuntimeError(f"setup {tool}({args}) answered {text[:300]}")
    return value


async def fleet_setup(base: str, admin_token: str) -> int:
    """Registry, self-improve on and lessons, through the admin token; returns #lessons."""
    from mcp import ClientSession
    from mcp.client.sse import sse_client

    headers = {"Authorization": f"Bearer {admin_token}"}
    lessons = 0
    async with (
        sse_client(f"{base}/sse", headers) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        for group, robots in FLEET_GROUPS.items():
            await _admin_call(session, "upsert_group", {"group_id": group, "factory": "bench"})
            for robot in robots:
                await _admin_call(session, "register_robot", {"robot_id": robot, "group_id": group})
        await _admin_call(session, "set_self_improve", {"enabled": True})
        rng = random.Random(10)
        for robots in FLEET_GROUPS.values():
            for skill in FLEET_SKILLS:
                for place in FLEET_LESSON_PLACES:
                    params = {
                        "offset_m": round(rng.uniform(0, 0.1), 3),
                        "force_n": rng.randint(5, 30),
                    }
                    args = {"robot": robots[0], "skill": skill, "params": params, "place": place}
                    await _admin_call(session, "record_params", {**args, "success": True})
                    lessons += 1
    return lessons


@dataclass
class BrainResult:
    timings: dict[str, list[float]] = field(default_factory=dict)
    errors: int = 0
    exceptions: int = 0
    out_of_scope: int = 0
    samples: list[str] = field(default_factory=list)
    start: float = 0.0
    end: float = 0.0
    fatal: str = ""


async def _brain(
    base: str,
    token: str,
    plan: list[tuple[str, dict[str, Any]]],
    scope: tuple[frozenset[str], frozenset[str], frozenset[str]] | None,
    barrier: Any,
) -> BrainResult:
    """One brain: connect, warm up, wait for the others, run ``plan``, time every call.

    ``scope`` (scoped side only) is ``(visible ids, visible robots, lesson scopes)``: a
    found id, a listed robot or a recalled lesson's scope outside it counts as an
    out-of-scope answer. Warm-up calls count towards the errors, not the timings.
    """
    from mcp import ClientSession
    from mcp.client.sse import sse_client

    out = BrainResult(timings={tool: [] for tool in FLEET_MIX})

    async def one(tool: str, args: dict[str, Any], record: bool) -> None:
        t0 = time.perf_counter_ns()
        try:
            result = await session.call_tool(tool, args)
        except Exception as exc:  # an MCP error or a broken stream: counted, not fatal
            out.exceptions += 1
            if len(out.samples) < 3:
                out.samples.append(f"{tool}: {type(exc).__name__}: {exc}")
            return
        elapsed = (time.perf_counter_ns() - t0) / 1e6
        text = "".join(getattr(part, "text", "") for part in result.content)
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = None
        if result.isError or not isinstance(value, dict) or "error" in value:
            out.errors += 1
            if len(out.samples) < 3:
                out.samples.append(f"{tool}({args}): {text[:200]}")
            return
        if scope is not None:
            ids, robots, lesson_scopes = scope
            if tool == "find_processes":
                out.out_of_scope += sum(p.get("id") not in ids for p in value["processes"])
            elif tool == "list_robots":
                out.out_of_scope += sum(r.get("robot_id") not in robots for r in value["robots"])
            elif tool == "recall_params" and value.get("lesson") is not None:
                out.out_of_scope += value.get("scope") not in lesson_scopes
        if record:
            out.timings[tool].append(elapsed)

    headers = {"Authorization": f"Bearer {token}"}
    async with (
        sse_client(f"{base}/sse", headers) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        for tool, args in plan[:FLEET_WARMUP]:
            if tool != "record_outcome":  # warm-up writes nothing
                await one(tool, args, record=False)
        await asyncio.to_thread(barrier.wait, 120)
        out.start = time.perf_counter()
        for tool, args in plan:
            await one(tool, args, record=True)
        out.end = time.perf_counter()
    return out


def _brain_process(
    base: str,
    token: str,
    plan: list[tuple[str, dict[str, Any]]],
    scope: tuple[frozenset[str], frozenset[str], frozenset[str]] | None,
    barrier: Any,
    results: Any,
) -> None:
    """A brain's process: run :func:`_brain`, put its result on ``results``."""
    try:
        result = asyncio.run(_brain(base, token, plan, scope, barrier))
    except BaseException as exc:  # report it; the parent decides
        barrier.abort()
        result = BrainResult(fatal=f"{type(exc).__name__}: {exc}")
    results.put(result)


@dataclass
class SideResult:
    timings: dict[str, list[float]] = field(default_factory=lambda: {t: [] for t in FLEET_MIX})
    calls: int = 0
    wall_s: float = 0.0
    errors: int = 0
    exceptions: int = 0
    out_of_scope: int = 0
    samples: list[str] = field(default_factory=list)

    def add(self, brains: list[BrainResult]) -> None:
        fatal = [b.fatal for b in brains if b.fatal]
        if fatal:
            raise RuntimeError(f"a brain failed: {fatal[0]}")
        for b in brains:
            for tool, values in b.timings.items():
                self.timings[tool].extend(values)
                self.calls += len(values)
            self.errors += b.errors
            self.exceptions += b.exceptions
            self.out_of_scope += b.out_of_scope
            self.samples.extend(b.samples)
        self.wall_s += max(b.end for b in brains) - min(b.start for b in brains)

    @property
    def throughput(self) -> float:
        return self.calls / self.wall_s if self.wall_s else 0.0


def run_fleet_side(
    seed_dir: Path,
    work: Path,
    scoped: bool,
    plans: list[Any],
    clients: list[tuple[str, str]],
    owners: Mapping[str, str | None],
) -> list[BrainResult]:
    """Copy the seeded directory, start a server, set the fleet up, run the brains."""
    data_dir = work / ("scoped" if scoped else "unscoped")
    shutil.rmtree(data_dir, ignore_errors=True)
    shutil.copytree(seed_dir, data_dir)
    admin = secrets.token_urlsafe(24)
    robot_tokens = {robot: secrets.token_urlsafe(24) for robot, _ in clients}
    env = {"MEMORY_TOKEN": admin}
    if scoped:
        env["MEMORY_ROBOT_TOKENS"] = ",".join(f"{r}:{t}" for r, t in robot_tokens.items())
    ctx = multiprocessing.get_context("spawn")
    with memory_server(data_dir, env) as base:
        asyncio.run(fleet_setup(base, admin))
        barrier = ctx.Barrier(len(clients))
        results = ctx.Queue()
        procs = []
        for (robot, group), plan in zip(clients, plans, strict=True):
            scope = None
            if scoped:
                scope = (
                    frozenset(visible_ids(owners, group)),
                    frozenset(FLEET_GROUPS[group]),
                    frozenset({f"group:{group}", f"robot:{robot}"}),
                )
            token = robot_tokens[robot] if scoped else admin
            proc = ctx.Process(
                target=_brain_process, args=(base, token, plan, scope, barrier, results)
            )
            proc.start()
            procs.append(proc)
        brains = [results.get(timeout=600) for _ in procs]
        for proc in procs:
            proc.join(30)
    return brains


def run_fleet(calls: int, n_clients: int, n_docs: int, rounds: int) -> int:
    clients = fleet_robots(n_clients)
    with tempfile.TemporaryDirectory(prefix="bench-memory-fleet-") as tmp:
        work = Path(tmp)
        seed_dir = work / "seed"
        print(f"[fleet] seeding {n_docs} documents ...", flush=True)
        owners = seed_fleet_documents(seed_dir, n_docs, seed=n_docs)
        plans = [
            fleet_plan(robot, visible_ids(owners, group), calls, seed=100 + i)
            for i, (robot, group) in enumerate(clients)
        ]
        sides = {True: SideResult(), False: SideResult()}
        for n in range(rounds):
            for scoped in (True, False) if n % 2 == 0 else (False, True):
                name = "scoped" if scoped else "unscoped"
                print(
                    f"[fleet] round {n + 1}/{rounds}: {name}, {len(clients)} brains x "
                    f"{calls} calls ...",
                    flush=True,
                )
                sides[scoped].add(run_fleet_side(seed_dir, work, scoped, plans, clients, owners))
    shared = sum(robot is None for robot in owners.values())
    return fleet_report(sides[True], sides[False], len(clients), calls, n_docs, shared, rounds)


def fleet_report(
    scoped: SideResult,
    unscoped: SideResult,
    clients: int,
    calls: int,
    n_docs: int,
    shared: int,
    rounds: int,
) -> int:
    mix = " / ".join(f"{tool} {100 * w:.0f}%" for tool, w in FLEET_MIX.items())
    lessons = len(FLEET_GROUPS) * len(FLEET_SKILLS) * len(FLEET_LESSON_PLACES)
    print()
    print(
        f"fleet load: {clients} SSE brains (one process each) x {calls} calls x {rounds} "
        f"round(s) per side\n  mix {mix}\n  {len(FLEET_GROUPS)} groups of 2 robots, "
        f"{n_docs} documents ({shared} shared), {lessons} lessons, self-improve on; "
        f"{os.cpu_count()} CPUs"
    )
    print()
    print(
        f"{'tool':<16} {'calls':>6} | {'scoped p50':>10} {'p99':>9} | "
        f"{'unscoped p50':>12} {'p99':>9}"
    )
    rows = [(tool, scoped.timings[tool], unscoped.timings[tool]) for tool in FLEET_MIX]
    rows.append(
        (
            "all",
            [v for values in scoped.timings.values() for v in values],
            [v for values in unscoped.timings.values() for v in values],
        )
    )
    for tool, s_ms, u_ms in rows:
        if not s_ms or not u_ms:
            print(f"{tool:<16} {'-':>6}")
            continue
        print(
            f"{tool:<16} {len(s_ms):>6} | {percentile(s_ms, 0.5):>8.2f}ms "
            f"{percentile(s_ms, 0.99):>7.2f}ms | {percentile(u_ms, 0.5):>10.2f}ms "
            f"{percentile(u_ms, 0.99):>7.2f}ms"
        )
    ratio = scoped.throughput / unscoped.throughput if unscoped.throughput else 0.0
    print(
        f"{'throughput':<16} {'':>6} | {scoped.throughput:>6.0f} calls/s   | "
        f"{unscoped.throughput:>8.0f} calls/s"
    )
    print()
    failures = 0
    for name, side in (("scoped", scoped), ("unscoped", unscoped)):
        bad = side.errors + side.exceptions
        failures += bad > 0
        print(
            f"{name}: {bad} errors ({side.errors} error answers, {side.exceptions} exceptions) "
            f"in {side.calls} calls  {'PASS' if bad == 0 else 'FAIL'}"
        )
        for sample in side.samples[:3]:
            print(f"    e.g. {sample}")
    failures += scoped.out_of_scope > 0
    print(
        f"scoped: {scoped.out_of_scope} answers outside the caller's scope  "
        f"{'PASS' if scoped.out_of_scope == 0 else 'FAIL'}"
    )
    ok = ratio >= TARGET_SCOPED_VS_UNSCOPED
    failures += not ok
    print(
        f"throughput scoped/unscoped {ratio:.2f} (target >= {TARGET_SCOPED_VS_UNSCOPED:g})  "
        f"{'PASS' if ok else 'FAIL'}"
    )
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", default="1000,10000,100000", help="corpus sizes, comma-separated"
    )
    parser.add_argument("--queries", type=int, default=400, help="queries per size (each side)")
    parser.add_argument("--no-sse", action="store_true", help="skip the over-SSE measurement")
    parser.add_argument("--sse-calls", type=int, default=200, help="find_processes calls over SSE")
    fleet = parser.add_argument_group("fleet load")
    fleet.add_argument(
        "--fleet", action="store_true", help="run the fleet load (scoped vs unscoped) instead"
    )
    fleet.add_argument("--calls", type=int, default=500, help="calls per brain per round")
    fleet.add_argument("--clients", type=int, default=6, help="concurrent brains (processes)")
    fleet.add_argument("--fleet-docs", type=int, default=1000, help="seeded documents")
    fleet.add_argument(
        "--rounds", type=int, default=2, help="rounds, each running both sides (order alternates)"
    )
    args = parser.parse_args()
    if args.fleet:
        why = sse_available()
        if why:
            print(f"fleet load skipped: {why}")
            return 1
        return run_fleet(args.calls, args.clients, args.fleet_docs, args.rounds)
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    results = [run_size(size, args.queries, not args.no_sse, args.sse_calls) for size in sizes]
    return report(results)


if __name__ == "__main__":
    sys.exit(main())
