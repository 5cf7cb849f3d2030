"""The cost of telemetry: poster throughput and find latency, off, on and sampled out.

    uv run python benchmarks/bench_observability.py [--events N] [--chunk C]
                                                    [--docs D] [--queries Q]

Three modes, interleaved in one run (the order rotates, so all see the same load):

- off:  telemetry off (``telemetry.disable()``): installed, the SDK even loaded in this
        process, nothing recorded: every hook returns at its first check. A process where
        telemetry was never turned on runs exactly those hooks without importing
        OpenTelemetry at all (tests/unit/test_telemetry.py proves no module is loaded);
        the cost of one such hook call is measured too (ns per call), and reported per
        event;
- on:   spans and metrics recorded through the SDK (batch span processor, periodic metric
        reader every second) and exported over OTLP/HTTP to a collector process on
        loopback (``tests/integration/_otlp_collector.py``);
- sampled-out: the same providers, but each planner's call carries a ``traceparent``
        whose sampled flag is clear (the planner decided not to record this trace): no
        span is made at all, the trace context is still passed on, metrics are recorded.

Poster: the bench_poster receiver (a uvicorn subprocess answering 200); each side posts a
chunk of C events inside a tool call's SERVER span and a task's span (every POST then
carries a ``traceparent`` and, when sampled, is a CLIENT span), then ``flush()``; events/s
over all chunks.

Find: a lexical ``ProcessStore`` of D synthetic documents (bench_memory's corpus); each
query runs in each mode inside ``telemetry.server_span("tools/call", "find_processes")``
(the span a tool call adds; a no-op while off), so ``on`` pays the SERVER span, the
``memory.find`` span and its ``memory.search.lexical`` child, and two histograms. p50 ms.

Ratios in one run against off (issue 35's goals): on ≥ 0.95 for throughput and ≤ 1.03 for
find p50; sampled-out within 2 % of off for both (the noise of a shared two-core machine).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_memory import Corpus, _pseudo_words, build  # noqa: E402
from bench_poster import RECEIVER, make_events  # noqa: E402

from robot_mcp_kit import EventPoster, telemetry  # noqa: E402

SECRET = "bench-secret"
COLLECTOR = HERE.parent / "tests" / "integration" / "_otlp_collector.py"
TARGET_THROUGHPUT = 0.95
TARGET_LATENCY = 1.03
TARGET_UNSAMPLED = 0.02  # "costs nothing measurable": within the noise of a shared machine
MODES = ("off", "on", "sampled-out")
FIND_BLOCK = 20
UNSAMPLED = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"}
"""The caller's trace with its sampled flag clear: the planner decided not to record it."""


class Modes:
    """Switches telemetry between the three modes; owns the SDK providers of ``on``."""

    def __init__(self, collector_url: str) -> None:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        resource = Resource.create({"service.name": "bench"})
        self.tracer_provider = TracerProvider(resource=resource)
        self.tracer_provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{collector_url}/v1/traces"))
        )
        self.meter_provider = MeterProvider(
            resource=resource,
            metric_readers=[
                PeriodicExportingMetricReader(
                    OTLPMetricExporter(endpoint=f"{collector_url}/v1/metrics"),
                    export_interval_millis=1000,
                )
            ],
        )

    def set(self, mode: str) -> None:
        if mode == "off":
            telemetry.disable()
        else:  # sampled-out: the same providers; the caller's trace says "not sampled"
            telemetry.enable(
                tracer_provider=self.tracer_provider, meter_provider=self.meter_provider
            )

    def flush(self, mode: str) -> None:
        """Export what ``mode`` recorded (nothing while off)."""
        if mode != "off":
            self.tracer_provider.force_flush()

    def close(self) -> None:
        telemetry.disable()
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


def start(argv: list[str]) -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    return process, int(process.stdout.readline())


def stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


