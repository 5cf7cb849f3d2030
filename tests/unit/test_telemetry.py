"""Telemetry (issue 21) with the real OpenTelemetry SDK and in-memory exporters.

A tool call through a real MCP client (in memory) to the sleeper continues the caller's
trace; its task runs in a child span; each webhook attempt is a CLIENT span whose
``traceparent`` goes out as a header; an event kept in the outbox keeps its trace across a
restart; while telemetry is off no OpenTelemetry module is imported at all.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from mcp.shared.memory import create_connected_server_and_client_session
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from robot_mcp_kit import EventPoster, RetryPolicy, TaskEvent, TaskManager, telemetry
from robot_mcp_kit.models import new_event_id, utc_now
from robot_mcp_kit.store import Kind, Schema, SqliteStore, Table

REPO = Path(__file__).resolve().parents[2]
SLEEPER_PATH = REPO / "examples" / "sleeper.py"
SECRET = "s3cret"
URL = "http://brain.test/api/agent/events"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
FAST = RetryPolicy(delays_s=(0.01,), then_every_s=0.01, give_up_after_s=600)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Telemetry on, with an in-memory span exporter; off again afterwards."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.enable(tracer_provider=provider, meter_provider=MeterProvider())
    try:
        yield exporter
    finally:
        telemetry.disable()
        provider.shutdown()


@pytest.fixture
def metrics() -> Iterator[InMemoryMetricReader]:
    """Telemetry on, with an in-memory metric reader; off again afterwards."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    telemetry.enable(tracer_provider=TracerProvider(), meter_provider=provider)
    try:
        yield reader
    finally:
        telemetry.disable()
        provider.shutdown()


@pytest.fixture(scope="module")
def sleeper() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sleeper_for_telemetry", SLEEPER_PATH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Brain:
    """Answers each POST with the next scripted status and records the requests."""

    def __init__(self, statuses: Callable[[int], int] = lambda n: 200) -> None:
        self.statuses = statuses
        self.requests: list[httpx.Request] = []

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        self.requests.append(request)
        return httpx.Response(self.statuses(len(self.requests)))

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)


def event(seq: int, task_id: str = "nav-7f3a2b") -> TaskEvent:
    return TaskEvent(
        event_id=new_event_id(),
        task_id=task_id,
        server="navigation",
        tool="navigate_to",
        type="progress",
        seq=seq,
        ts=utc_now(),
        payload={"n": seq},
    )


def trace_id_of(traceparent: str) -> str:
    return traceparent.split("-")[1]


def hex_trace(span: ReadableSpan) -> str:
    assert span.context is not None
    return f"{span.context.trace_id:032x}"


