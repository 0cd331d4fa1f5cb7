"""The opentelemetry plugin's tracing (gateways/edge/plugins/opentelemetry.py), with the
OpenTelemetry SDK and its OTLP/gRPC exporter: loaded by the first plugin instance built, so
loading the plugin registry (the Admin API's checks) does not load the SDK."""

from __future__ import annotations

import asyncio
import random
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context, create_key, get_value, set_value
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    ParentBased,
    Sampler,
    SamplingResult,
    TraceIdRatioBased,
)
from opentelemetry.trace import Link, SpanKind, Status, StatusCode, TraceState
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import Attributes

from gateways.edge.config import EdgeConfig
from gateways.edge.plugin import PluginEnv, RequestContext
from gateways.edge.plugins.opentelemetry import OpenTelemetryConf, matched_uri, trace_id_of
from gateways.edge.variables import variable

SPAN = "opentelemetry.span"  # the request's span in ctx.vars (not a variable name)
ROUTE_SAMPLER = create_key("strata-route-sampler")
PROPAGATOR = TraceContextTextMapPropagator()


class RouteSampler(Sampler):
    """The provider's sampler: the sampler of the route whose span starts, which travels in
    the span's parent context (one provider serves every route of the worker)."""

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Any = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        sampler = get_value(ROUTE_SAMPLER, parent_context)
        chosen = sampler if isinstance(sampler, Sampler) else ALWAYS_OFF
        found_links: list[Link] | None = links
        return chosen.should_sample(
            parent_context, trace_id, name, kind, attributes, found_links, trace_state
        )

    def get_description(self) -> str:
        return "RouteSampler"


class RequestIds(RandomIdGenerator):
    """Random ids, except the trace id a span is started with (`next_trace_id`, set just
    before `start_span`, which is synchronous: no other request runs in between). Only a
    random trace id gets W3C's "random" trace flag."""

    next_trace_id = 0
    random = True

    def generate_trace_id(self) -> int:
        wanted, self.next_trace_id = self.next_trace_id, 0
        self.random = not wanted
        return wanted or super().generate_trace_id()

    def is_trace_id_random(self) -> bool:
        return self.random


@dataclass(frozen=True)
class Settings:
    """The node-level settings (the edge's configuration)."""

    address: str
    timeout: float
    trace_id_source: str
    resource: tuple[str, ...]

    @classmethod
    def of(cls, config: EdgeConfig | None) -> Settings:
        def get(attribute: str) -> Any:
            if config is None:  # a plugin built outside a data plane
                return EdgeConfig.default(attribute)
            return getattr(config, attribute)

        return cls(
            get("otel_collector_address"),
            get("otel_collector_timeout"),
            get("otel_trace_id_source"),
            get("otel_resource"),
        )


@dataclass
class Tracing:
    provider: TracerProvider
    tracer: trace.Tracer
    ids: RequestIds


_TRACING: dict[tuple[str, float, tuple[str, ...]], Tracing] = {}


def tracing(settings: Settings) -> Tracing:
    """The worker's tracer provider for these settings, created on first use."""
    key = (settings.address, settings.timeout, settings.resource)
    found = _TRACING.get(key)
    if found is None:
        attributes: dict[str, Any] = {"service.name": EdgeConfig.service}
        attributes["hostname"] = socket.gethostname()
        for item in settings.resource:
            name, _, value = item.partition("=")
            attributes[name.strip()] = value.strip()
        ids = RequestIds()
        provider = TracerProvider(
            sampler=RouteSampler(), resource=Resource.create(attributes), id_generator=ids
        )
        exporter = OTLPSpanExporter(
            endpoint=settings.address, insecure=True, timeout=settings.timeout
        )
        provider.add_span_processor(BatchSpanProcessor(exporter))
        found = _TRACING[key] = Tracing(provider, provider.get_tracer("strata-edge"), ids)
    return found


async def flush_all() -> None:
    """Export every ended span now (from a thread: the exporter may need this loop's peers)."""
    for found in list(_TRACING.values()):
        await asyncio.to_thread(found.provider.force_flush)


async def shutdown() -> None:
    """Export what is left and stop the exporters (the data plane's stop)."""
    for found in list(_TRACING.values()):
        await asyncio.to_thread(found.provider.shutdown)
    _TRACING.clear()


def sampler_of(conf: Mapping[str, Any]) -> Sampler:
    """The route's `sampler` (or its `options.root`), the schema's defaults filled in."""
    name, options = conf["name"], conf["options"]
    if name == "always_on":
        return ALWAYS_ON
    if name == "trace_id_ratio":
        return TraceIdRatioBased(min(max(float(options["fraction"]), 0.0), 1.0))
    if name == "parent_base":
        return ParentBased(root=sampler_of(options["root"]))
    return ALWAYS_OFF


