"""Fair share (issue 18): a victim robot's find latency alone and while another robot abuses
the server, as ratios measured in one run, and the server's memory growth.

    uv run python benchmarks/bench_fairness.py [--blocks 8] [--block 25] [--docs 1000]
                                               [--big-docs 50] [--search lexical|hybrid]
                                               [--scenarios "big answers,call flood"]
                                               [--server-env NAME=VALUE ...]

One memory server (the ``robot-mcp-memory`` console script over SSE, started once for the
run) holds a seeded fleet: group ``line-a`` with the noisy robot ``rap-1``, group
``line-b`` with the victim ``rap-3``, each on its own robot token (``MEMORY_ROBOT_TOKENS``),
the server's share settings at their defaults unless ``--server-env`` says otherwise.
Documents: ``--docs`` varied process documents (``bench_memory.py``'s corpus) owned by the
two robots, 10 % of them shared, and ``--big-docs`` documents near the 256 KiB limit owned
by rap-1, all about fetching the parcel from the mailroom.

For each scenario an abuser process (the noisy robot) connects and waits; the victim, its
own process with one SSE session, warms up and then alternates ``--blocks`` pairs of blocks
of ``--block`` sequential ``find_processes(query, k=3)`` calls (seeded queries), pausing
``--victim-gap-ms`` (200) after each: five finds a second is far more than a brain makes,
and a robot calling back to back without pause is, by the time share's measure, one that
keeps the server busy (it is paced like the abuser). One block with the abuse switched
on (after a 1 s ramp, in which the abuser spends the burst of running time its lane may
use at full speed), one with it off (after the abuser's calls have all been answered),
which first alternating. Alone and abused calls are therefore
measured under the same machine load (this benchmark's machine is shared), and the ratio
of their percentiles is the figure. Every victim answer must be a list of processes (an
error answer or an exception is a failure). While a scenario runs, a thread samples the
server's ``VmRSS`` from ``/proc/<pid>/status`` every 50 ms.

Scenarios (``SCENARIOS``: a name, one line saying what it does, the function an abuser
process runs; add a row for another abuse, e.g. connection hoarding or a save flood):

- **big answers** — rap-1 opens 8 SSE sessions, each looping ``find_processes("fetch the
  parcel from the mailroom", k=50)`` over the big documents (the issue's measurement: 8
  such connections took another group's p50 from 20 ms to 1.3 s); the sessions past its
  stream share are refused (counted as ``busy``) and it loops on those it got.
- **call flood** — rap-1 keeps 200 such calls in flight on one SSE session, sending the
  next as soon as one is answered, ``busy`` or not (a client that ignores
  ``retry_after_s``): on SSE every POST is accepted at once, so only the server's own
  bound stands between the flood and its memory.
- **connection hoarding** — rap-1 opens 300 SSE streams and holds them (the issue: one
  robot held every connection up to ``MEMORY_MAX_CONNECTIONS`` and another group got 503);
  past its share it gets ``429`` (counted as ``busy``).
- **save flood** — rap-1 saves documents of 2 000 new distinct words back to back on 4
  sessions (the issue: one small save a second pushed another group's find p95 from 26 ms
  to 5 s by dropping the typo-repair vocabulary); past its document share the saves
  rewrite its own documents.

Reported per scenario: the victim's p50 / p95 alone and abused, the ratios, its failures,
what the abuser got (answers, ``busy`` refusals, errors, MiB received), and the server's
peak RSS with its growth over the RSS before the first scenario. Targets (issue 18):
victim p95 under any abuse <= 2 x alone with no failures, and the server's peak RSS at
most 128 MiB above where it started.
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
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench_memory import (
    Corpus,
    _pseudo_words,
    percentile,
    sse_available,
)

from robot_mcp_kit.testing import ServiceProcess, free_port
from robot_mcp_memory.backends import storage_at
from robot_mcp_memory.processes import ProcessDoc, ProcessService

TARGET_P95_RATIO = 2.0
TARGET_RSS_GROWTH_MIB = 128.0
GROUPS = {"line-a": "rap-1", "line-b": "rap-3"}
NOISY, VICTIM = "rap-1", "rap-3"
NOISY_QUERY = "fetch the parcel from the mailroom"
SHARED_FRACTION = 0.10
WARMUP_CALLS = 20
ABUSE_RAMP_S = 1.0  # after switching the abuse on, before the victim's block starts: the
# abuser spends its burst (ROBOT_BURST_S, allowed by design) and the victim measures the rest
QUIET_S = 0.2  # after the abuser's last call is answered, before an alone block starts
RSS_SAMPLE_S = 0.05
CALL_TIMEOUT = timedelta(seconds=120)  # an answer that never comes is an error, not a hang
ABUSER_NICE = 10


# --- the fleet ------------------------------------------------------------------------------


def big_doc(i: int, rng: random.Random, size: int) -> ProcessDoc:
    """A document of about ``size`` bytes about the mailroom parcel, owned by the noisy robot."""
    words = ["parcel", "mailroom", "fetch", "shelf", "badge", "door", "corridor", "scan"]
    lines = ["## Steps"]
    total = 0
    while total < size:
        line = f"{len(lines)}. " + " ".join(rng.choice(words) for _ in range(14))
        lines.append(line)
        total += len(line) + 1
    return ProcessDoc(
        id=f"big-mailroom-{i:03}",
        title=f"Fetch the parcel from the mailroom, variant {i}",
        task_pattern="fetch ... parcel ... mailroom",
        tags=["mailroom", "parcel"],
        robot=NOISY,
        source_mission_id=f"m-big-{i}",
        body="\n".join(lines) + "\n",
    )


def seed(directory: Path, n_docs: int, n_big: int, seed: int = 18) -> None:
    """Write the fleet's documents straight into ``index.db`` (the registry is set up over
    MCP by the admin once the server runs)."""
    corpus = Corpus(random.Random(seed), _pseudo_words(random.Random(seed + 1), 3000))
    rng = random.Random(seed + 2)
    robots = list(GROUPS.values())
    store = ProcessService(storage_at(str(directory)).open().processes, robot_id="bench")
    try:
        for i in range(n_docs):
            shared = corpus.rng.random() < SHARED_FRACTION
            store.save(corpus.doc(i).model_copy(update={"robot": robots[i % 2], "shared": shared}))
        for i in range(n_big):
            store.save(big_doc(i, rng, 250 * 1024))
    finally:
        store.close()


@dataclass
class Server:
    base: str
    pid: int
    admin: str
    tokens: dict[str, str]


@contextlib.contextmanager
def memory_server(
    data_dir: Path, search: str, extra_env: Mapping[str, str], log: Path | None = None
) -> Iterator[Server]:
    """The memory server over SSE with an admin token and the two robots' tokens; its
    output goes to ``log`` when given."""
    exe = shutil.which("robot-mcp-memory") or str(
        Path(sys.executable).with_name("robot-mcp-memory")
    )
    port = free_port()
    admin = secrets.token_urlsafe(24)
    tokens = {robot: secrets.token_urlsafe(24) for robot in GROUPS.values()}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORY_", "MCP_", "ROBOT_ID"))}
    env.update(
        MCP_TRANSPORT="sse",
        MCP_PORT=str(port),
        MCP_HOST="127.0.0.1",
        MEMORY_DATA_DIR=str(data_dir),
        ROBOT_ID="bench",
        MEMORY_SEARCH=search,
        MEMORY_TOKEN=admin,
        MEMORY_ROBOT_TOKENS=",".join(f"{r}:{t}" for r, t in tokens.items()),
        **extra_env,
    )
    base = f"http://127.0.0.1:{port}"
    with contextlib.ExitStack() as stack:
        output = stack.enter_context(log.open("ab")) if log is not None else None
        service = ServiceProcess(
            "robot-mcp-memory",
            [exe],
            port,
            env=env,
            inherit_env=False,
            ready=f"{base}/healthz",
            output=output,
        )
        with service.start(ready_timeout_s=120):
            assert service.pid is not None
            yield Server(base, service.pid, admin, tokens)


async def setup_registry(server: Server) -> None:
    from mcp import ClientSession
    from mcp.client.sse import sse_client

    headers = {"Authorization": f"Bearer {server.admin}"}
    async with (
        sse_client(f"{server.base}/sse", headers) as (read, write),
        ClientSession(read, write, read_timeout_seconds=CALL_TIMEOUT) as session,
    ):
        await session.initialize()
        for group, robot in GROUPS.items():
            for tool, args in (
                ("upsert_group", {"group_id": group}),
                ("register_robot", {"robot_id": robot, "group_id": group}),
            ):
                result = await session.call_tool(tool, args)
                text = result.content[0].text  # type: ignore[union-attr]
                if result.isError or "error" in json.loads(text):
                    raise RuntimeError(f"setup {tool}({args}) answered {text[:300]}")


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


class RssSampler:
    """Samples a process's VmRSS on a thread while the ``with`` block runs."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.start_mib = rss_mib(pid)
        self.peak_mib = self.start_mib
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(RSS_SAMPLE_S):
            self.peak_mib = max(self.peak_mib, rss_mib(self.pid))

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_mib = max(self.peak_mib, rss_mib(self.pid))


