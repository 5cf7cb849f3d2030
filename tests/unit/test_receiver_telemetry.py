"""The receiver's spans and metrics (telemetry on, in-memory exporters): a post and its
handler call join the trace the poster sent, and the counters are reported."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from robot_mcp_kit import TaskEvent, telemetry
from robot_mcp_kit.models import new_event_id, utc_now
from robot_mcp_kit.receiver import Receiver, ServerConfig, TaskUpdate
from robot_mcp_kit.signing import signed_headers

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
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
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    telemetry.enable(tracer_provider=TracerProvider(), meter_provider=provider)
    try:
        yield reader
    finally:
        telemetry.disable()
        provider.shutdown()


async def run(tmp_path: Any, *, traceparent: str | None = None, bad: bool = False) -> Receiver:
    got: list[TaskUpdate] = []

    async def handle(update: TaskUpdate) -> None:
        with telemetry.span("brain.work"):
            got.append(update)

    receiver = Receiver(
        [ServerConfig("sleeper", ("s3cret",))],
        handle,
        state=tmp_path / "r.db",
        reconcile_every_s=None,
    )
    event = TaskEvent(
        event_id=new_event_id(),
        task_id="slee-000001",
        server="sleeper",
        tool="sleep_task",
        type="progress",
        seq=1,
        ts=utc_now(),
        payload={},
    )
    body = event.model_dump_json().encode()
    headers = signed_headers("sleeper", "s3cret", body, int(time.time()))
    if traceparent is not None:
        headers["traceparent"] = traceparent
    async with receiver:
        await receiver.receive(headers, body)
        await receiver.receive(headers, body)
        if bad:
            await receiver.receive({**headers, "X-RVC-Signature": "sha256=" + "0" * 64}, body)
        deadline = time.monotonic() + 10
        while not got:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
    return receiver


async def test_a_post_and_its_handler_call_are_in_the_posters_trace(tmp_path, spans):
    """receiver.post (SERVER) and receiver.deliver continue the traceparent the poster
    sent; the handler's own span is a child of receiver.deliver."""
    await run(tmp_path, traceparent=TRACEPARENT)
    by_name = {s.name: s for s in spans.get_finished_spans()}
    post, deliver, work = (
        by_name["receiver.post"],
        by_name["receiver.deliver"],
        by_name["brain.work"],
    )
    for span in (post, deliver, work):
        assert f"{span.context.trace_id:032x}" == TRACE_ID
    assert post.kind.name == "SERVER"
    assert post.attributes is not None
    assert post.attributes["robot_mcp.event.seq"] == 1
    assert post.attributes["http.response.status_code"] == 200
    assert work.parent is not None
    assert work.parent.span_id == deliver.context.span_id
    assert deliver.attributes is not None
    assert deliver.attributes["robot_mcp.update.kind"] == "event"


async def test_the_receivers_counters_are_reported(tmp_path, metrics):
    """Posts by outcome, deliveries, the handler's duration."""
    receiver = await run(tmp_path, bad=True)
    data = metrics.get_metrics_data()
    assert data is not None
    points: dict[str, list[Any]] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points.setdefault(metric.name, []).extend(metric.data.data_points)
    posts = {p.attributes["outcome"]: p.value for p in points["robot_mcp.receiver.posts"]}
    assert posts == {"accepted": 1, "duplicate": 1, "ignored": 0, "refused": 1, "unavailable": 0}
    assert [p.value for p in points["robot_mcp.receiver.delivered"]] == [1]
    (duration,) = points["robot_mcp.receiver.handler.duration"]
    assert duration.count == 1
    assert receiver.stats.delivered == 1
