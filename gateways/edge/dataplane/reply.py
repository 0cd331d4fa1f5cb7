"""Answers made at the edge instead of the upstream's (a plugin's `Reply`, a streamed one,
an upstream failure): header_filter and body_filter run on them as on an upstream's."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator

from gateways.edge.dataplane.chain import Chain
from gateways.edge.hop_by_hop import RESPONSE_SKIP
from gateways.edge.plugin import Reply, RequestContext
from runtime.http1.pool import UpstreamError
from runtime.http1.server import Exchange, error_body

log = logging.getLogger(__name__)

JSON = {"content-type": "application/json"}


def headers_out(headers: dict[str, str]) -> dict[str, str]:
    """Plugins may write any case; the wire gets each name once, lower case, no framing."""
    out = {}
    for name, value in headers.items():
        key = name.lower()
        if key != "content-length" and key not in RESPONSE_SKIP:
            out[key] = value
    return out


def send_reply(ex: Exchange, ctx: RequestContext, chain: Chain, reply: Reply) -> None:
    """A plugin's answer: header_filter and body_filter still run (so do log, after)."""
    body = reply.body
    headers = {k.lower(): v for k, v in reply.headers.items()}
    if not isinstance(body, bytes | bytearray):
        body = json.dumps(body).encode()
        headers.setdefault("content-type", "application/json")
    ctx.status = reply.status
    ctx.response_headers = headers
    for header_filter in chain.header_filter:
        header_filter(ctx)
    for body_filter in chain.body_filter:
        body = body_filter(ctx, bytes(body), False) + body_filter(ctx, b"", True)
    ctx.bytes_sent = len(body)
    ex.respond(ctx.status, bytes(body), headers_out(ctx.response_headers))


async def stream_reply(ex: Exchange, ctx: RequestContext, chain: Chain, reply: Reply) -> None:
    """A plugin's answer whose body is an async iterator of chunks (grpc-web's server
    streams): sent as it comes, as an upstream's body would be, pausing while the client's
    socket is full; the iterator is closed when the client goes away."""
    body: AsyncIterator[bytes] = reply.body
    ctx.status = reply.status
    ctx.response_headers = {k.lower(): v for k, v in reply.headers.items()}
    try:
        for header_filter in chain.header_filter:
            header_filter(ctx)
        has_body = ex.method != "HEAD" and ctx.status not in (204, 304)
        head = ex.head(ctx.status, headers_out(ctx.response_headers), None, body=has_body)
        if not has_body:
            ex.conn.write(head)
            return
        async for chunk in body:
            for body_filter in chain.body_filter:
                chunk = body_filter(ctx, chunk, False)
            ctx.bytes_sent += len(chunk)
            ex.write(chunk, head)
            head = b""
            if ex.conn.closed:
                return
            await ex.conn.drain()
        tail = b""
        for body_filter in chain.body_filter:  # eof: buffering filters flush
            tail = body_filter(ctx, tail, True)
        ctx.bytes_sent += len(tail)
        ex.write(tail, head)
        ex.end()
    finally:
        aclose = getattr(body, "aclose", None)
        if aclose is not None:
            await aclose()


def upstream_failed(ex: Exchange, ctx: RequestContext, chain: Chain, exc: UpstreamError) -> None:
    """No upstream answer: 502, or 504 for a timeout (the phases after still run)."""
    status = 504 if exc.timeout else 502
    log.warning("upstream failed", extra={"route_id": ctx.route_id, "error": str(exc)})
    send_reply(ex, ctx, chain, Reply(status, error_body(status), dict(JSON)))
