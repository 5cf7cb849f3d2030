"""ProcessStore.find latency next to the raw FTS5 query, save throughput, RSS, and find over SSE.

    uv run python benchmarks/bench_memory.py [--sizes 1000,10000,100000] [--queries N]
                                             [--no-sse] [--sse-calls N]

For each corpus size a fresh temp directory gets an ``index.db`` filled through
``ProcessStore.save`` with synthetic, varied process documents (seeded, so every run builds
the same corpora). Then, on that same file and in the same run, interleaved query by query
(who goes first alternates):

- find: ``ProcessStore.find(query, k=3)`` in process — sanitizing, the join to the rows,
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
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx

from robot_mcp_kit.testing import free_port
from robot_mcp_memory.db import open_index
from robot_mcp_memory.docmodel import ProcessDoc
from robot_mcp_memory.store import ProcessStore, _match_expression, search_terms

TARGET_FIND_VS_RAW = 3.0
TARGET_SSE_VS_PING = 2.0
TARGET_SIZE = 10_000

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


def build(directory: Path, size: int, seed: int) -> tuple[ProcessStore, float]:
    corpus = Corpus(random.Random(seed), _pseudo_words(random.Random(seed + 1), 3000))
    store = ProcessStore(open_index(directory), robot_id="bench")
    docs = (corpus.doc(i) for i in range(size))
    started = time.perf_counter()
    for doc in docs:
        store.save(doc)
    return store, time.perf_counter() - started


def measure_local(
    store: ProcessStore, queries: list[str]
) -> tuple[list[float], list[float], int, float]:
    raw = sqlite3.connect(f"{store.store.path.as_uri()}?mode=ro", uri=True)
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
                raw.execute(raw_sql, (_match_expression(terms),)).fetchall()
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
                        raw.execute(raw_sql, (_match_expression(terms),)).fetchall()
                    raw_ms.append((time.perf_counter_ns() - t0) / 1e6)
        matches = [
            raw.execute(
                "SELECT count(*) FROM processes_fts WHERE processes_fts MATCH ?",
                (_match_expression(search_terms(q)),),
            ).fetchone()[0]
            if search_terms(q)
            else 0
            for q in queries
        ]
    finally:
        raw.close()
    return find_ms, raw_ms, hits, sum(matches) / len(matches)


@contextlib.contextmanager
def memory_server(data_dir: Path) -> Iterator[str]:
    """Start robot-mcp-memory over SSE on a free port; yield its base URL; stop it."""
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
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen([exe], env=env, stdout=log, stderr=log)
        try:
            _wait_ready(proc, log, base)
            yield base
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait_ready(proc: subprocess.Popen[bytes], log: IO[bytes], base: str) -> None:
    """Poll GET /healthz until it answers 200; raise if the server exits or 30 s pass."""
    deadline = time.monotonic() + 30
    while True:
        if proc.poll() is not None:
            log.seek(0)
            raise RuntimeError(
                f"robot-mcp-memory exited with {proc.returncode}: "
                f"{log.read().decode(errors='replace')[-2000:]}"
            )
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("robot-mcp-memory did not answer /healthz within 30 s")
        time.sleep(0.1)


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", default="1000,10000,100000", help="corpus sizes, comma-separated"
    )
    parser.add_argument("--queries", type=int, default=400, help="queries per size (each side)")
    parser.add_argument("--no-sse", action="store_true", help="skip the over-SSE measurement")
    parser.add_argument("--sse-calls", type=int, default=200, help="find_processes calls over SSE")
    args = parser.parse_args()
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    results = [run_size(size, args.queries, not args.no_sse, args.sse_calls) for size in sizes]
    return report(results)


if __name__ == "__main__":
    sys.exit(main())
