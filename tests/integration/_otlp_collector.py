"""A small OTLP/HTTP collector for the tests: ``POST /v1/traces`` and ``/v1/metrics``.

Decodes each ``ExportTraceServiceRequest`` / ``ExportMetricsServiceRequest`` with
``opentelemetry-proto`` and keeps the spans and data points, with their attributes as plain
Python values, for the test to read. Runs ``http.server`` on a free loopback port in a
thread; answers every export 200 with an empty response message.

``python _otlp_collector.py`` runs it as a process of its own (the benchmark's collector):
it prints its port, then serves until killed; ``GET /count`` answers
``{"spans": n, "points": m}``.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

KINDS = {1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


@dataclass(frozen=True)
class Span:
    """One exported span."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: str
    attributes: dict[str, Any]
    service: str


@dataclass(frozen=True)
class Point:
    """One exported metric data point (its value left out: the tests read attributes)."""

    metric: str
    attributes: dict[str, Any]
    service: str


@dataclass
class Collector:
    """What the collector received; thread-safe reads through :meth:`spans` / :meth:`points`."""

    url: str = ""
    _spans: list[Span] = field(default_factory=list)
    _points: list[Point] = field(default_factory=list)
    _resources: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def spans(self) -> list[Span]:
        with self._lock:
            return list(self._spans)

    def points(self) -> list[Point]:
        with self._lock:
            return list(self._points)

    def resources(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._resources)

    def wait_for(self, predicate: Callable[[Collector], bool], timeout_s: float = 20.0) -> None:
        """Poll until ``predicate(self)`` holds; AssertionError after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while not predicate(self):
            if time.monotonic() > deadline:
                names = sorted({s.name for s in self.spans()})
                metrics = sorted({p.metric for p in self.points()})
                raise AssertionError(f"collector still waiting; spans {names}, metrics {metrics}")
            time.sleep(0.05)

    def add_traces(self, request: ExportTraceServiceRequest) -> None:
        with self._lock:
            for resource_spans in request.resource_spans:
                resource = _attributes(resource_spans.resource.attributes)
                self._resources.append(resource)
                service = str(resource.get("service.name", ""))
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        self._spans.append(
                            Span(
                                trace_id=span.trace_id.hex(),
                                span_id=span.span_id.hex(),
                                parent_span_id=span.parent_span_id.hex(),
                                name=span.name,
                                kind=KINDS.get(span.kind, str(span.kind)),
                                attributes=_attributes(span.attributes),
                                service=service,
                            )
                        )

    def add_metrics(self, request: ExportMetricsServiceRequest) -> None:
        with self._lock:
            for resource_metrics in request.resource_metrics:
                resource = _attributes(resource_metrics.resource.attributes)
                self._resources.append(resource)
                service = str(resource.get("service.name", ""))
                for scope_metrics in resource_metrics.scope_metrics:
                    for metric in scope_metrics.metrics:
                        kind = metric.WhichOneof("data")
                        if kind is None:
                            continue
                        for point in getattr(metric, kind).data_points:
                            self._points.append(
                                Point(metric.name, _attributes(point.attributes), service)
                            )


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return None if kind is None else getattr(value, kind)


def _attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs}


class _Handler(BaseHTTPRequestHandler):
    collector: Collector

    def do_GET(self) -> None:
        if self.path != "/count":
            self.send_error(404)
            return
        answer = json.dumps(
            {"spans": len(self.collector.spans()), "points": len(self.collector.points())}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        answer: bytes
        if self.path == "/v1/traces":
            traces = ExportTraceServiceRequest()
            traces.ParseFromString(body)
            self.collector.add_traces(traces)
            answer = ExportTraceServiceResponse().SerializeToString()
        elif self.path == "/v1/metrics":
            metrics = ExportMetricsServiceRequest()
            metrics.ParseFromString(body)
            self.collector.add_metrics(metrics)
            answer = ExportMetricsServiceResponse().SerializeToString()
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return


class CollectorServer:
    """The collector on ``127.0.0.1:<free port>``; a context manager."""

    def __init__(self) -> None:
        self.collector = Collector()
        handler = type("Handler", (_Handler,), {"collector": self.collector})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self.collector.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> Collector:
        self._thread.start()
        return self.collector

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def otel_env(collector: Collector, service: str) -> dict[str, str]:
    """The OTEL_* variables a child process exports to ``collector`` with, quickly."""
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_SERVICE_NAME": service,
        "OTEL_BSP_SCHEDULE_DELAY": "100",  # ms between span exports
        "OTEL_METRIC_EXPORT_INTERVAL": "300",  # ms between metric exports
    }


if __name__ == "__main__":
    server = CollectorServer()
    print(server.collector.url.rsplit(":", 1)[1], flush=True)
    server._server.serve_forever()