async def wait_until(predicate: Callable[[], bool], timeout_s: float = 5.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not predicate():
            await asyncio.sleep(0.005)


class TestOneTrace:
    async def test_a_tool_call_its_task_and_its_webhooks_share_the_callers_trace(
        self, sleeper, spans
    ):
        """SERVER span from params._meta, the task span under it, CLIENT spans and headers."""
        brain = Brain(lambda n: 503 if n == 1 else 200)  # the first attempt is retried
        poster = EventPoster("sleeper", URL, SECRET, transport=brain.transport, retry=FAST)
        manager = TaskManager("sleeper", poster, known_trigger_types=sleeper.KNOWN_TRIGGER_TYPES)
        server = sleeper.build_server(manager)
        try:
            async with create_connected_server_and_client_session(server) as session:
                result = await session.call_tool(
                    "sleep_task",
                    {"duration_s": 0.05, "tick_s": 0.05},
                    meta={"traceparent": CALLER, "tracestate": "robot=r2"},
                )
                task_id = json.loads(result.content[0].text)["task_id"]  # type: ignore[union-attr]
                await wait_until(
                    lambda: (
                        any(b"task_done" in r.content for r in brain.requests)
                        and poster.stats.queued == 0
                    )
                )
        finally:
            await manager.aclose()
            await poster.aclose()

        finished = spans.get_finished_spans()
        (call,) = [s for s in finished if s.name == "tools/call sleep_task"]
        assert call.kind == SpanKind.SERVER
        assert hex_trace(call) == TRACE_ID
        assert call.parent is not None
        assert f"{call.parent.span_id:016x}" == "00f067aa0ba902b7"
        assert call.attributes is not None
        assert call.attributes["mcp.method.name"] == "tools/call"
        assert call.attributes["gen_ai.tool.name"] == "sleep_task"
        assert "jsonrpc.request.id" in call.attributes

        (task,) = [s for s in finished if s.name == "task sleep_task"]
        assert task.parent is not None
        assert call.context is not None
        assert task.parent.span_id == call.context.span_id
        assert task.attributes is not None
        assert task.attributes["robot_mcp.task.id"] == task_id
        assert task.attributes["robot_mcp.task.state"] == "succeeded"

        posts = [s for s in finished if s.kind == SpanKind.CLIENT]
        assert len(posts) == len(brain.requests) >= 3  # task_started?/progress, retry, done
        assert {hex_trace(s) for s in posts} == {TRACE_ID}
        assert task.context is not None
        assert all(s.parent is not None and s.parent.span_id == task.context.span_id for s in posts)
        retried = [
            s
            for s in posts
            if s.attributes and s.attributes.get("http.response.status_code") == 503
        ]
        assert len(retried) == 1
        assert retried[0].attributes is not None
        assert retried[0].attributes["robot_mcp.delivery.attempt"] == 1
        assert retried[0].attributes["robot_mcp.delivery.retry_delay_s"] == 0.01
        assert retried[0].attributes["robot_mcp.delivery.outcome"] == "retry"

        span_ids = {f"{s.context.span_id:016x}" for s in posts if s.context is not None}
        for request in brain.requests:
            header = request.headers["traceparent"]
            assert trace_id_of(header) == TRACE_ID
            assert header.split("-")[2] in span_ids  # each attempt names its own span
            assert request.headers["tracestate"] == "robot=r2"

    async def test_a_call_without_traceparent_starts_a_trace_its_webhooks_carry(
        self, sleeper, spans
    ):
        """No traceparent in _meta: a new trace, the same one on the webhook."""
        brain = Brain()
        poster = EventPoster("sleeper", URL, SECRET, transport=brain.transport)
        manager = TaskManager("sleeper", poster, known_trigger_types=sleeper.KNOWN_TRIGGER_TYPES)
        server = sleeper.build_server(manager)
        try:
            async with create_connected_server_and_client_session(server) as session:
                await session.call_tool("sleep_task", {"duration_s": 0.01, "tick_s": 0.01})
                await wait_until(lambda: any(b"task_done" in r.content for r in brain.requests))
        finally:
            await manager.aclose()
            await poster.aclose()
        (call,) = [s for s in spans.get_finished_spans() if s.name == "tools/call sleep_task"]
        assert call.parent is None
        assert {trace_id_of(r.headers["traceparent"]) for r in brain.requests} == {hex_trace(call)}

    @pytest.mark.parametrize(
        "meta",
        [
            {"traceparent": "00-not-a-trace-01"},
            {"traceparent": 42, "tracestate": ["x"]},
            {"traceparent": "00-" + "0" * 32 + "-00f067aa0ba902b7-01"},
        ],
        ids=["malformed", "not-strings", "zero-trace-id"],
    )
    async def test_a_bad_traceparent_starts_a_new_trace_and_the_call_is_served(
        self, sleeper, spans, meta
    ):
        """A caller's unusable trace context is ignored: a root span, the tool answers."""
        manager = TaskManager("sleeper", EventPoster("sleeper", callback_url=""))
        server = sleeper.build_server(manager)
        try:
            async with create_connected_server_and_client_session(server) as session:
                result = await session.call_tool("list_tasks", {}, meta=meta)
                assert not result.isError
        finally:
            await manager.aclose()
        (call,) = [s for s in spans.get_finished_spans() if s.name == "tools/call list_tasks"]
        assert call.parent is None
        assert hex_trace(call) != "0" * 32

    async def test_a_tool_error_answer_marks_the_server_span(self, sleeper, spans):
        """A result with isError sets error.type=tool_error (MCP semantic conventions)."""
        manager = TaskManager("sleeper", EventPoster("sleeper", callback_url=""))
        server = sleeper.build_server(manager)
        try:
            async with create_connected_server_and_client_session(server) as session:
                result = await session.call_tool("get_task", {})  # task_id missing
                assert result.isError
        finally:
            await manager.aclose()
        (call,) = [s for s in spans.get_finished_spans() if s.name == "tools/call get_task"]
        assert call.attributes is not None
        assert call.attributes["error.type"] == "tool_error"


class TestOutboxKeepsTheTrace:
    async def test_an_event_replayed_after_a_restart_carries_its_trace(self, tmp_path, spans):
        """Posted in a span, kept in the outbox at close, sent by the next poster in that trace."""
        path = tmp_path / "outbox.db"
        down = Brain(lambda n: 503)
        first = EventPoster(
            "navigation",
            URL,
            SECRET,
            transport=down.transport,
            outbox=path,
            retry=FAST,
            close_grace_s=0.05,
        )
        tracer = TracerProvider().get_tracer("test")
        with telemetry.span("mission step"):
            posted_in = telemetry.trace_headers()
            await first.post(event(1))
        assert posted_in is not None
        await wait_until(lambda: len(down.requests) >= 1)
        await first.aclose()
        assert first.stats.kept == 1
        with sqlite3.connect(path) as conn:
            (stored,) = conn.execute("SELECT traceparent FROM outbox_events").fetchone()
        assert stored == posted_in[0]
        del tracer

        telemetry.disable()  # the next process runs without telemetry: the header still goes
        up = Brain()
        second = EventPoster("navigation", URL, SECRET, transport=up.transport, outbox=path)
        await second.start()
        await wait_until(lambda: len(up.requests) == 1)
        await second.aclose()
        assert up.requests[0].headers["traceparent"] == posted_in[0]

    async def test_a_task_reported_interrupted_after_a_restart_is_in_its_trace(
        self, tmp_path, spans
    ):
        """The INTERRUPTED report of a task the last process left running keeps its trace."""
        path = tmp_path / "outbox.db"
        brain = Brain()
        poster = EventPoster("navigation", URL, SECRET, transport=brain.transport, outbox=path)
        manager = TaskManager("navigation", poster)

        async def forever(ctx: Any) -> dict[str, Any]:
            for i in range(1, 1000):
                await ctx.progress({"i": i})
                await asyncio.sleep(0.01)
            return {}

        with telemetry.span("mission step"):
            started_in = telemetry.trace_headers()
            manager.start("navigate_to", forever)
        assert started_in is not None
        await wait_until(lambda: len(brain.requests) >= 2)
        await manager.aclose()  # leaves the running task to be reported at the next start
        await poster.aclose()

        telemetry.disable()
        up = Brain()
        second = EventPoster("navigation", URL, SECRET, transport=up.transport, outbox=path)
        again = TaskManager("navigation", second)
        await second.start()
        await wait_until(lambda: any(b"INTERRUPTED" in r.content for r in up.requests))
        await again.aclose()
        await second.aclose()
        (report,) = [r for r in up.requests if b"INTERRUPTED" in r.content]
        assert trace_id_of(report.headers["traceparent"]) == trace_id_of(started_in[0])

    def test_a_version_1_outbox_file_migrates_and_keeps_its_events(self, tmp_path):
        """An outbox written before the trace columns opens, its pending rows intact."""
        path = tmp_path / "outbox.db"
        v1 = Schema(
            version=1,
            tables=(
                Table(
                    "outbox_events",
                    Kind.RECORD,
                    "CREATE TABLE outbox_events (id INTEGER PRIMARY KEY, event_id TEXT NOT NULL "
                    "UNIQUE, task_id TEXT NOT NULL, seq INTEGER NOT NULL, body BLOB NOT NULL, "
                    "enqueued_at REAL NOT NULL, state TEXT NOT NULL DEFAULT 'pending')",
                ),
                Table(
                    "tasks",
                    Kind.RECORD,
                    "CREATE TABLE tasks (task_id TEXT PRIMARY KEY, state TEXT NOT NULL, seq "
                    "INTEGER NOT NULL, updated_at TEXT NOT NULL, info TEXT NOT NULL)",
                ),
            ),
        )
        old = event(1)
        with SqliteStore(path, v1) as store, store.transaction() as conn:
            conn.execute(
                "INSERT INTO outbox_events (event_id, task_id, seq, body, enqueued_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (old.event_id, old.task_id, old.seq, old.model_dump_json().encode(), 1.0),
            )

        async def replay() -> list[httpx.Request]:
            up = Brain()
            poster = EventPoster("navigation", URL, SECRET, transport=up.transport, outbox=path)
            await poster.start()
            await wait_until(lambda: len(up.requests) == 1)
            await poster.aclose()
            return up.requests

        (request,) = asyncio.run(replay())
        assert json.loads(request.content)["event_id"] == old.event_id
        assert "traceparent" not in request.headers


class TestLogsAndMetrics:
    def test_log_lines_carry_trace_and_span_ids_inside_a_span(self, spans, caplog):
        """trace_id/span_id ride on the kit's lines while a span is current, not outside."""
        from robot_mcp_kit.log import get_logger

        log = get_logger("robot_mcp_kit.test")
        with caplog.at_level(logging.INFO, logger="robot_mcp_kit.test"):
            with telemetry.span("step") as current:
                log.info("inside", n=1)
            log.info("outside", n=2)
        inside, outside = caplog.records
        context = current.get_span_context()
        assert inside.trace_id == f"{context.trace_id:032x}"  # type: ignore[attr-defined]
        assert inside.span_id == f"{context.span_id:016x}"  # type: ignore[attr-defined]
        assert "trace_id=" in inside.getMessage()
        assert not hasattr(outside, "trace_id")

    async def test_the_poster_reports_its_counters_and_delivery_duration(self, metrics):
        """sent / retried / queue depth and the delivery histogram, by server."""
        brain = Brain(lambda n: 503 if n == 1 else 200)
        poster = EventPoster("navigation", URL, SECRET, transport=brain.transport, retry=FAST)
        await poster.post(event(1))
        await poster.flush()
        data = metrics.get_metrics_data()
        await poster.aclose()
        points: dict[str, list[Any]] = {}
        assert data is not None
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    points.setdefault(metric.name, []).extend(metric.data.data_points)
        assert [p.value for p in points["robot_mcp.poster.sent"]] == [1]
        assert [p.value for p in points["robot_mcp.poster.retried"]] == [1]
        assert [p.value for p in points["robot_mcp.poster.outbox_not_durable"]] == [0]
        assert [p.value for p in points["robot_mcp.poster.queue_depth"]] == [0]
        (duration,) = points["robot_mcp.poster.delivery.duration"]
        assert duration.count == 1
        assert dict(duration.attributes) == {
            "robot_mcp.server": "navigation",
            "robot_mcp.delivery.outcome": "delivered",
        }


_IMPORTS_NOTHING = """
import asyncio, sys, httpx
from robot_mcp_kit import EventPoster, TaskManager
from robot_mcp_kit.telemetry import active

async def main():
    brain = httpx.MockTransport(lambda request: httpx.Response(200))
    poster = EventPoster("nav", "http://brain.test/e", "s", transport=brain)
    manager = TaskManager("nav", poster)
    async def body(ctx):
        await ctx.progress({"percent": 50})
        return {}
    manager.start("go", body)
    await asyncio.sleep(0.05)
    await poster.flush()
    await manager.aclose()
    await poster.aclose()
    assert poster.stats.sent == 2, poster.stats

asyncio.run(main())
print(active(), sorted(m for m in sys.modules if m.startswith("opentelemetry")))
"""


def _run_kit(env_extra: dict[str, str]) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(env_extra)
    done = subprocess.run(
        [sys.executable, "-c", _IMPORTS_NOTHING],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


class TestOffMeansNothing:
    @pytest.mark.parametrize(
        "env",
        [
            {},
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_SDK_DISABLED": "true"},
            {"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"},
        ],
        ids=["no-otel-variables", "sdk-disabled", "exporters-none"],
    )
    def test_a_poster_and_a_task_import_no_opentelemetry_module_while_off(self, env):
        """Off: tasks run and events go out, and not one opentelemetry module is loaded."""
        assert _run_kit(env) == "False []"

    def test_otel_variables_turn_it_on(self):
        """OTEL_TRACES_EXPORTER=console: on, the SDK loaded (spans go to stdout too)."""
        out = _run_kit({"OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "none"})
        (verdict,) = [line for line in out.splitlines() if line.startswith(("True", "False"))]
        assert verdict.startswith("True [")
        assert "'opentelemetry.sdk.trace'" in verdict
        assert '"name": "task go"' in out  # the console exporter printed the task's span

    def test_an_unsupported_protocol_is_one_clear_line_and_telemetry_stays_off(self):
        """OTEL_EXPORTER_OTLP_PROTOCOL=http/json: an ERROR naming the valid ones, work goes on."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        env.update(
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
            }
        )
        done = subprocess.run(
            [sys.executable, "-c", "import logging; logging.basicConfig();" + _IMPORTS_NOTHING],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip().startswith("False")
        assert "telemetry_off" in done.stderr
        assert "use http/protobuf or grpc" in done.stderr


UNSAMPLED_CALLER = f"00-{TRACE_ID}-00f067aa0ba902b7-00"


@pytest.fixture
def parent_based() -> Iterator[tuple[InMemorySpanExporter, InMemoryMetricReader]]:
    """Telemetry on with the default ParentBased(ALWAYS_ON) sampler, spans and metrics kept."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()  # the SDK's default sampler: parentbased_always_on
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    telemetry.enable(tracer_provider=provider, meter_provider=meters)
    try:
        yield exporter, reader
    finally:
        telemetry.disable()
        provider.shutdown()
        meters.shutdown()


class TestSampledOut:
    async def test_a_sampled_out_call_makes_no_span_yet_its_webhooks_carry_its_trace(
        self, sleeper, parent_based
    ):
        """A caller's trace with flags 00: no span at all (server, task, POST), the
        webhooks still name that trace, and the call's duration is still measured."""
        exporter, reader = parent_based
        brain = Brain()
        poster = EventPoster("sleeper", URL, SECRET, transport=brain.transport, retry=FAST)
        manager = TaskManager("sleeper", poster, known_trigger_types=sleeper.KNOWN_TRIGGER_TYPES)
        server = sleeper.build_server(manager)
        try:
            async with create_connected_server_and_client_session(server) as session:
                await session.call_tool(
                    "sleep_task",
                    {"duration_s": 0.02, "tick_s": 0.01},
                    meta={"traceparent": UNSAMPLED_CALLER},
                )
                result = await session.call_tool(
                    "get_task", {}, meta={"traceparent": UNSAMPLED_CALLER}
                )
                assert result.isError
                await wait_until(
                    lambda: (
                        any(b"task_done" in r.content for r in brain.requests)
                        and poster.stats.queued == 0
                    )
                )
        finally:
            await manager.aclose()
            await poster.aclose()
        assert exporter.get_finished_spans() == ()
        assert len(brain.requests) >= 2
        for request in brain.requests:
            assert request.headers["traceparent"] == UNSAMPLED_CALLER
        data = reader.get_metrics_data()
        assert data is not None
        durations = [
            dict(point.attributes)
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == "mcp.server.operation.duration"
            for point in metric.data.data_points
        ]
        assert {"mcp.method.name": "tools/call", "gen_ai.tool.name": "sleep_task"} in durations
        assert {
            "mcp.method.name": "tools/call",
            "gen_ai.tool.name": "get_task",
            "error.type": "tool_error",
        } in durations

    def test_a_sampled_in_child_of_a_sampled_out_parent_is_kept_when_the_sampler_says_so(
        self,
    ):
        """A sampler that does not follow its parent (a bare ratio sampler at 1.0) still
        gets every span: the shortcut is taken only where the sampler would drop it."""
        from opentelemetry.sdk.trace.sampling import TraceIdRatioBased

        exporter = InMemorySpanExporter()
        provider = TracerProvider(sampler=TraceIdRatioBased(1.0))
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        telemetry.enable(tracer_provider=provider, meter_provider=MeterProvider())
        try:
            with telemetry.client_span("POST", (UNSAMPLED_CALLER, "")) as (_span, headers):
                assert headers["traceparent"] != UNSAMPLED_CALLER
        finally:
            telemetry.disable()
            provider.shutdown()
        (post,) = exporter.get_finished_spans()
        assert hex_trace(post) == TRACE_ID

    def test_a_custom_not_sampled_delegate_still_decides(self):
        """ParentBased whose not-sampled delegate keeps tools/call spans: the kit makes
        the span and the sampler keeps it, as the SDK alone would."""
        from opentelemetry.sdk.trace.sampling import (
            ALWAYS_ON,
            Decision,
            ParentBased,
            Sampler,
            SamplingResult,
        )

        class ToolCalls(Sampler):
            def should_sample(self, parent_context, trace_id, name, *args, **kwargs):  # type: ignore[no-untyped-def]
                keep = name.startswith("tools/call")
                return SamplingResult(Decision.RECORD_AND_SAMPLE if keep else Decision.DROP)

            def get_description(self) -> str:
                return "ToolCalls"

        exporter = InMemorySpanExporter()
        sampler = ParentBased(ALWAYS_ON, remote_parent_not_sampled=ToolCalls())
        provider = TracerProvider(sampler=sampler)
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        telemetry.enable(tracer_provider=provider, meter_provider=MeterProvider())
        try:
            with telemetry.server_span("tools/call", "go", {"traceparent": UNSAMPLED_CALLER}):
                pass
        finally:
            telemetry.disable()
            provider.shutdown()
        assert [s.name for s in exporter.get_finished_spans()] == ["tools/call go"]

    def test_an_internal_span_under_a_sampled_out_span_is_not_made(self, parent_based):
        """span() under a non-recording parent yields nothing; the parent stays current."""
        exporter, _reader = parent_based
        meta = {"traceparent": UNSAMPLED_CALLER}
        with telemetry.server_span("tools/call", "x", meta), telemetry.span("find") as inner:
            assert inner is None
            assert telemetry.trace_headers() == (UNSAMPLED_CALLER, "")
        assert exporter.get_finished_spans() == ()


_SLOW_COLLECTOR_EXIT = """
import logging
logging.basicConfig(level=logging.INFO)
from robot_mcp_kit import telemetry
with telemetry.span("work"):
    pass
telemetry.record("robot_mcp.poster.delivery.duration", 0.1)
assert telemetry.active()
print("leaving", flush=True)
"""


class TestShutdown:
    def test_exit_with_a_collector_that_never_answers_is_bounded_and_logged(self):
        """The collector accepts connections and never answers: the process still leaves
        within a few seconds of its last line, and a WARNING says what was dropped."""
        import socket
        import time

        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(16)  # accepted by the kernel, never read: no answer ever comes
            port = listener.getsockname()[1]
            env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
            env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{port}"
            started = time.monotonic()
            done = subprocess.run(
                [sys.executable, "-c", _SLOW_COLLECTOR_EXIT],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            elapsed = time.monotonic() - started
        assert done.returncode == 0, done.stderr
        assert "leaving" in done.stdout
        assert "telemetry_flush_abandoned" in done.stderr
        # Without the bound the SDK's own exit handler waits out the exporter's 10 s
        # timeout and retries (13-15 s); with it, the 2 s bound plus interpreter start.
        assert elapsed < telemetry.SHUTDOWN_FLUSH_S + 6, (elapsed, done.stderr)
