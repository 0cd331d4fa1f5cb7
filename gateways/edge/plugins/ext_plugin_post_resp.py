"""`ext-plugin-post-resp` (APISIX priority -4000, before_proxy): the edge calls the upstream
itself, then an external processor sees the response and may rewrite it before the client does.

Deliberate difference from APISIX: the external processor is reached over gRPC with Envoy's
external processing protocol (`envoy.service.ext_proc.v3.ExternalProcessor/Process`) at the
node's `EXT_PROC_ADDRESS`, where APISIX runs a plugin runner behind a unix socket speaking
flatbuffers. The schema is APISIX's; `conf` reaches the processor in the stream's first message
as `metadata_context.filter_metadata["ext-plugin-post-resp"]` (see `_ext_proc`), with the
request's method, path, host and route in its `attributes`.

As APISIX does (with lua-resty-http), the plugin makes the upstream call in before_proxy: a
node of `ctx.upstream` (its balancer, so traffic-split's choice holds), the method, the
upstream URI (`ctx.upstream_uri`, else the path and query), the request headers with the
changes of the plugins before it and `X-Forwarded-*` as the proxy sends them, and the request
body (buffered, `ctx.read_body`). The worker's one aiohttp session is reused, with the
upstream's connect and read timeouts (a route's `timeout` wins). The response is buffered
whole; the processor then gets `response_headers` (`:status` and the headers) and
`response_body`; a `:status` header mutation changes the status, header mutations the headers,
a body mutation the body, and an `immediate_response` replaces the whole answer. The client
gets the result as a plugin answer (the header_filter and body_filter phases still run).

Failures: the upstream unreachable 502, timed out 504 (APISIX answers 502 to both), reported
to the upstream's passive health checks, never retried on another node. The processor
unreachable, timed out or breaking the protocol: 503 `{"error_msg": ...}`, logged; with
`allow_degradation` the upstream's response goes out unchanged (and with no
`EXT_PROC_ADDRESS` at all, the request is proxied as usual). Not done: mTLS to the upstream,
a grpc upstream, and a response's repeated `Set-Cookie` headers (the last one is kept).
"""

from __future__ import annotations

import logging
from typing import Any

import aiohttp
import grpc
from envoy.service.ext_proc.v3 import external_processor_pb2 as ext_proc
from yarl import URL

from gateways.edge.hop_by_hop import HOP_BY_HOP
from gateways.edge.hop_by_hop import RESPONSE_SKIP as PROXY_RESPONSE_SKIP
from gateways.edge.model.plugins import ext_plugin_post_resp as declared
from gateways.edge.plugin import Plugin, PluginEnv, Reply, RequestContext, parse_conf
from gateways.edge.plugins import _ext_proc
from gateways.edge.plugins._ext_proc import CONTINUE_AND_REPLACE, ExtProcConf, ProcessorError

log = logging.getLogger(__name__)

# The proxy's rules, and framing: the body is sent and received whole.
REQUEST_SKIP = HOP_BY_HOP | {"content-length"}
RESPONSE_SKIP = PROXY_RESPONSE_SKIP | {"content-length"}


class ExtPluginPostResp(declared.ExtPluginPostResp, Plugin):
    """The edge calls the upstream itself; an external processor (Envoy ext_proc) rewrites the
    response."""

    def __init__(self, conf: Any, env: PluginEnv) -> None:
        super().__init__(conf, env)
        settings = parse_conf(ExtProcConf, self.schema, conf)
        self.degrade = settings.allow_degradation
        self.metadata = _ext_proc.metadata(self.name, settings.conf)

    async def before_proxy(self, ctx: RequestContext) -> Reply | None:
        up = ctx.upstream
        if up is None or up.scheme != "http":
            return None  # the proxy answers these (503 no upstream, 502 grpc)
        if _ext_proc.address(self.env) is None:
            # nothing to ask: rather than call the upstream for a 503, refuse or proxy as usual
            return _ext_proc.unavailable(
                self.name, ctx, self.degrade, "EXT_PROC_ADDRESS is not configured"
            )
        fetched = await fetch(ctx, up)
        if isinstance(fetched, Reply):
            return fetched
        status, headers, body = fetched
        pairs = [(":status", str(status)), *headers.items()]
        first = ext_proc.ProcessingRequest(
            response_headers=ext_proc.HttpHeaders(
                headers=_ext_proc.header_map(pairs), end_of_stream=not body
            ),
            metadata_context=self.metadata,
            attributes=_ext_proc.attributes(ctx, status),
            protocol_config=_ext_proc.PROTOCOL,
        )
        try:
            answers = await _ext_proc.exchange(
                self.env, first, "response_headers", body or None, "response_body"
            )
        except (grpc.RpcError, ProcessorError) as exc:
            refused = _ext_proc.unavailable(self.name, ctx, self.degrade, exc)
            return refused or Reply(status, body, headers)
        return apply(answers, status, headers, body)


