"""What the gRPC plugins (grpc-transcode, grpc-web) share: the upstream call over grpcio's
asyncio API, (the `protos` resource is loaded into protobuf descriptors by
`gateways/edge/model/protos.py`).

The edge's proxy speaks HTTP/1.1 only, so these plugins call a `grpc`/`grpcs` upstream
themselves: a node is picked from `ctx.upstream` as the proxy picks one, over one `grpc.aio`
channel per node address per worker (created in the running loop on first use, then reused;
grpcio keeps its HTTP/2 connection alive). Messages go as raw bytes (no generated stubs). As
nginx's `grpc_pass`: the client's headers go upstream as metadata (with X-Forwarded-For and
X-Real-IP), a node that refuses the connection is reported to passive health and the next
one is tried (the upstream's `retries`), then 502; an upstream silent past its read timeout
is a 504. `grpcs` verifies the node's certificate against the system roots (grpcio cannot
skip the check as nginx's default `grpc_ssl_verify off` does).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import weakref
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

import grpc

from gateways.edge.plugin import Reply, RequestContext

if TYPE_CHECKING:
    from gateways.edge.dataplane.upstream import Node

log = logging.getLogger(__name__)

JSON = {"content-type": "application/json"}
CHANNEL_OPTIONS = (
    ("grpc.max_receive_message_length", -1),  # the plugins apply their own size limits
    ("grpc.max_send_message_length", -1),
    ("grpc.enable_http_proxy", 0),  # nodes are reached directly, never through *_proxy
    # a node that was down is tried again within 10 s (passive health's own pause)
    ("grpc.max_reconnect_backoff_ms", 10_000),
)
# Not sent upstream as metadata: HTTP/1.1 framing, what grpcio sets itself, and the
# forwarding headers set below.
NOT_METADATA = frozenset(
    {
        "host", "connection", "keep-alive", "proxy-connection", "te", "trailer",
        "transfer-encoding", "upgrade", "expect", "content-length", "content-type",
        "user-agent", "accept-encoding", "x-forwarded-for", "x-real-ip",
        "x-forwarded-proto", "x-forwarded-host", "x-forwarded-port",
    }
)  # fmt: skip
# APISIX's grpc-status → HTTP status (grpc-transcode; google.rpc.Code's HTTP mapping).
HTTP_STATUS = {
    1: 499, 2: 500, 3: 400, 4: 504, 5: 404, 6: 409, 7: 403, 8: 429,
    9: 400, 10: 409, 11: 400, 12: 501, 13: 500, 14: 503, 15: 500, 16: 401,
}  # fmt: skip

_channels: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[str, bool], grpc.aio.Channel]
] = weakref.WeakKeyDictionary()


def error_reply(status: int) -> Reply:
    """APISIX's error shape (`{"error_msg": "502 Bad Gateway"}`), as the proxy's own errors."""
    return Reply(status, {"error_msg": f"{status} {HTTPStatus(status).phrase}"}, dict(JSON))


class UpstreamFailed(Exception):
    """No gRPC answer: the reply (502 no node reachable, 504 read timeout) is in `reply`."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.reply = error_reply(status)


def channel(node: Node, secure: bool) -> grpc.aio.Channel:
    """This worker's channel to `node` (one per address, made in the running loop)."""
    per_loop = _channels.setdefault(asyncio.get_running_loop(), {})
    key = (node.address, secure)
    found = per_loop.get(key)
    if found is None:
        target = f"[{node.host}]:{node.port}" if ":" in node.host else node.address
        if secure:
            found = grpc.aio.secure_channel(
                target, grpc.ssl_channel_credentials(), options=CHANNEL_OPTIONS
            )
        else:
            found = grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS)
        per_loop[key] = found
    return found


async def close() -> None:
    """Close this loop's channels (a worker stopping)."""
    for each in _channels.pop(asyncio.get_running_loop(), {}).values():
        await each.close()


def upstream_metadata(ctx: RequestContext) -> list[tuple[str, str]]:
    """The request headers as gRPC metadata (with the plugins' `upstream_headers` changes),
    plus the forwarding headers the proxy sets."""
    changes = ctx.upstream_headers
    merged = {k: v for k, v in ctx.headers.items() if k not in changes}
    merged.update((k.lower(), v) for k, v in changes.items() if v is not None)
    out = [
        (name, value)
        for name, value in merged.items()
        if name not in NOT_METADATA
        and not name.startswith(("grpc-", ":"))
        and not name.endswith("-bin")  # binary metadata would need decoding first
        and value.isascii()
        and value.isprintable()
    ]
    forwarded = ctx.headers.get("x-forwarded-for")
    client = ctx.client_ip
    out.append(("x-forwarded-for", f"{forwarded}, {client}" if forwarded else client))
    out.append(("x-real-ip", client))
    out.append(("x-forwarded-proto", ctx.headers.get("x-forwarded-proto") or ctx.scheme))
    if ctx.host:
        out.append(("x-forwarded-host", ctx.headers.get("x-forwarded-host") or ctx.host))
    return out


def metadata_headers(metadata: Any) -> dict[str, str]:
    """gRPC metadata as HTTP headers (binary values base64, as on the wire)."""
    headers = {}
    for name, value in metadata or ():
        if isinstance(value, bytes):
            value = base64.b64encode(value).decode().rstrip("=")
        headers[name] = value
    return headers


def _refused(exc: grpc.aio.AioRpcError) -> bool:
    """The node could not be reached at all (not an UNAVAILABLE the server sent): grpcio
    says so in the status details only."""
    details = (exc.details() or "").lower()
    return exc.code() == grpc.StatusCode.UNAVAILABLE and (
        "failed to connect" in details or "dns resolution failed" in details
    )


async def start_call(
    ctx: RequestContext,
    path: str,
    request: bytes,
    deadline: float | None,
    idle: float | None,
) -> tuple[grpc.aio.UnaryStreamCall[bytes, bytes], bytes | None]:
    """Call `path` with the serialized `request` on a node of `ctx.upstream`; returns the call
    and its first response message (None when the call ended without one: its status is then
    final). Unary and server-streaming methods look the same on the wire, so both go through
    a unary-stream call. `deadline` is the gRPC deadline (seconds); `idle` bounds the wait for
    the first message. Raises `UpstreamFailed` (502, 504)."""
    up = ctx.upstream
    metadata = upstream_metadata(ctx)
    secure = up.scheme == "grpcs"
    tried: list[Node] = []
    while True:
        node = up.pick(ctx, tried)
        ctx.vars["upstream_addr"] = node.address  # the node the log phase reports
        method: grpc.aio.UnaryStreamMultiCallable[bytes, bytes] = channel(
            node, secure
        ).unary_stream(path)
        call = method(request, timeout=deadline, metadata=metadata)
        sent = time.monotonic()
        try:
            async with asyncio.timeout(idle):
                first = await call.read()
        except TimeoutError:
            call.cancel()
            up.report_timeout(node)
            log.warning("grpc upstream timed out", extra={"route_id": ctx.route_id})
            raise UpstreamFailed(504) from None
        except grpc.aio.AioRpcError as exc:
            if not _refused(exc):
                return call, None  # the upstream answered with an error status
            up.report_tcp_failure(node)
            tried.append(node)
            if len(tried) <= up.retries:
                continue
            log.warning(
                "grpc upstream unreachable",
                extra={"route_id": ctx.route_id, "error": exc.details()},
            )
            raise UpstreamFailed(502) from None
        finally:
            ctx.upstream_latency = time.monotonic() - sent
        return call, (None if first is grpc.aio.EOF else first)  # type: ignore[return-value]