async def bench_poster(
    modes: Modes, port: int, n: int, chunk: int
) -> tuple[dict[str, float], dict[str, float]]:
    """Events/s per mode, and this process's CPU µs per event (every thread: the span
    exporter's too)."""
    url = f"http://127.0.0.1:{port}/api/agent/events"
    events = make_events(n)
    async with httpx.AsyncClient(trust_env=False, timeout=10) as probe:
        deadline = time.monotonic() + 20
        while True:
            try:
                await probe.get(f"http://127.0.0.1:{port}/count")
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise SystemExit("receiver did not answer within 20 s") from None
                await asyncio.sleep(0.05)
    posters: dict[str, EventPoster] = {}
    for mode in MODES:  # each poster built in its mode (metrics are registered at build)
        modes.set(mode)
        posters[mode] = EventPoster(
            "navigation", url, SECRET, queue_max=len(events) + 1, outbox=False
        )
    wall = dict.fromkeys(MODES, 0.0)
    cpu = dict.fromkeys(MODES, 0.0)
    try:
        for mode in MODES:  # connect before timing
            modes.set(mode)
            await posters[mode].post(events[0])
            await posters[mode].flush()
        for i, lo in enumerate(range(0, n, chunk)):
            hi = min(lo + chunk, n)
            for mode in MODES[i % 3 :] + MODES[: i % 3]:
                modes.set(mode)
                poster = posters[mode]
                t0, c0 = time.perf_counter(), time.process_time()
                with request(mode, "sleep_task"), telemetry.span("task bench"):
                    for event in events[lo:hi]:
                        await poster.post(event)
                await poster.flush()
                # Each mode pays for its own export here, so none spills into the next.
                modes.flush(mode)
                wall[mode] += time.perf_counter() - t0
                cpu[mode] += time.process_time() - c0
    finally:
        for mode in MODES:
            modes.set(mode)
            await posters[mode].aclose()
    for mode, poster in posters.items():
        stats = poster.stats
        if stats.sent != n + 1 or stats.dropped or stats.given_up:
            raise SystemExit(f"events lost in mode {mode}: {stats}")
    rate = {mode: n / seconds for mode, seconds in wall.items()}
    return rate, {mode: seconds / n * 1e6 for mode, seconds in cpu.items()}


def bench_find(modes: Modes, docs: int, queries: int) -> tuple[dict[str, float], dict[str, float]]:
    """p50 ms per query and mean ms per query with the mode's export, per mode."""
    with tempfile.TemporaryDirectory(prefix="bench-observability-") as tmp:
        store, _ = build(Path(tmp), docs, seed=21)
        corpus = Corpus(random.Random(99), _pseudo_words(random.Random(100), 3000))
        asked = [corpus.query() for _ in range(queries)]
        times: dict[str, list[float]] = {mode: [] for mode in MODES}
        totals = dict.fromkeys(MODES, 0.0)
        try:
            for q in asked[:20]:  # warm the page cache and statement caches
                store.find(q, k=3)
            # Blocks of FIND_BLOCK queries per mode, the order rotating; each block ends
            # with its mode's export (timed in the block's total, not in any query's p50),
            # so no mode's exporter thread runs during another mode's queries.
            for b, lo in enumerate(range(0, queries, FIND_BLOCK)):
                for mode in MODES[b % 3 :] + MODES[: b % 3]:
                    modes.set(mode)
                    block0 = time.perf_counter_ns()
                    for q in asked[lo : lo + FIND_BLOCK]:
                        t0 = time.perf_counter_ns()
                        with request(mode, "find_processes"):
                            store.find(q, k=3)
                        times[mode].append((time.perf_counter_ns() - t0) / 1e6)
                    modes.flush(mode)
                    totals[mode] += (time.perf_counter_ns() - block0) / 1e6
        finally:
            store.close()
    p50 = {mode: statistics.median(values) for mode, values in times.items()}
    return p50, {mode: total / queries for mode, total in totals.items()}


def request(mode: str, tool: str) -> Any:
    """The SERVER span of a planner's call: the caller's trace sampled out in that mode."""
    return telemetry.server_span("tools/call", tool, UNSAMPLED if mode == "sampled-out" else None)