async def fetch(ctx: RequestContext, up: Any) -> tuple[int, dict[str, str], bytes] | Reply:
    """The upstream's response (status, headers, body), or the error Reply."""
    node = up.pick(ctx, [])
    ctx.vars["upstream_addr"] = node.address  # the node the log phase reports
    route_timeout = ctx.route.get("timeout") or {}  # a route's timeout wins over its upstream's
    timeout = aiohttp.ClientTimeout(
        sock_connect=float(route_timeout.get("connect", up.timeouts.connect)),
        sock_read=float(route_timeout.get("read", up.timeouts.read)),
    )
    body = await ctx.read_body()
    url = URL(f"http://{node.host}:{node.port}{_ext_proc.upstream_path(ctx)}", encoded=True)
    try:
        async with _ext_proc.http_session().request(
            ctx.method,
            url,
            headers=upstream_headers(ctx, up, node),
            data=body if body or ctx.method not in ("GET", "HEAD", "DELETE", "OPTIONS") else None,
            allow_redirects=False,
            timeout=timeout,
        ) as response:
            content = await response.read()
    except TimeoutError as exc:
        up.report_timeout(node)
        return _failed(ctx, 504, exc)
    except aiohttp.ClientError as exc:
        up.report_tcp_failure(node)
        return _failed(ctx, 502, exc)
    up.report_status(node, response.status)
    headers: dict[str, str] = {}
    for raw_name, raw_value in response.raw_headers:
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        if name in RESPONSE_SKIP:
            continue
        seen = headers.get(name)
        headers[name] = value if seen is None or name == "set-cookie" else f"{seen}, {value}"
    return response.status, headers, content


def _failed(ctx: RequestContext, status: int, exc: BaseException) -> Reply:
    log.warning("upstream failed", extra={"route_id": ctx.route_id, "error": repr(exc)})
    reason = "502 Bad Gateway" if status == 502 else "504 Gateway Time-out"
    return Reply(status, {"error_msg": reason})


def upstream_headers(ctx: RequestContext, up: Any, node: Any) -> dict[str, str]:
    """The request headers as the proxy sends them upstream."""
    changes = ctx.upstream_headers
    headers = {k: v for k, v in ctx.headers.items() if k not in REQUEST_SKIP and k not in changes}
    headers.update({k: v for k, v in changes.items() if v is not None and k not in REQUEST_SKIP})
    if up.pass_host == "pass":
        headers["host"] = changes.get("host") or ctx.host
    elif up.pass_host == "node":
        headers["host"] = node.host_header
    else:
        headers["host"] = up.upstream_host
    seen = ctx.headers.get("x-forwarded-for")
    headers["x-forwarded-for"] = f"{seen}, {ctx.client_ip}" if seen else ctx.client_ip
    headers["x-real-ip"] = ctx.client_ip
    headers["x-forwarded-proto"] = ctx.headers.get("x-forwarded-proto") or ctx.scheme
    headers["x-forwarded-host"] = ctx.headers.get("x-forwarded-host") or ctx.host
    if "x-forwarded-port" in ctx.headers:
        headers["x-forwarded-port"] = ctx.headers["x-forwarded-port"]
    return headers


def apply(answers: list[Any], status: int, headers: dict[str, str], body: bytes) -> Reply:
    """The processor's answers, in order, applied to the upstream's response."""
    headers[":status"] = str(status)

    def put(name: str, value: str | None) -> None:
        if value is None:
            headers.pop(name, None)
        elif name == ":status":
            if value.isdigit() and int(value) >= 200:
                headers[name] = value
        elif not name.startswith(":"):
            headers[name] = value

    for answer in answers:
        kind = answer.WhichOneof("response")
        if kind == "immediate_response":
            return _ext_proc.immediate(answer)
        common = getattr(answer, kind).response
        _ext_proc.mutate(common.header_mutation, headers.get, put)
        if kind == "response_body" or common.status == CONTINUE_AND_REPLACE:
            body = _ext_proc.body_of(common, body)
    return Reply(int(headers.pop(":status")), body, headers)