# --- the victim -----------------------------------------------------------------------------


@dataclass
class VictimResult:
    alone_ms: list[float] = field(default_factory=list)
    abused_ms: list[float] = field(default_factory=list)
    failures: int = 0
    samples: list[str] = field(default_factory=list)
    fatal: str = ""


@dataclass(frozen=True)
class Plan:
    """How the victim alternates: ``blocks`` pairs of ``block`` calls alone and abused, a
    call every ``gap_s`` at most."""

    blocks: int
    block: int
    gap_s: float


async def _victim(
    base: str, token: str, queries: list[str], plan: Plan, abuser: Any
) -> VictimResult:
    """Warm up, then alternate blocks of calls alone and under abuse (which first alternates
    too); ``abuser`` is ``(go, in_flight)``: the victim switches the abuse on and waits for
    the abuser's calls to drain before an alone block."""
    from mcp import ClientSession
    from mcp.client.sse import sse_client

    go, in_flight = abuser
    out = VictimResult()
    headers = {"Authorization": f"Bearer {token}"}
    calls = iter(queries)

    async def one(record: list[float] | None) -> None:
        query = next(calls)
        t0 = time.perf_counter_ns()
        try:
            result = await session.call_tool("find_processes", {"query": query, "k": 3})
            answer = json.loads(result.content[0].text)  # type: ignore[union-attr]
            ok = not result.isError and isinstance(answer.get("processes"), list)
        except Exception as exc:  # counted, not fatal
            ok, answer = False, {"exception": f"{type(exc).__name__}: {exc}"}
        elapsed = (time.perf_counter_ns() - t0) / 1e6
        if not ok:
            out.failures += 1
            if len(out.samples) < 3:
                out.samples.append(json.dumps(answer)[:200])
        elif record is not None:
            record.append(elapsed)

    async with (
        sse_client(f"{base}/sse", headers, sse_read_timeout=300) as (read, write),
        ClientSession(read, write, read_timeout_seconds=CALL_TIMEOUT) as session,
    ):
        await session.initialize()
        for _ in range(WARMUP_CALLS):
            await one(None)
        for n in range(plan.blocks):
            for abused in (True, False) if n % 2 == 0 else (False, True):
                if abused:
                    go.set()
                    await asyncio.sleep(ABUSE_RAMP_S)
                else:
                    go.clear()
                    await drained(in_flight)
                    await asyncio.sleep(QUIET_S)
                for _ in range(plan.block):
                    await one(out.abused_ms if abused else out.alone_ms)
                    await asyncio.sleep(plan.gap_s)
        go.clear()
    return out