def off_hook_ns() -> float:
    """ns per hook call while off: a span enter/exit, trace_headers() and active()."""
    telemetry.disable()
    rounds = 200_000
    t0 = time.perf_counter_ns()
    for _ in range(rounds):
        with telemetry.span("x"):
            pass
        telemetry.trace_headers()
        telemetry.active()
    return (time.perf_counter_ns() - t0) / rounds / 3


def exported(port: int) -> dict[str, int]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/count", timeout=10) as answer:
        counts: dict[str, int] = json.loads(answer.read())
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=3000, help="events per mode")
    parser.add_argument("--chunk", type=int, default=200, help="events per alternation")
    parser.add_argument("--docs", type=int, default=5000, help="documents in the find corpus")
    parser.add_argument("--queries", type=int, default=600, help="find queries per mode")
    args = parser.parse_args()

    if telemetry.active() or any(m.startswith("opentelemetry") for m in sys.modules):
        raise SystemExit("telemetry is on from the environment: unset the OTEL_* variables")
    hook_ns = off_hook_ns()  # before anything imports OpenTelemetry
    if any(m.startswith("opentelemetry") for m in sys.modules):
        raise SystemExit("a hook imported OpenTelemetry while off")
    collector, collector_port = start([sys.executable, str(COLLECTOR)])
    receiver, receiver_port = start([sys.executable, "-c", RECEIVER])
    modes = Modes(f"http://127.0.0.1:{collector_port}")
    try:
        rate, cpu_us = asyncio.run(bench_poster(modes, receiver_port, args.events, args.chunk))
        p50, mean = bench_find(modes, args.docs, args.queries)
        modes.set("on")
        modes.tracer_provider.force_flush()
        modes.meter_provider.force_flush()
        counts = exported(collector_port)
    finally:
        modes.close()
        stop(receiver)
        stop(collector)

    print(f"poster: {args.events} events per mode, interleaved in chunks of {args.chunk}")
    for mode in MODES:
        print(f"  {mode:11}: {rate[mode]:8.0f} ev/s  (CPU {cpu_us[mode]:.0f} µs/event)")
    print(f"find: {args.queries} queries per mode over {args.docs} documents (lexical)")
    for mode in MODES:
        print(f"  {mode:11}: p50 {p50[mode]:.3f} ms  (mean with its export {mean[mode]:.3f} ms)")
    print(f"exported to the collector: {counts['spans']} spans, {counts['points']} data points")
    throughput_on = rate["on"] / rate["off"]
    latency_on = p50["on"] / p50["off"]
    throughput_unsampled = rate["sampled-out"] / rate["off"]
    latency_unsampled = p50["sampled-out"] / p50["off"]
    ok = (
        throughput_on >= TARGET_THROUGHPUT
        and latency_on <= TARGET_LATENCY
        and throughput_unsampled >= 1 - TARGET_UNSAMPLED
        and latency_unsampled <= 1 + TARGET_UNSAMPLED
    )
    # While off, an event passes about 4 hooks (trace_headers at post, the attempt's
    # client_span and active(), the delivery histogram) and a find about 5.
    per_event_us = 4 * hook_ns / 1000
    print(
        f"off, never imported: {hook_ns:.0f} ns per hook call, about {per_event_us:.2f} µs per "
        f"event ({per_event_us * rate['off'] / 1e6:.2%} of the off poster's time per event)"
    )
    print(f"ratio poster throughput on/off: {throughput_on:.3f}  (target >= {TARGET_THROUGHPUT})")
    print(f"ratio find p50 on/off: {latency_on:.3f}  (target <= {TARGET_LATENCY})")
    print(
        f"ratio poster throughput sampled-out/off: {throughput_unsampled:.3f}  "
        f"(target >= {1 - TARGET_UNSAMPLED})"
    )
    print(
        f"ratio find p50 sampled-out/off: {latency_unsampled:.3f}  "
        f"(target <= {1 + TARGET_UNSAMPLED})"
    )
    print("OK" if ok else "ABOVE A GOAL")
    if counts["spans"] == 0:
        raise SystemExit("nothing was exported: the 'on' figures measured no telemetry")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
