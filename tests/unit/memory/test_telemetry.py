"""Both backends emit the same spans and the same find histogram: the telemetry lives in
the process service, above the storage (issue 33)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from robot_mcp_kit import telemetry
from robot_mcp_memory.processes import HashingEmbedder, ProcessDoc


@pytest.fixture
def recorded() -> Iterator[tuple[InMemorySpanExporter, InMemoryMetricReader]]:
    """Telemetry on, spans and metrics kept in memory; off again afterwards."""
    exporter = InMemorySpanExporter()
    tracer = TracerProvider()
    tracer.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader])
    telemetry.enable(tracer_provider=tracer, meter_provider=meter)
    try:
        yield exporter, reader
    finally:
        telemetry.disable()
        tracer.shutdown()
        meter.shutdown()


def _doc(id: str, body: str) -> ProcessDoc:
    return ProcessDoc(id=id, title=f"Fetch the parcel {id}", task_pattern="fetch *", body=body)


def _names_and_attributes(exporter: InMemorySpanExporter) -> list[tuple[str, dict[str, Any]]]:
    """Each finished ``memory.*`` span's name and attributes, in the order they ended (the
    kit's own storage spans, such as SQLite's hot-writer ``store.flush``, are the
    backend's)."""
    return [
        (s.name, dict(s.attributes or {}))
        for s in exporter.get_finished_spans()
        if s.name.startswith("memory.")
    ]


def _histogram_modes(reader: InMemoryMetricReader) -> list[str]:
    data = reader.get_metrics_data()
    modes = []
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "robot_mcp.memory.find.duration":
                    modes += [
                        str(p.attributes["robot_mcp.memory.search_mode"])
                        for p in metric.data.data_points
                    ]
    return sorted(modes)


@pytest.mark.parametrize("hybrid", [False, True], ids=["lexical", "hybrid"])
def test_both_backends_emit_the_same_spans(backend: Any, recorded: Any, hybrid: bool):
    """Save, find, an outcome note and a delete make the same spans, with the same names and
    attributes, on SQLite and on PostgreSQL; a find also records its duration by mode."""
    exporter, reader = recorded
    store = backend.open(embedder=HashingEmbedder() if hybrid else None)
    exporter.clear()
    doc = _doc("parcel", "Walk to the mail room and take the parcel.")
    store.save(doc)
    found = store.find("parcel from the mail room")
    store.record_outcome("parcel", True, note="it worked")
    store.delete("parcel")
    assert [f.doc.id for f in found] == ["parcel"]
    spans = _names_and_attributes(exporter)
    mode = "hybrid" if hybrid else "lexical"
    searches = ["memory.search.lexical", "memory.search.vector", "memory.search.fusion"]
    assert [name for name, _ in spans] == [
        "memory.write",
        *(searches if hybrid else []),
        "memory.find",
        "memory.write",
        "memory.write",
    ]
    writes = [attributes for name, attributes in spans if name == "memory.write"]
    assert [w["robot_mcp.memory.write"] for w in writes] == ["save", "note", "delete"]
    assert writes[0]["robot_mcp.memory.id"] == "parcel"
    assert writes[0]["robot_mcp.memory.created"] is True
    assert writes[0]["robot_mcp.memory.renamed"] is False
    assert writes[0]["robot_mcp.memory.body_chars"] == len(doc.body)
    assert writes[1]["robot_mcp.memory.id"] == writes[2]["robot_mcp.memory.id"] == "parcel"
    (find,) = [attributes for name, attributes in spans if name == "memory.find"]
    assert find == {
        "robot_mcp.memory.search_mode": mode,
        "robot_mcp.memory.k": 3,
        "robot_mcp.memory.results": 1,
    }
    assert _histogram_modes(reader) == [mode]