async def drained(in_flight: Any) -> None:
    """Return once the abuser (another process: no event to await) has no call in flight."""
    for _ in range(30_000):
        if in_flight.value <= 0:
            return
        await asyncio.sleep(0.02)
    raise RuntimeError("the abuser's calls never drained")


def _victim_process(
    base: str, token: str, queries: list[str], plan: Plan, abuser: Any, results: Any
) -> None:
    try:
        result = asyncio.run(_victim(base, token, queries, plan, abuser))
    except BaseException as exc:
        result = VictimResult(fatal=f"{type(exc).__name__}: {exc}")
    results.put(result)


# --- the abusers ----------------------------------------------------------------------------


@dataclass
class AbuseResult:
    answers: int = 0
    busy: int = 0
    errors: int = 0
    exceptions: int = 0
    received_bytes: int = 0
    fatal: str = ""


class Control:
    """What an abuser obeys: call only while ``go`` is set, until ``stop``; ``in_flight``
    counts its calls not yet answered (shared with the victim, which waits for zero)."""

    def __init__(self, go: Any, stop: Any, in_flight: Any) -> None:
        self.go = go
        self.stop = stop
        self.in_flight = in_flight

    async def turn(self) -> bool:
        """Wait for ``go``; False once ``stop`` is set."""
        while not self.go.is_set():
            if self.stop.is_set():
                return False
            await asyncio.sleep(0.02)
        return not self.stop.is_set()

    async def call(self, out: AbuseResult, session: Any, tool: str, args: dict[str, Any]) -> None:
        """One call, tallied: answers, busy refusals, errors, bytes received."""
        with self.in_flight.get_lock():
            self.in_flight.value += 1
        try:
            result = await session.call_tool(tool, args)
        except Exception:
            out.exceptions += 1
            await asyncio.sleep(0.01)
            return
        finally:
            with self.in_flight.get_lock():
                self.in_flight.value -= 1
        text = "".join(getattr(part, "text", "") for part in result.content)
        out.received_bytes += len(text.encode("utf-8"))
        try:
            answer = json.loads(text)
        except json.JSONDecodeError:
            answer = {"error": "not json"}
        if answer.get("error") == "busy":
            out.busy += 1
        elif result.isError or "error" in answer:
            out.errors += 1
        else:
            out.answers += 1


