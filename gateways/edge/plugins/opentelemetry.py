"""`opentelemetry` (APISIX priority 12009, rewrite + log): a server span per request, exported
to the collector, and W3C trace context (`traceparent`) sent upstream.

The span starts in rewrite, named as APISIX names it (`GET /api/*`: the method and the route's
matched uri), with APISIX's attributes (`net.host.name`, `http.method`, `http.scheme`,
`http.target`, `http.user_agent`, `apisix.route_id`, `apisix.route_name`, `http.route`,
`apisix.service_id`), the request variables of `additional_attributes` and the request headers
of `additional_header_prefix_attributes` (`x-my-*` takes every header with that prefix). It
ends in the log phase with `http.status_code`/`http.response.status_code` and an error status
from 500 up ("upstream response status: 503").

Its parent is the incoming `traceparent` when one is valid (`parent_base` follows its sampled
flag; the other samplers decide alone but the trace continues). Without one, the trace id is
the request id's 32 hex digits (a UUID's; `ctx.request_id` set by request-id, else the
`X-Request-Id` header) when OTEL_TRACE_ID_SOURCE is `x-request-id`, the spec's choice and this
edge's default, else random (also when the id is not a valid trace id). The span's
`traceparent` replaces the client's in the upstream request, sampled or not, and
`$opentelemetry_trace_id`, `$opentelemetry_span_id`, `$opentelemetry_context_traceparent` are
set for the loggers (APISIX: with `set_ngx_var`).

`sampler` is the route's (APISIX's default `always_off`: spans are neither recorded nor
exported, the context is still propagated). Node-level settings come from the edge's
configuration (APISIX's plugin metadata): OTEL_COLLECTOR_ADDRESS (OTLP over gRPC to :4317,
as the spec says, where APISIX exports OTLP/HTTP to :4318), OTEL_COLLECTOR_TIMEOUT,
OTEL_TRACE_ID_SOURCE, OTEL_RESOURCE. One TracerProvider per worker (and settings), created by
the first plugin instance, with the SDK's BatchSpanProcessor: spans are exported from its
thread, so a slow or dead collector never holds a request. Left out: APISIX's
`batch_span_processor` metadata (the SDK's defaults apply), `apisix.service_name`, and its
core spans of the request's stages.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateways.edge.model.plugins import opentelemetry as declared
from gateways.edge.plugin import Plugin, PluginEnv, Reply, RequestContext, parse_conf

HEX_TRACE_ID = re.compile(r"[0-9a-fA-F]{32}")
TRACING = "gateways.edge.plugins._tracing"  # the SDK side, imported by the first instance


async def flush() -> None:
    """Export every ended span now."""
    if TRACING in sys.modules:
        await sys.modules[TRACING].flush_all()


async def close() -> None:
    """Export what is left and stop the exporters (the data plane's stop)."""
    if TRACING in sys.modules:
        await sys.modules[TRACING].shutdown()


def trace_id_of(request_id: str) -> int:
    """A request id as a trace id (a UUID's 32 hex digits), 0 when it is not one."""
    digits = request_id.replace("-", "")
    return int(digits, 16) if HEX_TRACE_ID.fullmatch(digits) else 0


def matched_uri(ctx: RequestContext) -> str:
    """The route uri the request matched (APISIX's `curr_req_matched._path`)."""
    route = ctx.route
    uris = route.get("uris") or [route.get("uri", ctx.path)]
    for uri in uris:
        if uri == ctx.path or (uri.endswith("*") and ctx.path.startswith(uri[:-1])):
            return str(uri)
    return str(uris[0])


@dataclass(frozen=True, slots=True)
class OpenTelemetryConf:
    # name, options: {fraction, root: {name, options: {fraction}}}, the defaults filled in
    sampler: Mapping[str, Any]
    additional_attributes: list[str] | None = None
    additional_header_prefix_attributes: list[str] | None = None


class OpenTelemetry(declared.OpenTelemetry, Plugin):
    """A server span per request to an OpenTelemetry collector; trace context sent upstream."""

    def __init__(self, conf: Any, env: PluginEnv) -> None:
        super().__init__(conf, env)
        from gateways.edge.plugins._tracing import RouteTracing

        self.tracing = RouteTracing(parse_conf(OpenTelemetryConf, self.schema, conf), env)

    async def rewrite(self, ctx: RequestContext) -> Reply | None:
        self.tracing.rewrite(ctx)
        return None

    def log(self, ctx: RequestContext) -> None:
        self.tracing.log(ctx)
