"""`grpc-web` (APISIX priority 505): gRPC-Web clients (browsers, over HTTP/1.1) in front of
a gRPC upstream.

- access: OPTIONS → 204 (a CORS preflight); a method other than POST → 405; a content type
  other than `application/grpc-web`, `application/grpc-web+proto`, `application/grpc-web-text`
  or `application/grpc-web-text+proto` → 400. The body (at most `max_req_body_size`, else
  413; base64 for the -text types) must be one uncompressed message frame (1 flag byte, 4
  length bytes, the message), else 400. The gRPC method is the request path after the
  route's prefix (uri `/grpc/web/*`, path `/grpc/web/helloworld.Greeter/SayHello` →
  `/helloworld.Greeter/SayHello`), or the whole path when the route's uri is not a prefix
  (APISIX 3.15+).
- before_proxy (after every access-phase plugin): the call on a node of the route's upstream
  (gateways/edge/plugins/_grpc.py) with the message as raw bytes (no proto needed), the
  client's `grpc-timeout` as the deadline.
- The answer: 200 with the request's content type and the upstream's initial metadata as
  headers; a frame per response message, then the trailer frame (flag 0x80, then
  `grpc-status:N\\r\\ngrpc-message:...\\r\\n` and any other trailing metadata); base64 for the
  -text types. The frames are sent as they arrive (chunked, one chunk per frame, each chunk
  base64 on its own in text mode, as APISIX encodes each chunk), for unary and
  server-streaming methods alike (the method's kind is not known without its proto), the
  upstream's read timeout bounding each wait (then the answer ends with status 4,
  DEADLINE_EXCEEDED). An error before any message is a trailers-only answer, sent whole:
  the trailer frame, and `grpc-status`/`grpc-message` headers.
- header_filter, on every answer of the route: `Access-Control-Allow-Origin: *` (unless a
  CORS plugin set one), `Access-Control-Expose-Headers: grpc-status,grpc-message`, and for
  OPTIONS `Access-Control-Allow-Methods: POST` and `Access-Control-Allow-Headers:
  <cors_allow_headers>`.

Deliberate differences: a body that is not exactly one uncompressed frame, or bad base64, is
refused here with 400 (APISIX passes it on and the upstream fails the call; a compressed
message cannot be passed on as raw bytes); the trailer frame carries the upstream's real
status also for a trailers-only error (APISIX reads upstream trailers only, and reports 2).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import re
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import grpc

from gateways.edge.model.plugins import grpc_web as declared
from gateways.edge.plugin import Plugin, PluginEnv, Reply, RequestContext, parse_conf
from gateways.edge.plugins._grpc import (
    UpstreamFailed,
    error_reply,
    metadata_headers,
    start_call,
)

log = logging.getLogger(__name__)

BINARY = frozenset({"application/grpc-web", "application/grpc-web+proto"})
TEXT = frozenset({"application/grpc-web-text", "application/grpc-web-text+proto"})
EXPOSE_HEADERS = "grpc-status,grpc-message"
STASH = "grpc-web"  # ctx.vars: (gRPC path, message, content type), from access to before_proxy
MESSAGE, TRAILER = 0x00, 0x80  # frame flags
TIMEOUT = re.compile(r"(\d{1,8})([HMSmun])")
UNIT_SECONDS = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}
# grpc-message is percent-encoded on the wire: printable ASCII stays, except '%'.
MESSAGE_SAFE = "".join(chr(c) for c in range(0x20, 0x7F) if c != 0x25)


@dataclass(frozen=True, slots=True)
class GrpcWebConf:
    cors_allow_headers: str
    max_req_body_size: int


class GrpcWeb(declared.GrpcWeb, Plugin):
    """Serve gRPC-Web (binary and text) clients from a gRPC upstream, with CORS."""

    def __init__(self, conf: Any, env: PluginEnv) -> None:
        super().__init__(conf, env)
        settings = parse_conf(GrpcWebConf, self.schema, conf)
        self.allow_headers = settings.cors_allow_headers
        self.max_body = int(settings.max_req_body_size)

    async def access(self, ctx: RequestContext) -> Reply | None:
        if ctx.method == "OPTIONS":
            return Reply(204)
        if ctx.method != "POST":
            log.warning("grpc-web: invalid request method", extra=_where(ctx))
            return error_reply(405)
        mime = ctx.headers.get("content-type", "")
        if mime not in BINARY and mime not in TEXT:
            log.warning("grpc-web: invalid request Content-Type", extra=_where(ctx))
            return error_reply(400)
        body = await ctx.read_body(self.max_body)  # over the limit: the proxy answers 413
        if mime in TEXT:
            try:
                body = base64.b64decode(body, validate=True)
            except binascii.Error:
                log.warning("grpc-web: failed to decode request body", extra=_where(ctx))
                return error_reply(400)
        message = _one_message(body)
        if message is None:
            log.warning("grpc-web: the body is not one uncompressed frame", extra=_where(ctx))
            return error_reply(400)
        ctx.vars[STASH] = (grpc_path(ctx), message, mime)
        return None

    async def before_proxy(self, ctx: RequestContext) -> Reply | None:
        stash = ctx.vars.pop(STASH, None)
        if stash is None or ctx.upstream is None:
            return None  # (no upstream: the proxy answers its 503)
        path, message, mime = stash
        text = mime in TEXT
        idle = ctx.upstream.timeouts.read
        timeout = _grpc_timeout(ctx.headers.get("grpc-timeout", ""))
        try:
            call, first = await start_call(ctx, path, message, timeout, idle)
        except UpstreamFailed as failed:
            return failed.reply
        headers = metadata_headers(await call.initial_metadata())
        headers["content-type"] = mime
        if first is None:  # trailers-only: the status goes in the headers too
            code, details, trailer = await _trailer(call)
            headers["grpc-status"] = str(code)
            if details:
                headers["grpc-message"] = details
            return Reply(200, _encode(trailer, text), headers)
        # Sent as the messages arrive (a unary answer too: the method's kind is not known
        # here, and a stream's next message may be long in coming).
        return Reply(200, _stream(_frames(call, first, idle), text), headers)

    def header_filter(self, ctx: RequestContext) -> None:
        headers = ctx.response_headers
        if ctx.method == "OPTIONS":
            headers["access-control-allow-methods"] = "POST"
            headers["access-control-allow-headers"] = self.allow_headers
        if not any(name.lower() == "access-control-allow-origin" for name in headers):
            headers["access-control-allow-origin"] = "*"
        headers["access-control-expose-headers"] = EXPOSE_HEADERS


def _where(ctx: RequestContext) -> dict[str, str]:
    return {
        "route_id": ctx.route_id,
        "method": ctx.method,
        "content_type": ctx.headers.get("content-type", ""),
    }


def grpc_path(ctx: RequestContext) -> str:
    """The gRPC method path: the request path after the matched uri's prefix (APISIX's
    `:ext`), or the whole path when no prefix uri of the route matches."""
    route = ctx.route
    uris = route.get("uris") or ([route["uri"]] if route.get("uri") else [])
    prefix = ""
    for uri in uris:
        star = uri.find("*")
        if star >= 0 and ctx.path.startswith(uri[:star]) and star > len(prefix):
            prefix = uri[:star]
    rest = ctx.path[len(prefix) :] if prefix else ""
    if not rest:
        return ctx.path
    return rest if rest.startswith("/") else "/" + rest


def _one_message(body: bytes) -> bytes | None:
    """The message of a body holding exactly one uncompressed message frame."""
    if len(body) < 5 or body[0] != MESSAGE:
        return None
    length = int.from_bytes(body[1:5], "big")
    return body[5:] if len(body) == 5 + length else None


def _frame(flag: int, payload: bytes) -> bytes:
    return bytes([flag]) + len(payload).to_bytes(4, "big") + payload


def _encode(data: bytes, text: bool) -> bytes:
    return base64.b64encode(data) if text else data


def _grpc_timeout(value: str) -> float | None:
    """A `grpc-timeout` header ("100m", "5S") in seconds."""
    found = TIMEOUT.fullmatch(value.strip())
    return int(found.group(1)) * UNIT_SECONDS[found.group(2)] if found else None


async def _trailer(call: Any, code: int | None = None, details: str = "") -> tuple[int, str, bytes]:
    """The trailer frame of a finished call (or of `code`/`details` given), with the code and
    the percent-encoded message."""
    trailing: Any = ()
    if code is None:
        code = (await call.code()).value[0]
        details = await call.details() or ""
        trailing = await call.trailing_metadata()
    message = quote(details, safe=MESSAGE_SAFE)
    lines = [f"grpc-status:{code}\r\n", f"grpc-message:{message}\r\n"]
    for name, value in metadata_headers(trailing).items():
        if name not in ("grpc-status", "grpc-message"):
            lines.append(f"{name}:{value}\r\n")
    return code, message, _frame(TRAILER, "".join(lines).encode("latin-1"))


async def _frames(call: Any, first: bytes, idle: float) -> AsyncGenerator[bytes]:
    """The answer's frames: each message, then the trailer frame (always last)."""
    try:
        yield _frame(MESSAGE, first)
        while True:
            try:
                async with asyncio.timeout(idle):
                    message = await call.read()
            except TimeoutError:
                log.warning("grpc-web: the upstream stream timed out")
                deadline = grpc.StatusCode.DEADLINE_EXCEEDED.value[0]
                yield (await _trailer(call, deadline, "upstream timed out"))[2]
                return
            except grpc.aio.AioRpcError:
                break  # the call's status ends the answer
            if message is grpc.aio.EOF:
                break
            yield _frame(MESSAGE, message)
        yield (await _trailer(call))[2]
    finally:
        call.cancel()  # (a finished call ignores it) the client went away: stop the upstream


async def _stream(frames: AsyncGenerator[bytes], text: bool) -> AsyncIterator[bytes]:
    """The answer's frames as response chunks, each base64 on its own in text mode."""
    try:
        async for frame in frames:
            yield _encode(frame, text)
    finally:
        await frames.aclose()