async def abuse_big_answers(base: str, token: str, control: Control) -> AbuseResult:
    """8 SSE sessions of the noisy robot, each looping find_processes(k=50)."""
    from mcp import ClientSession
    from mcp.client.sse import sse_client

    out = AbuseResult()
    headers = {"Authorization": f"Bearer {token}"}

    async def connection() -> None:
        try:
            async with (
                sse_client(f"{base}/sse", headers, sse_read_timeout=300) as (read, write),
                ClientSession(read, write, read_timeout_seconds=CALL_TIMEOUT) as session,
            ):
                await session.initialize()
                while await control.turn():
                    args = {"query": NOISY_QUERY, "k": 50}
                    await control.call(out, session, "find_processes", args)
        except Exception:
            # Past the robot's stream share (MEMORY_ROBOT_MAX_STREAMS) the stream is refused
            # with 429: the abuser goes on with the sessions it got.
            out.busy += 1

    await asyncio.gather(*(connection() for _ in range(8)))
    return out


async def abuse_call_flood(base: str, token: str, control: Control) -> AbuseResult:
    """200 find_processes(k=50) calls in flight on one SSE session, busy answers retried
    at once."""
    from mcp import ClientSession
    from mcp.client.sse import sse_client

    out = AbuseResult()
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        sse_client(f"{base}/sse", headers, sse_read_timeout=300) as (read, write),
        ClientSession(read, write, read_timeout_seconds=CALL_TIMEOUT) as session,
    ):
        await session.initialize()

        async def caller() -> None:
            while await control.turn():
                await control.call(out, session, "find_processes", {"query": NOISY_QUERY, "k": 50})

        await asyncio.gather(*(caller() for _ in range(200)))
    return out


