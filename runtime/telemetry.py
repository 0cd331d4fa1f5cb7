"""Telemetry: a Prometheus registry per service with the transport metrics every service
shares, and OpenTelemetry tracing (OTLP over gRPC when OTEL_EXPORTER_OTLP_ENDPOINT is set)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, ParentBased
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from runtime.config import VERSION


def cached_labels(metric: Any) -> Callable[..., Any]:
    """`metric.labels`, remembered per label values: label sets are few (bounded by design),
    and this spares the validation and lock of `labels()` on every request."""
    return functools.lru_cache(maxsize=4096)(metric.labels)


class Metrics:
    """The service's registry; services add their own metrics (the spec's names) to it."""

    def __init__(self, service: str) -> None:
        self.registry = CollectorRegistry()
        self.http_requests = Counter(
            "strata_http_requests",
            "HTTP requests served by the front door",
            ["service", "route", "method", "status"],
            registry=self.registry,
        )
        self.http_latency = Histogram(
            "strata_http_request_duration_seconds",
            "Front-door request latency",
            ["service", "route"],
            registry=self.registry,
        )
        self.grpc_requests = Counter(
            "strata_grpc_requests",
            "gRPC calls served",
            ["service", "method", "code"],
            registry=self.registry,
        )
        self.service = service
        self.http_requests_of = cached_labels(self.http_requests)
        self.http_latency_of = cached_labels(self.http_latency)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def setup_tracing(service: str, otlp_endpoint: str | None) -> TracerProvider:
    """A tracer provider for this process; spans are exported only when an endpoint is set,
    but trace context is always propagated (W3C traceparent) so callers' traces continue."""
    # Without a collector, a recorded span goes nowhere: record only what a caller's sampled
    # trace asks for (ParentBased), never a root of our own. Context still propagates.
    sampler = ParentBased(ALWAYS_ON if otlp_endpoint else ALWAYS_OFF)
    provider = TracerProvider(
        resource=Resource.create({"service.name": service, "service.version": VERSION}),
        sampler=sampler,
    )
    if otlp_endpoint:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=otlp_endpoint)))
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        trace.set_tracer_provider(provider)
    if otlp_endpoint:
        # Server spans for every aiohttp app built from now on (the gRPC server gets its
        # interceptor in runtime.serve), and client spans with traceparent on outgoing calls.
        # Without a collector they would cost ~150 µs a request for nothing: services that
        # call onwards forward the caller's `traceparent` themselves (the AI gateway does).
        from opentelemetry.instrumentation.aiohttp_client import AioHttpClientInstrumentor
        from opentelemetry.instrumentation.aiohttp_server import AioHttpServerInstrumentor

        AioHttpServerInstrumentor().instrument(tracer_provider=provider)
        AioHttpClientInstrumentor().instrument(tracer_provider=provider)
    return provider