class RouteTracing:
    """One plugin instance's phases: its sampler, attributes and the worker's tracer."""

    def __init__(self, conf: OpenTelemetryConf, env: PluginEnv) -> None:
        settings = Settings.of(env.config)
        self.tracing = tracing(settings)
        self.ids_from_request = settings.trace_id_source == "x-request-id"
        self.sampler = sampler_of(conf.sampler)
        self.variables: list[str] = conf.additional_attributes or []
        self.exact_headers: list[tuple[str, str]] = []
        self.header_prefixes: list[str] = []
        for key in conf.additional_header_prefix_attributes or []:
            if len(key) >= 2 and key.endswith("*"):
                self.header_prefixes.append(key[:-1].lower())
            else:
                self.exact_headers.append((key, key.lower()))

    def _attributes(self, ctx: RequestContext, uri: str) -> dict[str, Any]:
        attributes = {
            "net.host.name": variable(ctx, "host"),
            "http.method": ctx.method,
            "http.scheme": ctx.scheme,
            "http.target": variable(ctx, "request_uri"),
            "http.user_agent": ctx.headers.get("user-agent"),
            "apisix.route_id": ctx.route_id,
            "apisix.route_name": ctx.route.get("name"),
            "http.route": uri,
            "apisix.service_id": ctx.service_id or None,
        }
        for name in self.variables:
            attributes[name] = variable(ctx, name)
        for key, header in self.exact_headers:
            attributes[key] = ctx.headers.get(header)
        for prefix in self.header_prefixes:
            for header, value in ctx.headers.items():
                if header.startswith(prefix):
                    attributes[header] = value
        return {k: str(v) for k, v in attributes.items() if v is not None}

    def rewrite(self, ctx: RequestContext) -> None:
        if self.sampler is ALWAYS_OFF and "traceparent" not in ctx.headers:
            self._unsampled(ctx)
            return
        uri = matched_uri(ctx)
        parent = PROPAGATOR.extract(ctx.headers)  # the client's traceparent, when valid
        trace_id = 0
        if self.ids_from_request:
            trace_id = trace_id_of(ctx.request_id or ctx.headers.get("x-request-id", ""))
        ids = self.tracing.ids
        ids.next_trace_id = trace_id  # used only when there is no parent
        try:
            span = self.tracing.tracer.start_span(
                f"{ctx.method} {uri}",
                context=set_value(ROUTE_SAMPLER, self.sampler, parent),
                kind=SpanKind.SERVER,
                attributes=self._attributes(ctx, uri),
            )
        finally:
            ids.next_trace_id = 0
        ctx.vars[SPAN] = span
        carrier: dict[str, str] = {}
        PROPAGATOR.inject(carrier, context=trace.set_span_in_context(span))
        ctx.upstream_headers.update(carrier)
        context = span.get_span_context()
        ctx.vars["opentelemetry_trace_id"] = trace.format_trace_id(context.trace_id)
        ctx.vars["opentelemetry_span_id"] = trace.format_span_id(context.span_id)
        ctx.vars["opentelemetry_context_traceparent"] = carrier.get("traceparent", "")

    def _unsampled(self, ctx: RequestContext) -> None:
        """APISIX's default (`always_off`) on a request without a parent: nothing is recorded,
        only the trace context travels upstream, so it is written here without the SDK's
        span machinery (what a non-recording span would carry: new ids, flags 00)."""
        trace_id = 0
        if self.ids_from_request:
            trace_id = trace_id_of(ctx.request_id or ctx.headers.get("x-request-id", ""))
        trace_id = trace_id or random.getrandbits(128) or 1
        span_id = random.getrandbits(64) or 1
        trace_hex, span_hex = f"{trace_id:032x}", f"{span_id:016x}"
        traceparent = f"00-{trace_hex}-{span_hex}-00"
        ctx.upstream_headers["traceparent"] = traceparent
        ctx.vars["opentelemetry_trace_id"] = trace_hex
        ctx.vars["opentelemetry_span_id"] = span_hex
        ctx.vars["opentelemetry_context_traceparent"] = traceparent

    def log(self, ctx: RequestContext) -> None:
        span = ctx.vars.pop(SPAN, None)
        if not isinstance(span, trace.Span):
            return
        status = ctx.status
        if status >= 500:
            span.set_status(Status(StatusCode.ERROR, f"upstream response status: {status}"))
        span.set_attribute("http.status_code", status)
        span.set_attribute("http.response.status_code", status)
        span.end()