async def abuse_connection_hoarding(base: str, token: str, control: Control) -> AbuseResult:
    """300 SSE streams opened and held while the abuse is on (finding 1: one robot held the
    server's every connection); a stream refused (429) counts as ``busy``."""
    import httpx

    out = AbuseResult()
    headers = {"Authorization": f"Bearer {token}"}
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=0)
    async with httpx.AsyncClient(headers=headers, timeout=30, limits=limits) as http:
        while await control.turn():
            async with contextlib.AsyncExitStack() as held:
                for _ in range(300):
                    if not control.go.is_set():
                        break
                    try:
                        response = await held.enter_async_context(http.stream("GET", f"{base}/sse"))
                    except httpx.HTTPError:
                        out.exceptions += 1
                        continue
                    if response.status_code == 200:
                        out.answers += 1
                    elif response.status_code == 429:
                        out.busy += 1
                    else:
                        out.errors += 1
                # go / stop are multiprocessing events (shared with the victim's process):
                # polled, as Control.turn polls them.
                while control.go.is_set() and not control.stop.is_set():  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
    return out


async def abuse_save_flood(base: str, token: str, control: Control) -> AbuseResult:
    """4 SSE sessions saving documents of 2 000 new distinct words each, as fast as answered
    (finding 2: one small save a second had taken another group's find p95 to 5 s); past the
    robot's document share the saves rewrite its own documents."""
    from mcp import ClientSession
    from mcp.client.sse import sse_client

    out = AbuseResult()
    headers = {"Authorization": f"Bearer {token}"}
    rng = random.Random(7)

    async def connection(n: int) -> None:
        async with (
            sse_client(f"{base}/sse", headers, sse_read_timeout=300) as (read, write),
            ClientSession(read, write, read_timeout_seconds=CALL_TIMEOUT) as session,
        ):
            await session.initialize()
            i = 0
            while await control.turn():
                words = " ".join("".join(rng.choices("bcdfghklmnprstvz", k=8)) for _ in range(2000))
                markdown = f"---\nid: flood-{n}-{i % 50}\ntitle: Noise {i}\n---\n\n{words}\n"
                await control.call(out, session, "save_process", {"markdown": markdown})
                i += 1

    await asyncio.gather(*(connection(n) for n in range(4)))
    return out


Abuse = Callable[[str, str, Control], Awaitable[AbuseResult]]


@dataclass(frozen=True)
class Scenario:
    """An abuse: what it does (one line, for the report) and what its process runs."""

    what: str
    run: Abuse


SCENARIOS: dict[str, Scenario] = {
    "big answers": Scenario(
        "rap-1: 8 SSE sessions looping find_processes(k=50) over ~256 KiB documents",
        abuse_big_answers,
    ),
    "call flood": Scenario(
        "rap-1: 200 find_processes(k=50) in flight on one SSE session, busy retried at once",
        abuse_call_flood,
    ),
    "connection hoarding": Scenario(
        "rap-1: 300 SSE streams opened and held (429 past its share counts as busy)",
        abuse_connection_hoarding,
    ),
    "save flood": Scenario(
        "rap-1: 4 SSE sessions saving 2 000-new-word documents back to back",
        abuse_save_flood,
    ),
}
"""Every abuse the benchmark knows, in report order. A new one is a function
``async (base, token, control) -> AbuseResult`` run in its own process as the noisy robot:
it makes its calls through ``control.call`` while ``await control.turn()`` is true (the
victim switches the abuse on and off between its blocks), and a row here."""


