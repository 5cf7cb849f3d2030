"""Traces and metrics through OpenTelemetry, or nothing at all (public).

The one module of the kit that knows OpenTelemetry, and it imports it only once telemetry
is on. Every other module calls the hooks below; while telemetry is off each hook returns
at once (one global read), and no ``opentelemetry`` module is ever imported (a test proves
it), whether the ``observability`` extra is installed or not.

Telemetry is on when

- the environment asks for it (read once, at the first hook call): ``OTEL_SDK_DISABLED`` is
  not ``true`` and one of ``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER`` names an
  exporter other than ``none``, or one of ``OTEL_EXPORTER_OTLP_ENDPOINT`` /
  ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`` is set.
  The SDK is then configured from the standard ``OTEL_*`` variables: the resource
  (``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``), OTLP over ``http/protobuf`` (the
  default ``OTEL_EXPORTER_OTLP_PROTOCOL``; ``grpc`` when its exporter package is
  installed), or ``console``. An application that installed its own SDK providers first
  keeps them. With the variables set but the extra missing, one WARNING line names the
  extra and telemetry stays off;
- or a program calls :func:`enable` with its own providers (tests pass in-memory ones).

What is recorded, under which names, is in ``docs/observability.md`` and in
:data:`INSTRUMENTS`. Attributes carry ids, counts, sizes and modes, never a secret.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = [
    "ENV_SDK_DISABLED",
    "INSTRUMENTS",
    "SHUTDOWN_FLUSH_S",
    "TRACEPARENT_PATTERN",
    "Instrument",
    "Operation",
    "active",
    "add",
    "attach",
    "capture",
    "client_span",
    "continued_span",
    "disable",
    "enable",
    "log_fields",
    "observe",
    "operation_duration",
    "record",
    "server_span",
    "set_attributes",
    "span",
    "trace_headers",
]

_log = logging.getLogger("robot_mcp_kit.telemetry")

ENV_SDK_DISABLED: Final = "OTEL_SDK_DISABLED"
_ENV_EXPORTERS: Final = ("OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER")
_ENV_ENDPOINTS: Final = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
)
_SCOPE: Final = "robot_mcp_kit"

TRACEPARENT_PATTERN: Final = r"^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$"
"""A well-formed W3C ``traceparent`` of version 00 (the trace id and span id not all zeros
is checked separately)."""

SpanKind = Literal["internal", "server", "client"]


@dataclass(frozen=True)
class Instrument:
    """One metric: its OpenTelemetry kind, unit and description."""

    kind: Literal["counter", "histogram", "gauge", "observable_counter", "observable_gauge"]
    unit: str
    description: str


INSTRUMENTS: Final[Mapping[str, Instrument]] = {
    "mcp.server.operation.duration": Instrument(
        "histogram", "s", "MCP tool calls served, by tool (gen_ai.tool.name) and error.type."
    ),
    "robot_mcp.poster.queue_depth": Instrument(
        "observable_gauge", "{event}", "Events accepted and not yet acknowledged or lost."
    ),
    "robot_mcp.poster.sent": Instrument(
        "observable_counter", "{event}", "Events a receiver acknowledged with a 2xx."
    ),
    "robot_mcp.poster.retried": Instrument(
        "observable_counter", "{attempt}", "Delivery attempts beyond the first."
    ),
    "robot_mcp.poster.dropped": Instrument(
        "observable_counter", "{event}", "Events lost without exhausting their retries."
    ),
    "robot_mcp.poster.given_up": Instrument(
        "observable_counter", "{event}", "Events lost after the retry cap."
    ),
    "robot_mcp.poster.outbox_not_durable": Instrument(
        "observable_counter",
        "{event}",
        "Events sent while their outbox row could not be written (a full disk).",
    ),
    "robot_mcp.poster.delivery.duration": Instrument(
        "histogram", "s", "From an event's first attempt to its 2xx (or its giving up)."
    ),
    "robot_mcp.outbox.size": Instrument(
        "observable_gauge", "{event}", "Event rows in the durable outbox file, by state."
    ),
    "robot_mcp.tasks": Instrument(
        "observable_gauge", "{task}", "Tasks the manager remembers, by state."
    ),
    "robot_mcp.store.hot_queue": Instrument(
        "observable_gauge", "{write}", "Hot writes waiting for the store's writer thread."
    ),
    "robot_mcp.store.hot_dropped": Instrument(
        "observable_counter", "{write}", "Hot writes refused because the queue was full."
    ),
    "robot_mcp.receiver.posts": Instrument(
        "observable_counter",
        "{post}",
        "Posts the brain's receiver answered, by outcome (accepted, duplicate, ignored, "
        "refused, unavailable).",
    ),
    "robot_mcp.receiver.delivered": Instrument(
        "observable_counter", "{update}", "Task updates the receiver's handler returned from."
    ),
    "robot_mcp.receiver.handler_failures": Instrument(
        "observable_counter", "{call}", "Calls of the receiver's handler that raised."
    ),
    "robot_mcp.receiver.waiting": Instrument(
        "observable_gauge", "{event}", "Events the receiver stored and has not handed over."
    ),
    "robot_mcp.receiver.repaired": Instrument(
        "observable_counter", "{event}", "Events the receiver fetched with get_task_events."
    ),
    "robot_mcp.receiver.handler.duration": Instrument(
        "histogram", "s", "One call of the receiver's handler, by update kind and outcome."
    ),
    "robot_mcp.memory.find.duration": Instrument(
        "histogram", "s", "find_processes searches, by search mode (lexical, hybrid)."
    ),
    "robot_mcp.memory.connections": Instrument(
        "observable_gauge", "{connection}", "Open MCP connections to the memory server, by robot."
    ),
}
"""Every metric the kit and the memory server record, by name."""


class _Otel:
    """The OpenTelemetry objects telemetry records through (made only while it is on)."""

    def __init__(self, tracer_provider: Any, meter_provider: Any, owned: bool) -> None:
        from opentelemetry import context, trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self.trace = trace
        self.context = context
        self.tracer = tracer_provider.get_tracer(_SCOPE)
        self.meter = None if meter_provider is None else meter_provider.get_meter(_SCOPE)
        self.propagator = TraceContextTextMapPropagator()
        self.kinds = {
            "internal": trace.SpanKind.INTERNAL,
            "server": trace.SpanKind.SERVER,
            "client": trace.SpanKind.CLIENT,
        }
        self.status_error = trace.StatusCode.ERROR
        self.instruments: dict[str, Any] = {}
        self.sources: dict[str, weakref.WeakKeyDictionary[Any, Callable[[Any], Any]]] = {}
        # Instruments are made on first use, from any thread (the store's writer, the event
        # loop, worker threads): one lock, so each name is made once.
        self._lock = threading.Lock()
        self.providers = (tracer_provider, meter_provider)
        self.owned = owned
        # Whether the sampler drops a span whose parent was sampled out (the default
        # ParentBased samplers do): such a span is then never made at all (below).
        self.drops_unsampled_remote = _drops_unsampled(tracer_provider, remote=True)
        self.drops_unsampled_local = _drops_unsampled(tracer_provider, remote=False)
        self.unsampled_span = _unsampled_span_class()

    def instrument(self, name: str) -> Any:
        found = self.instruments.get(name)
        if found is not None or self.meter is None:
            return found
        with self._lock:
            return self._make_instrument(name)

    def _make_instrument(self, name: str) -> Any:
        found = self.instruments.get(name)
        if found is None and self.meter is not None:
            spec = INSTRUMENTS[name]
            make = {
                "counter": self.meter.create_counter,
                "histogram": self.meter.create_histogram,
                "gauge": self.meter.create_gauge,
            }[spec.kind]
            found = self.instruments[name] = make(
                name, unit=spec.unit, description=spec.description
            )
        return found

    def observed(self, name: str) -> weakref.WeakKeyDictionary[Any, Callable[[Any], Any]]:
        sources = self.sources.get(name)
        if sources is not None:
            return sources
        with self._lock:
            sources = self.sources.get(name)
            if sources is not None:
                return sources
            sources = self.sources[name] = weakref.WeakKeyDictionary()
        # Outside the lock: the SDK's collection holds its own lock while it calls
        # _callback (which takes ours); registering under ours could deadlock with it.
        if self.meter is not None:
            spec = INSTRUMENTS[name]
            make = (
                self.meter.create_observable_counter
                if spec.kind == "observable_counter"
                else self.meter.create_observable_gauge
            )
            make(
                name,
                callbacks=[self._callback(name)],
                unit=spec.unit,
                description=spec.description,
            )
        return sources

    def add_source(self, name: str, source: Any, read: Callable[[Any], Any]) -> None:
        sources = self.observed(name)
        with self._lock:
            sources[source] = read

    def _callback(self, name: str) -> Callable[[Any], Iterable[Any]]:
        from opentelemetry.metrics import Observation

        def observe(_options: Any) -> Iterable[Any]:
            out = []
            with self._lock:  # observe() may add a source from another thread meanwhile
                pairs = list(self.sources[name].items())
            for source, fn in pairs:
                try:
                    for value, attributes in fn(source):
                        out.append(Observation(value, attributes))
                except Exception:  # a metric must never break the exporter's thread
                    _log.debug("metric_callback_failed name=%r", name, exc_info=True)
            return out

        return observe


def _drops_unsampled(tracer_provider: Any, *, remote: bool) -> bool:
    """True if ``tracer_provider``'s sampler drops every child of a sampled-out parent.

    Only a sampler that says so whatever the span is: the SDK's ``ParentBased`` whose
    not-sampled delegate (remote or local parent) is ``ALWAYS_OFF`` (the default of every
    ``parentbased_*`` sampler), or ``ALWAYS_OFF`` itself, read from the sampler's public
    description. Any other sampler (one that looks at a span's name or attributes, a
    provider that is not the SDK's) gets its spans made as usual.
    """
    sampler = getattr(tracer_provider, "sampler", None)
    if sampler is None:
        return False
    try:
        description = str(sampler.get_description())
    except Exception:  # a custom sampler that cannot describe itself
        return False
    if description == "AlwaysOffSampler":
        return True
    key = "remoteParentNotSampled" if remote else "localParentNotSampled"
    fields = description.removeprefix("ParentBased{").removesuffix("}").split(",")
    return description.startswith("ParentBased{") and f"{key}:AlwaysOffSampler" in fields


def _unsampled_span_class() -> type[Any]:
    """The stand-in for a SERVER span of a sampled-out trace: the caller's span context
    (so what the call posts still carries the caller's trace), nothing recorded, but its
    ``error.type`` kept for the duration metric, which is not sampled."""
    from opentelemetry.trace import NonRecordingSpan

    class Unsampled(NonRecordingSpan):
        def __init__(self, context: Any) -> None:
            super().__init__(context)
            self.error_type: str | None = None

        def set_attribute(self, key: str, value: Any) -> None:
            if key == "error.type" and isinstance(value, str):
                self.error_type = value

        def set_attributes(self, attributes: Mapping[str, Any]) -> None:
            value = attributes.get("error.type")
            if isinstance(value, str):
                self.error_type = value

    return Unsampled


_otel: _Otel | None = None
_decided = False


def _current() -> _Otel | None:
    """The telemetry objects, deciding from the environment on the first call."""
    if _decided:
        return _otel
    return _from_environment()


def active() -> bool:
    """True while telemetry records (decides from the environment on the first call)."""
    return _current() is not None


def _wanted(env: Mapping[str, str]) -> bool:
    if env.get(ENV_SDK_DISABLED, "").strip().lower() == "true":
        return False
    for name in _ENV_EXPORTERS:
        value = env.get(name, "").strip().lower()
        if value and value != "none":
            return True
    return any(env.get(name, "").strip() for name in _ENV_ENDPOINTS)


def _from_environment() -> _Otel | None:
    global _decided
    _decided = True
    if not _wanted(os.environ):
        return None
    try:
        import opentelemetry.sdk  # noqa: F401 - is the extra installed?
    except ImportError:
        _log.warning(
            "telemetry_off reason=%r fix=%r",
            "OTEL_* variables ask for telemetry but the OpenTelemetry SDK is not installed",
            "pip install 'robot-mcp-kit[observability]', or unset the OTEL_* variables",
        )
        return None
    try:
        tracer_provider, meter_provider = _sdk_providers(os.environ)
    except _SetupError as exc:
        _log.error("telemetry_off reason=%r", str(exc))
        return None
    return _turn_on(tracer_provider, meter_provider, owned=True)


class _SetupError(Exception):
    """The OTEL_* variables name something this process cannot do (the message says what)."""


def _exporter_names(env: Mapping[str, str], key: str) -> list[str]:
    return [n.strip().lower() for n in env.get(key, "otlp").split(",") if n.strip()]


def _protocol(env: Mapping[str, str], signal: str) -> str:
    value = env.get(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL") or env.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
    )
    return value.strip().lower()


def _span_exporter(name: str, env: Mapping[str, str]) -> Any:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name != "otlp":
        raise _SetupError(
            f"OTEL_TRACES_EXPORTER={name!r} is not supported here; use otlp, console or none."
        )
    protocol = _protocol(env, "TRACES")
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[import-not-found]
                OTLPSpanExporter,
            )
        except ImportError:
            raise _SetupError(
                "OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs opentelemetry-exporter-otlp-proto-grpc "
                "installed; install it or use http/protobuf (the default)"
            ) from None
        return OTLPSpanExporter()
    if protocol != "http/protobuf":
        raise _SetupError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r} is not supported; use http/protobuf or grpc"
        )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as Http

    return Http()


def _metric_exporter(name: str, env: Mapping[str, str]) -> Any:
    if name == "console":
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

        return ConsoleMetricExporter()
    if name != "otlp":
        raise _SetupError(
            f"OTEL_METRICS_EXPORTER={name!r} is not supported here; use otlp, console or none."
        )
    protocol = _protocol(env, "METRICS")
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (  # type: ignore[import-not-found]
                OTLPMetricExporter,
            )
        except ImportError:
            raise _SetupError(
                "OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs opentelemetry-exporter-otlp-proto-grpc "
                "installed; install it or use http/protobuf (the default)"
            ) from None
        return OTLPMetricExporter()
    if protocol != "http/protobuf":
        raise _SetupError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r} is not supported; use http/protobuf or grpc"
        )
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
        OTLPMetricExporter as Http,
    )

    return Http()


def _sdk_providers(env: Mapping[str, str]) -> tuple[Any, Any]:
    """The global SDK providers: the application's if it set them, else new ones from env."""
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create()  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
    tracer_provider = trace.get_tracer_provider()
    if not isinstance(tracer_provider, TracerProvider):
        # Shut down by _shut_down at exit, within SHUTDOWN_FLUSH_S: the SDK's own exit
        # handler waits for an exporter's retries (13-15 s with the collector down).
        tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        for name in _exporter_names(env, "OTEL_TRACES_EXPORTER"):
            if name != "none":
                tracer_provider.add_span_processor(BatchSpanProcessor(_span_exporter(name, env)))
        trace.set_tracer_provider(tracer_provider)
    meter_provider = metrics.get_meter_provider()
    if not isinstance(meter_provider, MeterProvider):
        readers = [
            PeriodicExportingMetricReader(_metric_exporter(name, env))
            for name in _exporter_names(env, "OTEL_METRICS_EXPORTER")
            if name != "none"
        ]
        meter_provider = MeterProvider(
            resource=resource, metric_readers=readers, shutdown_on_exit=False
        )
        metrics.set_meter_provider(meter_provider)
    atexit.unregister(_shut_down_at_exit)  # once, however often telemetry is set up
    atexit.register(_shut_down_at_exit)
    return tracer_provider, meter_provider


SHUTDOWN_FLUSH_S: Final = 2.0
"""How long a process leaving gives the exporters to send what they hold (the last spans
and metrics): a collector that is down or never answers holds the exit no longer."""


def _shut_down_at_exit() -> None:
    otel = _otel
    if otel is not None and otel.owned:
        _shut_down(otel.providers, SHUTDOWN_FLUSH_S)


def _shut_down(providers: Iterable[Any], bound_s: float) -> bool:
    """Shut ``providers`` down (flushing their exporters) for at most ``bound_s``.

    The shutdown runs in a daemon thread: past the bound it is abandoned (what it still
    held is lost, and a WARNING line says so) and the caller goes on. Returns True if it
    finished in time.
    """
    finished = threading.Event()

    def run() -> None:
        for provider in providers:
            if provider is not None:
                with contextlib.suppress(Exception):
                    provider.shutdown()
        finished.set()

    started = time.monotonic()
    threading.Thread(target=run, name="robot-mcp-telemetry-shutdown", daemon=True).start()
    if finished.wait(bound_s):
        _log.info("telemetry_flushed elapsed_s=%.2f", time.monotonic() - started)
        return True
    _log.warning(
        "telemetry_flush_abandoned bound_s=%g reason=%r",
        bound_s,
        "the collector did not take the last spans and metrics in time; they are dropped",
    )
    return False


def _turn_on(tracer_provider: Any, meter_provider: Any, *, owned: bool) -> _Otel:
    global _otel
    _otel = _Otel(tracer_provider, meter_provider, owned)
    return _otel


def enable(*, tracer_provider: Any = None, meter_provider: Any = None) -> None:
    """Turn telemetry on with these providers (the global ones for those not given).

    For a program that configures OpenTelemetry itself, and for tests (an SDK
    ``TracerProvider`` with an ``InMemorySpanExporter``, a ``MeterProvider`` with an
    ``InMemoryMetricReader``). Sources registered before (posters, managers, stores) are
    observed only from their next registration: enable telemetry before building them.

    Raises:
        ImportError: the ``observability`` extra (OpenTelemetry) is not installed.
    """
    global _decided
    from opentelemetry import metrics, trace

    _decided = True
    _turn_on(
        tracer_provider if tracer_provider is not None else trace.get_tracer_provider(),
        meter_provider if meter_provider is not None else metrics.get_meter_provider(),
        owned=False,
    )


def disable() -> None:
    """Turn telemetry off; the next hook call does not read the environment again.

    Providers :func:`enable` was given are left as they are (their owner shuts them down);
    the ones made from the environment are flushed and shut down, for at most
    :data:`SHUTDOWN_FLUSH_S` (as at the process's exit).
    """
    global _otel, _decided
    otel, _otel = _otel, None
    _decided = True
    if otel is not None and otel.owned:
        _shut_down(otel.providers, SHUTDOWN_FLUSH_S)


# -- spans ---------------------------------------------------------------------------------

_NO_SPAN: contextlib.nullcontext[None] = contextlib.nullcontext()
_NO_HEADERS: contextlib.nullcontext[tuple[Any, dict[str, str]]] = contextlib.nullcontext((None, {}))


class _Scope:
    """One span made current for a ``with`` block, then ended (cheaper than the SDK's
    generator-based ``start_as_current_span``, which this replaces on the hot paths).

    ``__enter__`` gives the span, or ``(span, headers)`` with ``inject``: the W3C headers
    of the span's own context. An exception leaving the block sets ``error.type`` to its
    class name (never its message) and the span's status to ERROR. ``on_end`` is called
    with the span's ``error.type`` (or None) after it ended.
    """

    __slots__ = ("_inject", "_on_end", "_otel", "_span", "_token")

    def __init__(
        self,
        otel: _Otel,
        name: str,
        kind: SpanKind,
        attributes: Mapping[str, Any] | None,
        parent: Any = None,
        *,
        inject: bool = False,
        on_end: Callable[[str | None], None] | None = None,
    ) -> None:
        self._otel = otel
        self._span = otel.tracer.start_span(
            name,
            context=parent,
            kind=otel.kinds[kind],
            attributes=_clean(attributes),
            record_exception=False,
            set_status_on_exception=False,
        )
        self._inject = inject
        self._on_end = on_end
        self._token: Any = None

    def __enter__(self) -> Any:
        otel = self._otel
        self._token = otel.context.attach(otel.trace.set_span_in_context(self._span))
        if not self._inject:
            return self._span
        headers: dict[str, str] = {}
        otel.propagator.inject(headers)
        return self._span, headers

    def __exit__(self, exc_type: type[BaseException] | None, exc: object, tb: object) -> None:
        current = self._span
        try:
            if exc_type is not None:
                current.set_attribute("error.type", exc_type.__qualname__)
                if not issubclass(exc_type, GeneratorExit):
                    current.set_status(self._otel.status_error)
        finally:
            self._otel.context.detach(self._token)
            current.end()
            if self._on_end is not None:
                self._on_end(_error_of(current))


def span(
    name: str, attributes: Mapping[str, Any] | None = None, *, kind: SpanKind = "internal"
) -> contextlib.AbstractContextManager[Any]:
    """A span named ``name``, child of the current one; a no-op context while off.

    An exception leaving it marks the span failed with ``error.type`` (its class name,
    never its message).
    """
    otel = _otel if _decided else _current()
    if otel is None:
        return _NO_SPAN
    if otel.drops_unsampled_local:
        parent = otel.trace.get_current_span().get_span_context()
        if parent.is_valid and not parent.trace_flags.sampled:
            # A sampled-out trace: the sampler would drop this span; make none, and the
            # current context (the trace the caller's headers named) stays as it is.
            return _NO_SPAN
    return _Scope(otel, name, kind, attributes)


def server_span(
    method: str,
    target: str | None,
    meta: Mapping[str, Any] | None,
    attributes: Mapping[str, Any] | None = None,
) -> contextlib.AbstractContextManager[Any]:
    """The SERVER span of one MCP request, continuing the caller's trace.

    Named ``{method} {target}`` (``tools/call navigate_to``) with ``mcp.method.name``, per
    the MCP semantic conventions; the parent is the W3C ``traceparent`` / ``tracestate``
    found in the request's ``params._meta`` (``meta``), else a new trace. Records
    ``mcp.server.operation.duration``.
    """
    otel = _otel if _decided else _current()
    if otel is None:
        return _NO_SPAN
    return _server_span(otel, method, target, meta, attributes)


def _server_span(
    otel: _Otel,
    method: str,
    target: str | None,
    meta: Mapping[str, Any] | None,
    attributes: Mapping[str, Any] | None,
) -> _Scope | _Carried:
    carrier: dict[str, str] = {}
    if meta:
        for key in ("traceparent", "tracestate"):
            value = meta.get(key)
            if isinstance(value, str):
                carrier[key] = value
    parent = otel.propagator.extract(carrier) if carrier else None
    metric: dict[str, Any] = {"mcp.method.name": method}
    if target is not None and method == "tools/call":
        metric["gen_ai.tool.name"] = target
    measure = _duration_recorder(otel, metric)

    if parent is not None and otel.drops_unsampled_remote:
        caller = otel.trace.get_current_span(parent).get_span_context()
        if caller.is_valid and not caller.trace_flags.sampled:
            return _Carried(otel, otel.unsampled_span(caller), measure)
    attrs: dict[str, Any] = dict(metric)
    if "gen_ai.tool.name" in metric:
        attrs["gen_ai.operation.name"] = "execute_tool"
    attrs.update(attributes or {})
    name = method if target is None else f"{method} {target}"
    return _Scope(otel, name, "server", attrs, parent, on_end=measure)


class _Carried:
    """A sampled-out request: no span, the caller's trace made current (what the call
    posts carries it), and the duration metric recorded all the same."""

    __slots__ = ("_measure", "_otel", "_span", "_token")

    def __init__(self, otel: _Otel, stand_in: Any, measure: Callable[[str | None], None]) -> None:
        self._otel = otel
        self._span = stand_in
        self._measure = measure
        self._token: Any = None

    def __enter__(self) -> Any:
        otel = self._otel
        self._token = otel.context.attach(otel.trace.set_span_in_context(self._span))
        return self._span

    def __exit__(self, exc_type: type[BaseException] | None, exc: object, tb: object) -> None:
        self._otel.context.detach(self._token)
        error = self._span.error_type
        if exc_type is not None and error is None:
            error = exc_type.__qualname__
        self._measure(error)


def _duration_recorder(otel: _Otel, metric: dict[str, Any]) -> Callable[[str | None], None]:
    """Starts the clock; the function returned records the request's duration once done."""
    started = time.perf_counter()

    def measure(error: str | None) -> None:
        histogram = otel.instrument("mcp.server.operation.duration")
        if histogram is not None:
            point = metric if error is None else {**metric, "error.type": error}
            histogram.record(time.perf_counter() - started, point)

    return measure


class Operation:
    """What :func:`operation_duration` measures: set ``error_type`` if the request failed."""

    __slots__ = ("error_type",)

    def __init__(self) -> None:
        self.error_type: str | None = None
        """``error.type`` of the measurement: an MCP error code, ``tool_error``, or None."""


class _Timed:
    __slots__ = ("_measure", "_operation")

    def __init__(self, measure: Callable[[str | None], None]) -> None:
        self._measure = measure
        self._operation = Operation()

    def __enter__(self) -> Operation:
        return self._operation

    def __exit__(self, exc_type: type[BaseException] | None, exc: object, tb: object) -> None:
        error = self._operation.error_type
        if error is None and exc_type is not None:
            error = exc_type.__qualname__
        self._measure(error)


def operation_duration(
    method: str, target: str | None
) -> contextlib.AbstractContextManager[Operation | None]:
    """Record ``mcp.server.operation.duration`` for one MCP request, and nothing else.

    For a framework that makes the request's SERVER span itself (mcp 2.x, standalone
    FastMCP) but not the metric. Yields an :class:`Operation` (None while off); an
    exception leaving the block is measured with its class as ``error.type``.
    """
    otel = _otel if _decided else _current()
    if otel is None:
        return _NO_SPAN
    metric: dict[str, Any] = {"mcp.method.name": method}
    if target is not None and method == "tools/call":
        metric["gen_ai.tool.name"] = target
    measure = _duration_recorder(otel, metric)

    return _Timed(measure)


def _error_of(current: Any) -> str | None:
    attributes = getattr(current, "attributes", None) or {}
    value = attributes.get("error.type")
    return value if isinstance(value, str) else None


def client_span(
    name: str,
    parent_headers: tuple[str, str] | None,
    attributes: Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None = None,
) -> contextlib.AbstractContextManager[tuple[Any, dict[str, str]]]:
    """A CLIENT span under the trace of ``parent_headers`` (``(traceparent, tracestate)``).

    ``attributes`` may be a function giving them: it is called only when a span is made
    (telemetry on, and the trace not sampled out), so a hot path builds nothing otherwise.

    Yields ``(span, headers)``: the ``traceparent`` / ``tracestate`` headers to send with
    the request (the span's own context). Without ``parent_headers`` the span starts a new
    trace. While off there is no span, and the headers are ``parent_headers`` themselves
    (an event recorded in a trace and sent by a process without telemetry still names its
    trace), or empty.
    """
    otel = _otel if _decided else _current()
    if otel is None or (
        parent_headers is not None
        and otel.drops_unsampled_remote
        and _sampled_out(parent_headers[0])
    ):
        if parent_headers is None:
            return _NO_HEADERS
        forwarded = {"traceparent": parent_headers[0]}
        if parent_headers[1]:
            forwarded["tracestate"] = parent_headers[1]
        return contextlib.nullcontext((None, forwarded))
    return _client_span(otel, name, parent_headers, attributes)


def _sampled_out(traceparent: str) -> bool:
    """True if a ``traceparent``'s flags say its trace is not sampled."""
    try:
        return not int(traceparent[-2:], 16) & 1
    except ValueError:
        return False


def _client_span(
    otel: _Otel,
    name: str,
    parent_headers: tuple[str, str] | None,
    attributes: Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None,
) -> _Scope:
    if callable(attributes):
        attributes = attributes()
    if parent_headers is not None:
        carrier = {"traceparent": parent_headers[0]}
        if parent_headers[1]:
            carrier["tracestate"] = parent_headers[1]
        parent = otel.propagator.extract(carrier)
    else:
        parent = otel.context.Context()  # a root: not whatever span is current
    return _Scope(otel, name, "client", attributes, parent, inject=True)


def continued_span(
    name: str,
    parent_headers: tuple[str, str] | None,
    attributes: Mapping[str, Any] | None = None,
    *,
    kind: SpanKind = "internal",
) -> contextlib.AbstractContextManager[Any]:
    """A span in the trace ``parent_headers`` names (``(traceparent, tracestate)``).

    For work done later on something that arrived with a trace context (a receiver
    handing over an event its poster sent in the task's trace). Without ``parent_headers``
    it is a child of the current span; a no-op context while off.
    """
    otel = _otel if _decided else _current()
    if otel is None:
        return _NO_SPAN
    parent = None
    if parent_headers is not None:
        carrier = {"traceparent": parent_headers[0]}
        if parent_headers[1]:
            carrier["tracestate"] = parent_headers[1]
        parent = otel.propagator.extract(carrier)
    return _Scope(otel, name, kind, attributes, parent)


def set_attributes(current: Any = None, /, **attributes: Any) -> None:
    """Set attributes on ``current`` (a span a hook yielded), else on the current span."""
    otel = _otel if _decided else _current()
    if otel is None:
        return
    target = current if current is not None else otel.trace.get_current_span()
    if target.is_recording():
        target.set_attributes(_clean(attributes))
    elif "error.type" in attributes:  # a sampled-out request still measures its errors
        target.set_attributes({"error.type": attributes["error.type"]})


def _clean(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    """Attributes OpenTelemetry accepts: None values left out, other objects as str."""
    out: dict[str, Any] = {}
    for key, value in (attributes or {}).items():
        if value is None:
            continue
        if isinstance(value, bool | int | float | str):
            out[key] = value
        elif isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            out[key] = list(value)
        else:
            out[key] = str(value)
    return out


def trace_headers() -> tuple[str, str] | None:
    """The current span's ``(traceparent, tracestate)``; None while off or outside a span."""
    otel = _otel if _decided else _current()
    if otel is None:
        return None
    carrier: dict[str, str] = {}
    otel.propagator.inject(carrier)
    parent = carrier.get("traceparent")
    if parent is None:
        return None
    return parent, carrier.get("tracestate", "")


def capture() -> Any:
    """The current trace context, to :func:`attach` elsewhere later; None while off."""
    otel = _otel if _decided else _current()
    return None if otel is None else otel.context.get_current()


@contextlib.contextmanager
def attach(captured: Any) -> Iterator[None]:
    """Make ``captured`` (from :func:`capture`) the current trace context inside."""
    otel = _otel if _decided else _current()
    if otel is None or captured is None:
        yield
        return
    token = otel.context.attach(captured)
    try:
        yield
    finally:
        otel.context.detach(token)


def log_fields() -> dict[str, str]:
    """``{"trace_id", "span_id"}`` of the current span (hex), or ``{}`` (off, no span)."""
    otel = _otel if _decided else _current()
    if otel is None:
        return {}
    ctx = otel.trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return {}
    return {"trace_id": f"{ctx.trace_id:032x}", "span_id": f"{ctx.span_id:016x}"}


# -- metrics -------------------------------------------------------------------------------


def add(name: str, value: float, attributes: Mapping[str, Any] | None = None) -> None:
    """Add ``value`` to the counter ``name`` (one of :data:`INSTRUMENTS`); no-op while off."""
    otel = _otel if _decided else _current()
    if otel is None:
        return
    counter = otel.instrument(name)
    if counter is not None:
        counter.add(value, _clean(attributes))


def record(name: str, value: float, attributes: Mapping[str, Any] | None = None) -> None:
    """Record ``value`` in the histogram ``name`` (one of :data:`INSTRUMENTS`); no-op while off."""
    otel = _otel if _decided else _current()
    if otel is None:
        return
    histogram = otel.instrument(name)
    if histogram is not None:
        histogram.record(value, _clean(attributes))


def observe(
    name: str,
    source: Any,
    read: Callable[[Any], Iterable[tuple[float, Mapping[str, Any]]]],
) -> None:
    """Report ``read(source)`` as the observable instrument ``name`` at each collection.

    ``read`` returns ``(value, attributes)`` pairs. ``source`` is held weakly: once it is
    gone, nothing more is reported for it. ``read`` runs on the exporter's thread and must
    not block for long; its failures are logged at DEBUG and skipped. No-op while off.
    """
    otel = _otel if _decided else _current()
    if otel is None:
        return
    otel.add_source(name, source, read)
