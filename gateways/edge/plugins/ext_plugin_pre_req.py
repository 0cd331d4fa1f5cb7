"""`ext-plugin-pre-req` (APISIX priority 12000, rewrite): an external processor sees the
request before the edge's other plugins and may rewrite it or answer it.

Deliberate difference from APISIX: the external processor is reached over gRPC with Envoy's
external processing protocol (`envoy.service.ext_proc.v3.ExternalProcessor/Process`) at the
node's `EXT_PROC_ADDRESS`, where APISIX runs a plugin runner behind a unix socket speaking
flatbuffers. The schema is APISIX's; `conf` reaches the processor in the stream's first message
as `metadata_context.filter_metadata["ext-plugin-pre-req"]` (see `_ext_proc`).

The processor gets `request_headers`: the pseudo headers `:method`, `:path` (the URI as it
would go upstream, with its query), `:authority`, `:scheme`, then the request's headers with
the changes of the plugins before this one; `end_of_stream` when the request has no body.
A request with a body has it buffered (`ctx.read_body`) and sent whole as `request_body`
unless the headers answer skips or replaces it. The answers' header mutations apply to the
request sent upstream (`:path` to its URI), a body mutation replaces its body, and an
`immediate_response` answers the client with its status, headers and body.

A processor that cannot be reached, times out (`GRPC_DEADLINE_SECS`) or breaks the protocol:
503 `{"error_msg": ...}`, the cause logged; with `allow_degradation` the request goes on
untouched. APISIX answers 503 the same way (its runner's "allow_degradation" likewise).
"""

from __future__ import annotations

from typing import Any

import grpc
from envoy.service.ext_proc.v3 import external_processor_pb2 as ext_proc

from gateways.edge.model.plugins import ext_plugin_pre_req as declared
from gateways.edge.plugin import Plugin, PluginEnv, Reply, RequestContext, parse_conf
from gateways.edge.plugins import _ext_proc
from gateways.edge.plugins._ext_proc import CONTINUE_AND_REPLACE, ExtProcConf, ProcessorError


class ExtPluginPreReq(declared.ExtPluginPreReq, Plugin):
    """An external processor (Envoy ext_proc over gRPC) rewrites or answers the request first."""

    def __init__(self, conf: Any, env: PluginEnv) -> None:
        super().__init__(conf, env)
        settings = parse_conf(ExtProcConf, self.schema, conf)
        self.degrade = settings.allow_degradation
        self.metadata = _ext_proc.metadata(self.name, settings.conf)

    async def rewrite(self, ctx: RequestContext) -> Reply | None:
        body = await ctx.read_body() if has_body(ctx) else None
        first = ext_proc.ProcessingRequest(
            request_headers=ext_proc.HttpHeaders(
                headers=_ext_proc.header_map(request_headers(ctx)), end_of_stream=body is None
            ),
            metadata_context=self.metadata,
            attributes=_ext_proc.attributes(ctx),
            protocol_config=_ext_proc.PROTOCOL,
        )
        try:
            answers = await _ext_proc.exchange(
                self.env, first, "request_headers", body, "request_body"
            )
        except (grpc.RpcError, ProcessorError) as exc:
            return _ext_proc.unavailable(self.name, ctx, self.degrade, exc)
        return apply(ctx, answers)


def has_body(ctx: RequestContext) -> bool:
    if ctx.body is not None:
        return bool(ctx.body)
    headers = ctx.headers
    return "transfer-encoding" in headers or headers.get("content-length", "0") not in ("", "0")


def request_headers(ctx: RequestContext) -> list[tuple[str, str]]:
    """The request as it would go upstream now: pseudo headers, then the headers."""
    pairs = [
        (":method", ctx.method),
        (":path", _ext_proc.upstream_path(ctx)),
        (":authority", ctx.host),
        (":scheme", ctx.scheme),
    ]
    changes = ctx.upstream_headers
    pairs += [(k, v) for k, v in ctx.headers.items() if k not in changes]
    pairs += [(k, v) for k, v in changes.items() if v is not None]
    return pairs


def apply(ctx: RequestContext, answers: list[Any]) -> Reply | None:
    """The processor's answers, in order, applied to the request sent upstream."""

    def current(name: str) -> str | None:
        if name == ":path":
            return _ext_proc.upstream_path(ctx)
        if name in ctx.upstream_headers:
            return ctx.upstream_headers[name]
        return ctx.headers.get(name)

    def put(name: str, value: str | None) -> None:
        if name == ":path":
            if value:
                ctx.upstream_uri = value
        elif not name.startswith(":"):
            ctx.upstream_headers[name] = value

    for answer in answers:
        kind = answer.WhichOneof("response")
        if kind == "immediate_response":
            return _ext_proc.immediate(answer)
        common = getattr(answer, kind).response
        _ext_proc.mutate(common.header_mutation, current, put)
        if kind == "request_body" or common.status == CONTINUE_AND_REPLACE:
            before = ctx.body or b""
            after = _ext_proc.body_of(common, before)
            if after is not before:
                ctx.set_body(after)
    return None