def _abuse_process(name: str, base: str, token: str, shared: Any, results: Any) -> None:
    # The abusing *client* would run on its robot, not on the server's machine: niced, its
    # own CPU (parsing its answers) does not count against the server here.
    os.nice(ABUSER_NICE)
    control = Control(*shared)
    try:
        result = asyncio.run(SCENARIOS[name].run(base, token, control))
    except BaseException as exc:
        result = AbuseResult(fatal=f"{type(exc).__name__}: {exc}")
    results.put(result)


# --- one run --------------------------------------------------------------------------------


@dataclass
class Phase:
    name: str
    victim: VictimResult
    abuse: AbuseResult
    rss_start_mib: float
    rss_peak_mib: float


def run_scenario(server: Server, name: str, queries: list[str], plan: Plan) -> Phase:
    """The abuser process (idle until the victim says go), then the victim's blocks."""
    ctx = multiprocessing.get_context("spawn")
    go, stop, in_flight = ctx.Event(), ctx.Event(), ctx.Value("i", 0)
    victim_results, abuse_results = ctx.Queue(), ctx.Queue()
    with RssSampler(server.pid) as rss:
        abuser = ctx.Process(
            target=_abuse_process,
            args=(name, server.base, server.tokens[NOISY], (go, stop, in_flight), abuse_results),
        )
        abuser.start()
        victim = ctx.Process(
            target=_victim_process,
            args=(
                server.base,
                server.tokens[VICTIM],
                queries,
                plan,
                (go, in_flight),
                victim_results,
            ),
        )
        victim.start()
        outcome: VictimResult = victim_results.get(timeout=3600)
        victim.join(30)
        stop.set()
        abuse: AbuseResult = abuse_results.get(timeout=600)
        abuser.join(60)
    if outcome.fatal:
        raise RuntimeError(f"the victim failed: {outcome.fatal}")
    if abuse.fatal:
        raise RuntimeError(f"the {name} abuser failed: {abuse.fatal}")
    return Phase(name, outcome, abuse, rss.start_mib, rss.peak_mib)


def run(
    plan: Plan,
    n_docs: int,
    n_big: int,
    names: list[str],
    search: str,
    env: dict[str, str],
    log: Path | None = None,
) -> int:
    with tempfile.TemporaryDirectory(prefix="bench-fairness-") as tmp:
        data = Path(tmp)
        print(f"[fairness] seeding {n_docs} documents and {n_big} of ~250 KiB ...", flush=True)
        seed(data, n_docs, n_big)
        qcorpus = Corpus(random.Random(7), [])
        queries = [qcorpus.query() for _ in range(2 * plan.blocks * plan.block + WARMUP_CALLS)]
        with memory_server(data, search, env, log) as server:
            asyncio.run(setup_registry(server))
            baseline_mib = rss_mib(server.pid)
            phases = []
            for name in names:
                print(
                    f"[fairness] {name}: the victim makes {plan.blocks} x {plan.block} finds "
                    "alone and as many under abuse, alternating ...",
                    flush=True,
                )
                phases.append(run_scenario(server, name, queries, plan))
    return report(phases, baseline_mib, plan, n_docs, n_big, search, env)


