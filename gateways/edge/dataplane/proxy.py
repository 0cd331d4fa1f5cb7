"""One request through the edge: match, run the plugin phases (phases.py), answer with a
plugin's reply (reply.py) or forward upstream and stream the answer back (forward.py), log."""

from __future__ import annotations

import asyncio
import json
import logging
import posixpath
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

from gateways.edge.dataplane.forward import forward
from gateways.edge.dataplane.phases import log_abandoned, run_log, run_request_phases
from gateways.edge.dataplane.reply import JSON, send_reply, stream_reply
from gateways.edge.plugin import BodyTooLarge, Reply, RequestContext
from runtime.config import VERSION
from runtime.http1.server import Exchange, error_body

if TYPE_CHECKING:
    from gateways.edge.dataplane import DataPlane
    from gateways.edge.dataplane.compile import RouteTarget

log = logging.getLogger(__name__)

HEALTH = json.dumps({"status": "ok", "service": "edge-proxy", "version": VERSION}).encode()
NOT_FOUND = b'{"error_msg":"404 Route Not Found"}'
NO_UPSTREAM = b'{"error_msg":"missing upstream configuration in Route or Service"}'
GRPC_UPSTREAM = b'{"error_msg":"a grpc upstream is reached through grpc-transcode or grpc-web"}'
PLUGIN_FAILED = b'{"error_msg":"500 Internal Server Error"}'


async def handle(dp: DataPlane, ex: Exchange) -> None:
    compiled = dp.compiled
    target = ex.target.decode("latin-1")
    raw_path, _, query = target.partition("?")
    path = raw_path
    if "%" in path or "/." in path or "//" in path:
        path = normalize(path)
        raw_path = quote(path, safe="/:@!$&'()*+,;=-._~")
    ctx = RequestContext(
        ex.method, path, query, ex.headers, ex.client_ip, time.perf_counter(),
        real_request_uri=target,
    )  # fmt: skip
    route = compiled.router.match(ctx) if compiled is not None else None
    if route is None:
        if path == "/":
            ex.respond(200, HEALTH, JSON)
        else:
            ex.respond(404, NOT_FOUND, JSON)
        return
    ctx.route_id = route.id
    ctx.route = route.conf
    ctx.service_id = route.service_id
    rt: RouteTarget = route.target
    ctx.upstream = rt.upstream
    ctx.stream_body_from(ex.body)
    chain = rt.chain
    try:
        reply, chain = await run_request_phases(ctx, rt, chain)
    except BodyTooLarge:
        reply = Reply(413, error_body(413), dict(JSON))
    except Exception:
        # A plugin failed on this request: APISIX's shape, the cause in the log only.
        log.exception("plugin failed", extra={"route_id": ctx.route_id})
        reply = Reply(500, PLUGIN_FAILED, dict(JSON))
    except asyncio.CancelledError:
        log_abandoned(ctx, chain)
        raise
    try:
        if reply is not None and isinstance(reply.body, AsyncIterator):
            await stream_reply(ex, ctx, chain, reply)
        elif reply is not None:
            send_reply(ex, ctx, chain, reply)
        elif ctx.upstream is None:
            send_reply(ex, ctx, chain, Reply(503, NO_UPSTREAM, dict(JSON)))
        elif ctx.upstream.scheme != "http":
            # only the gRPC plugins reach a grpc upstream (the proxy speaks HTTP/1.1)
            send_reply(ex, ctx, chain, Reply(502, GRPC_UPSTREAM, dict(JSON)))
        else:
            await forward(dp, ex, ctx, ctx.upstream, rt, chain, raw_path, query)
    except Exception:
        log.exception("response phase failed", extra={"route_id": ctx.route_id})
        if not ex.response_started:
            ex.respond(500, PLUGIN_FAILED, JSON)
        else:
            ex.conn.close()
    except asyncio.CancelledError:
        log_abandoned(ctx, chain)
        raise
    if chain.log:
        asyncio.get_running_loop().call_soon(run_log, chain.log, ctx)


def normalize(path: str) -> str:
    """Decode and resolve `.`/`..` and repeated slashes, as nginx does for `$uri`: routes are
    matched on the normalized path, and it is what the upstream receives."""
    decoded = unquote(path)
    clean = posixpath.normpath(decoded)
    if clean.startswith("//"):
        clean = "/" + clean.lstrip("/")
    if decoded.endswith("/") and clean != "/":
        clean += "/"
    return clean
