"""opentelemetry through a real data plane (serve_edge) to a real OTLP/gRPC collector (a
grpc.aio TraceService in the test): the span's name, attributes and trace id (the request
id's), the traceparent sent upstream, the incoming parent, the samplers, and the schema."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import grpc
import pytest
from aiohttp import web
from edge_kit import EDGE_CONFIG, route, serve_edge, upstream
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from gateways.edge.config import EdgeConfig
from gateways.edge.model.schema import check, with_defaults
from gateways.edge.plugins import REGISTRY, opentelemetry
from gateways.edge.plugins.opentelemetry import trace_id_of


@pytest.fixture(autouse=True)
async def no_leftovers() -> AsyncIterator[None]:
    yield
    await opentelemetry.close()


class Collector(trace_service_pb2_grpc.TraceServiceServicer):
    """Keeps every exported span with its resource's attributes."""

    def __init__(self) -> None:
        self.spans: list[tuple[dict[str, str], Span]] = []

    async def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: Any
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        for resource_spans in request.resource_spans:
            resource = attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                self.spans.extend((resource, span) for span in scope_spans.spans)
        return trace_service_pb2.ExportTraceServiceResponse()

    def of_trace(self, trace_id: str) -> list[Span]:
        return [span for _, span in self.spans if span.trace_id.hex() == trace_id]


def attributes(values: Any) -> dict[str, Any]:
    out = {}
    for kv in values:
        kind = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, kind) if kind else None
    return out