def report(
    phases: list[Phase],
    baseline_mib: float,
    plan: Plan,
    n_docs: int,
    n_big: int,
    search: str,
    env: dict[str, str],
) -> int:
    settings = ", ".join(f"{k}={v}" for k, v in env.items()) or "server defaults"
    print()
    print(
        f"fairness: victim {VICTIM} (line-b) makes sequential find_processes(k=3) calls "
        f"{plan.gap_s * 1000:g} ms apart in {plan.blocks} blocks of {plan.block} alone and "
        f"{plan.blocks} under abuse, alternating; noisy {NOISY} (line-a); {n_docs} documents "
        f"+ {n_big} of ~250 KiB; "
        f"search {search}; {settings}; {os.cpu_count()} CPUs; server RSS {baseline_mib:.0f} "
        "MiB before the first abuse"
    )
    for phase in phases:
        print(f"  {phase.name}: {SCENARIOS[phase.name].what}")
    print()
    print(
        f"{'scenario':<12} {'alone p50':>9} {'p95':>6} | {'abused p50':>10} {'p95':>6} "
        f"{'max':>6} | {'p50 x':>5} {'p95 x':>5} {'fail':>4} | {'abuser ok':>9} {'busy':>6} "
        f"{'err':>4} {'MiB recv':>8} | {'RSS peak':>8} {'growth':>7}"
    )
    failures = 0
    verdicts = []
    for phase in phases:
        v, a = phase.victim, phase.abuse
        p50, p95 = percentile(v.alone_ms, 0.5), percentile(v.alone_ms, 0.95)
        q50, q95 = percentile(v.abused_ms, 0.5), percentile(v.abused_ms, 0.95)
        growth = phase.rss_peak_mib - baseline_mib
        print(
            f"{phase.name:<12} {p50:>7.1f}ms {p95:>4.1f}ms | {q50:>8.1f}ms {q95:>4.1f}ms "
            f"{max(v.abused_ms):>4.0f}ms | {q50 / p50:>5.2f} {q95 / p95:>5.2f} {v.failures:>4} | "
            f"{a.answers:>9} {a.busy:>6} {a.errors + a.exceptions:>4} "
            f"{a.received_bytes / 2**20:>8.1f} | {phase.rss_peak_mib:>6.0f}Mi {growth:>+5.0f}Mi"
        )
        for sample in v.samples:
            print(f"    victim failure, e.g. {sample}")
        ok = q95 / p95 <= TARGET_P95_RATIO and v.failures == 0
        ok_rss = growth <= TARGET_RSS_GROWTH_MIB
        failures += (not ok) + (not ok_rss)
        verdicts.append(
            f"{phase.name}: victim p95 {q95 / p95:.2f} x alone (target <= {TARGET_P95_RATIO:g}, "
            f"no failures) {'PASS' if ok else 'FAIL'}; server peak RSS {growth:+.0f} MiB "
            f"(target <= {TARGET_RSS_GROWTH_MIB:g}) {'PASS' if ok_rss else 'FAIL'}"
        )
    print()
    print("\n".join(verdicts))
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=8, help="victim blocks of each kind")
    parser.add_argument("--block", type=int, default=25, help="victim finds per block")
    parser.add_argument(
        "--victim-gap-ms",
        type=float,
        default=200.0,
        help="pause between the victim's calls (0: back to back, which the time share "
        "paces like any robot that keeps the server busy)",
    )
    parser.add_argument("--docs", type=int, default=1000, help="ordinary documents")
    parser.add_argument("--big-docs", type=int, default=50, help="documents of ~250 KiB")
    parser.add_argument(
        "--scenarios",
        default=",".join(SCENARIOS),
        help=f"comma-separated, from: {', '.join(SCENARIOS)}",
    )
    parser.add_argument("--search", choices=["lexical", "hybrid"], default="hybrid")
    parser.add_argument(
        "--server-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting for the server, e.g. MEMORY_ROBOT_MAX_CALLS=1 (repeatable)",
    )
    parser.add_argument("--server-log", type=Path, help="append the server's log to this file")
    args = parser.parse_args()
    names = [n.strip() for n in args.scenarios.split(",") if n.strip()]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario(s) {unknown}; known: {', '.join(SCENARIOS)}")
    env = dict(item.split("=", 1) for item in args.server_env)
    why = sse_available()
    if why:
        print(f"fairness benchmark skipped: {why}")
        return 1
    plan = Plan(args.blocks, args.block, args.victim_gap_ms / 1000)
    return run(plan, args.docs, args.big_docs, names, args.search, env, args.server_log)


if __name__ == "__main__":
    sys.exit(main())