@asynccontextmanager
async def collector() -> AsyncIterator[tuple[Collector, EdgeConfig]]:
    """A collector on a free loopback port, and an edge configuration pointing at it."""
    found = Collector()
    server = grpc.aio.server()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(found, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield found, dataclasses.replace(EDGE_CONFIG, otel_collector_address=f"127.0.0.1:{port}")
    finally:
        await server.stop(None)


def traceparent(echoed: Any) -> tuple[str, str, str, str]:
    version, trace_id, span_id, flags = echoed["headers"]["traceparent"].split("-")
    return version, trace_id, span_id, flags


async def test_a_server_span_per_request_with_the_request_id_as_trace_id() -> None:
    request_id = str(uuid.uuid4())
    async with collector() as (found, config), upstream() as up, serve_edge(config=config) as edge:
        conf = {"sampler": {"name": "always_on"}, "additional_attributes": ["arg_who"],
                "additional_header_prefix_attributes": ["x-my-*", "X-Exact"]}  # fmt: skip
        edge.apply(
            routes=[
                route("r1", "/api/*", up, name="things",
                      plugins={"request-id": {}, "opentelemetry": conf}),
            ]
        )  # fmt: skip
        status, echoed, _ = await edge.call(
            "/api/things?who=me",
            headers={"X-Request-Id": request_id, "User-Agent": "test/1", "X-My-A": "1",
                     "X-My-B": "2", "X-Exact": "e", "traceparent": "not a traceparent"},
        )  # fmt: skip
        assert status == 200
        await opentelemetry.flush()
    version, trace_id, span_id, flags = traceparent(echoed)
    assert (version, trace_id, flags) == ("00", uuid.UUID(request_id).hex, "01")
    ((resource, span),) = [(r, s) for r, s in found.spans if s.trace_id.hex() == trace_id]
    assert span.span_id.hex() == span_id and span.parent_span_id == b""
    assert span.name == "GET /api/*" and span.kind == Span.SPAN_KIND_SERVER
    assert attributes(span.attributes) == {
        "net.host.name": "127.0.0.1",
        "http.method": "GET",
        "http.scheme": "http",
        "http.target": "/api/things?who=me",
        "http.user_agent": "test/1",
        "apisix.route_id": "r1",
        "apisix.route_name": "things",
        "http.route": "/api/*",
        "arg_who": "me",
        "x-my-a": "1",
        "x-my-b": "2",
        "X-Exact": "e",
        "http.status_code": 200,
        "http.response.status_code": 200,
    }
    assert span.status.code == Status.STATUS_CODE_UNSET
    assert resource["service.name"] == "edge-proxy" and resource["hostname"]


async def test_always_off_by_default_exports_nothing_but_propagates() -> None:
    off_id, on_id = str(uuid.uuid4()), str(uuid.uuid4())
    async with collector() as (found, config), upstream() as up, serve_edge(config=config) as edge:
        always_on = {"opentelemetry": {"sampler": {"name": "always_on"}}}
        edge.apply(
            routes=[
                route("off", "/off", up, plugins={"opentelemetry": {}}),
                route("on", "/on", up, plugins=always_on),
            ]
        )
        _, off, _ = await edge.call("/off", headers={"X-Request-Id": off_id})
        assert (await edge.call("/on", headers={"X-Request-Id": on_id}))[0] == 200
        await opentelemetry.flush()
    assert traceparent(off)[1::2] == (uuid.UUID(off_id).hex, "00")  # propagated, not sampled
    assert found.of_trace(uuid.UUID(on_id).hex)  # the flush did export what was sampled
    assert found.of_trace(uuid.UUID(off_id).hex) == []


async def test_the_incoming_traceparent_is_the_parent() -> None:
    parent_trace, parent_span = uuid.uuid4().hex, "b7ad6b7169203331"
    async with collector() as (found, config), upstream() as up, serve_edge(config=config) as edge:
        root = {"root": {"name": "always_on"}}
        parent_based = {"sampler": {"name": "parent_base", "options": root}}
        edge.apply(routes=[route("r1", "/api/*", up, plugins={"opentelemetry": parent_based})])
        for flags in ("01", "00"):
            headers = {"traceparent": f"00-{parent_trace}-{parent_span}-{flags}",
                       "X-Request-Id": str(uuid.uuid4())}  # fmt: skip
            _, echoed, _ = await edge.call(f"/api/{flags}", headers=headers)
            _, trace_id, span_id, sent_flags = traceparent(echoed)
            assert (trace_id, sent_flags) == (parent_trace, flags)  # the parent's trace and flag
            assert span_id != parent_span
        root_id = str(uuid.uuid4())  # no parent: the root sampler (always_on) decides
        _, echoed, _ = await edge.call("/api/root", headers={"X-Request-Id": root_id})
        await opentelemetry.flush()
    (child,) = found.of_trace(parent_trace)  # only the sampled parent's child was exported
    assert child.parent_span_id.hex() == parent_span
    assert attributes(child.attributes)["http.target"] == "/api/01"
    assert traceparent(echoed)[1::2] == (uuid.UUID(root_id).hex, "01")
    assert found.of_trace(uuid.UUID(root_id).hex)


async def test_an_upstream_error_status() -> None:
    async def unavailable(request: web.Request) -> web.Response:
        return web.Response(status=503)

    async with (
        collector() as (found, config),
        upstream(unavailable) as up,
        serve_edge(config=config) as edge,
    ):
        conf = {"sampler": {"name": "trace_id_ratio", "options": {"fraction": 1}}}
        edge.apply(routes=[route("r1", "/*", up, plugins={"opentelemetry": conf})])
        assert (await edge.call("/fail"))[0] == 503
        await opentelemetry.flush()
    ((_, span),) = found.spans
    assert span.status.code == Status.STATUS_CODE_ERROR
    assert span.status.message == "upstream response status: 503"
    assert attributes(span.attributes)["http.status_code"] == 503


async def test_random_trace_ids() -> None:
    request_id = str(uuid.uuid4())
    random_source = dataclasses.replace(EDGE_CONFIG, otel_trace_id_source="random")
    async with upstream() as up:
        async with serve_edge() as edge:  # OTEL_TRACE_ID_SOURCE x-request-id, the default
            edge.apply(routes=[route("r1", "/*", up, plugins={"opentelemetry": {}})])
            _, echoed, _ = await edge.call("/a", headers={"X-Request-Id": "req-1"})
            _, not_a_uuid, _, _ = traceparent(echoed)  # not a trace id: a random one
            _, echoed, _ = await edge.call("/a", headers={"X-Request-Id": request_id})
            assert traceparent(echoed)[1] == uuid.UUID(request_id).hex
        async with serve_edge(config=random_source) as edge:
            edge.apply(routes=[route("r1", "/*", up, plugins={"opentelemetry": {}})])
            _, echoed, _ = await edge.call("/a", headers={"X-Request-Id": request_id})
    assert trace_id_of(not_a_uuid) != 0
    assert trace_id_of(traceparent(echoed)[1]) not in (0, uuid.UUID(request_id).int)


def test_request_ids_as_trace_ids() -> None:
    assert trace_id_of("0af76519-16cd-43dd-8448-eb211c80319c") == 0x0AF7651916CD43DD8448EB211C80319C
    assert trace_id_of("0af7651916cd43dd8448eb211c80319c") == 0x0AF7651916CD43DD8448EB211C80319C
    for invalid in ("", "req-1", "0x" + "1" * 30, "1_" + "1" * 30, "g" * 32, "1" * 31):
        assert trace_id_of(invalid) == 0, invalid


def test_schema_and_defaults() -> None:
    schema = REGISTRY["opentelemetry"].schema
    assert check(schema, {"sampler": {"name": "sometimes"}}) == (
        'property "sampler" validation failed: property "name" validation failed: '
        'matches none of the enum values ["always_on", "always_off", "trace_id_ratio", '
        '"parent_base"]'
    )
    root = {"name": "parent_base", "options": {"root": {"name": "parent_base"}}}
    assert check(schema, {"sampler": root}) is not None  # a root sampler is not parent_base
    assert check(schema, {"additional_attributes": [""]}) is not None
    assert check(schema, {"additional_header_prefix_attributes": "x-*"}) is not None
    assert check(schema, {"sampler": {"name": "trace_id_ratio", "options": {"fraction": "1"}}})
    off = {"name": "always_off", "options": {"fraction": 0}}
    assert with_defaults(schema, {}) == {
        "sampler": {"name": "always_off", "options": {"fraction": 0, "root": off}}
    }
    assert with_defaults(schema, {"sampler": {"name": "parent_base", "options": {}}}) == {
        "sampler": {"name": "parent_base", "options": {"fraction": 0, "root": off}}
    }
