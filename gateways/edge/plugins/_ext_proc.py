"""What `ext-plugin-pre-req` and `ext-plugin-post-resp` share: their schema, and the edge's
client of an external processor speaking Envoy's external processing protocol
(`envoy.service.ext_proc.v3.ExternalProcessor/Process`, a bidirectional gRPC stream).

One stream per plugin call. The first message carries, besides its headers:
- `metadata_context.filter_metadata[<plugin name>]`: the plugin's `conf` entries, in order,
  as `{"conf": [{"name": ..., "value": ...}, ...]}` (APISIX sends them to its runner the same
  way, as a list of name/value pairs);
- `attributes["envoy.filters.http.ext_proc"]`: Envoy attributes of the request
  (`request.method`, `request.path` with the query, `request.host`, `request.scheme`,
  `request.id`, `source.address`, `xds.route_name`; `response.code` for responses);
- `protocol_config`: both bodies are sent BUFFERED (whole, one message, `end_of_stream`).
Header values are sent in `raw_value`, as Envoy does; answers may use `value` or `raw_value`.

A headers message is answered before its body is sent; the processor may skip the body
(`mode_override` with a body mode NONE) or replace it (`CONTINUE_AND_REPLACE` and a
`body_mutation`). Mutations follow Envoy's rules: `append` (default false: overwrite) or
`append_action`; `host`, `:authority`, `:scheme`, `:method` cannot be set, and `:`-headers and
`host` cannot be removed; `:path` rewrites the upstream URI, `:status` a response's status
(200 and above). `content-length` and `transfer-encoding` are the edge's own framing and are
left alone; a header name or value that could not go on the wire as is fails the answer. An
`immediate_response` answers the client (status 200 when unset or below 200).
Every answer is applied only once the stream succeeded, so a failing processor leaves the
request untouched.

The processor is node-level, as APISIX's runner socket is: `EXT_PROC_ADDRESS`
(`env.config.ext_proc_address`), and the call's deadline is `GRPC_DEADLINE_SECS`. One gRPC
channel per worker and address, created in the running loop on first use; `close()` at
shutdown closes them (and post-resp's HTTP client session).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp
import grpc
from envoy.config.core.v3 import base_pb2
from envoy.extensions.filters.http.ext_proc.v3 import processing_mode_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as ext_proc
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as ext_proc_grpc
from google.protobuf import struct_pb2

from gateways.edge.plugin import PluginEnv, Reply, RequestContext

log = logging.getLogger(__name__)


UNAVAILABLE = {"error_msg": "503 Service Temporarily Unavailable"}
ATTRIBUTES_KEY = "envoy.filters.http.ext_proc"
BUFFERED = processing_mode_pb2.ProcessingMode.BUFFERED
NONE = processing_mode_pb2.ProcessingMode.NONE
CONTINUE_AND_REPLACE = ext_proc.CommonResponse.CONTINUE_AND_REPLACE
PROTOCOL = ext_proc.ProtocolConfiguration(request_body_mode=BUFFERED, response_body_mode=BUFFERED)
Option = base_pb2.HeaderValueOption
NOT_SETTABLE = frozenset({"host", ":authority", ":scheme", ":method"})
FRAMING = frozenset({"content-length", "transfer-encoding"})
HEADER_NAME = re.compile(r":?[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 token, or a pseudo header
BAD_VALUE = re.compile(r"[\r\n\0]")

# Per worker: a channel is bound to the loop it was made in (tests run several loops).
_channels: dict[tuple[asyncio.AbstractEventLoop, str], grpc.aio.Channel] = {}
_sessions: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession] = {}


class ProcessorError(Exception):
    """The processor broke the protocol (closed early, answered the wrong message)."""


@dataclass(frozen=True, slots=True)
class ExtProcConf:
    """Both ext-plugin plugins' configuration (they share `SCHEMA`)."""

    allow_degradation: bool
    conf: list[Mapping[str, str]] | None = None  # the entries sent to the processor


def metadata(plugin: str, entries: list[Mapping[str, str]] | None) -> Any:
    """The `metadata_context` carrying the plugin's conf entries (None without any)."""
    if not entries:
        return None
    fields = struct_pb2.Struct()
    fields.update({"conf": [{"name": e["name"], "value": e["value"]} for e in entries]})
    context = base_pb2.Metadata()
    context.filter_metadata[plugin].CopyFrom(fields)
    return context


def address(env: PluginEnv) -> str | None:
    return getattr(env.config, "ext_proc_address", None) or None


def deadline(env: PluginEnv) -> float:
    return float(getattr(env.config, "grpc_deadline_secs", 5.0))


def upstream_path(ctx: RequestContext) -> str:
    """The path and query sent upstream (what `:path` shows the processor)."""
    if ctx.upstream_uri:
        return ctx.upstream_uri
    path = quote(ctx.path, safe="/:@!$&'()*+,;=-._~")
    return f"{path}?{ctx.query}" if ctx.query else path


def attributes(ctx: RequestContext, status: int | None = None) -> dict[str, Any]:
    values: dict[str, str | int] = {
        "request.method": ctx.method,
        "request.path": upstream_path(ctx),
        "request.host": ctx.host,
        "request.scheme": ctx.scheme,
        "request.id": ctx.request_id,
        "source.address": ctx.client_ip,
        "xds.route_name": ctx.route_id,
    }
    if status is not None:
        values["response.code"] = status
    fields = struct_pb2.Struct()
    fields.update(values)
    return {ATTRIBUTES_KEY: fields}


def header_map(pairs: Iterable[tuple[str, str]]) -> Any:
    return base_pb2.HeaderMap(
        headers=[base_pb2.HeaderValue(key=k, raw_value=v.encode("latin-1")) for k, v in pairs]
    )


def _value(header: Any) -> str:
    raw: bytes = header.raw_value
    return raw.decode("latin-1") if raw else str(header.value)


def _check(mutation: Any) -> None:
    """As Envoy: a header that could not go on the wire as is fails the processor's answer."""
    names = [option.header.key for option in mutation.set_headers]
    for name in [*names, *mutation.remove_headers]:
        if not HEADER_NAME.fullmatch(name):
            raise ProcessorError(f"invalid header name {name!r} in the processor's answer")
    for option in mutation.set_headers:
        if BAD_VALUE.search(_value(option.header)):
            raise ProcessorError(f"invalid value of {option.header.key} in the processor's answer")


class Stream:
    """One Process stream: `ask` sends a message and returns its answer, which must be the
    answer to that message or an `immediate_response`."""

    def __init__(self, target: str, timeout: float) -> None:
        key = (asyncio.get_running_loop(), target)
        channel = _channels.get(key)
        if channel is None:
            channel = _channels[key] = grpc.aio.insecure_channel(target)
        stub = ext_proc_grpc.ExternalProcessorStub(channel)
        self.call = stub.Process(timeout=timeout)

    async def ask(self, request: Any, expect: str) -> Any:
        await self.call.write(request)
        answer = await self.call.read()
        if answer is grpc.aio.EOF:
            raise ProcessorError("the processor closed the stream before answering")
        kind = answer.WhichOneof("response")
        if kind not in (expect, "immediate_response"):
            raise ProcessorError(f"the processor answered {kind} to {expect}")
        if kind == "immediate_response":
            _check(answer.immediate_response.headers)
        else:
            _check(getattr(answer, kind).response.header_mutation)
        return answer

    async def __aenter__(self) -> Stream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if exc[0] is None:
            await self.call.done_writing()
        self.call.cancel()


async def exchange(
    env: PluginEnv, first: Any, headers_kind: str, body: bytes | None, body_kind: str
) -> list[Any]:
    """Send the headers message `first` (its kind `headers_kind`), then `body` as `body_kind`
    unless the answer skips or replaces it; the answers, in order. Raises grpc.RpcError
    (unreachable, deadline) or ProcessorError."""
    target = address(env)
    if target is None:
        raise ProcessorError("EXT_PROC_ADDRESS is not configured")
    async with Stream(target, deadline(env)) as stream:
        answer = await stream.ask(first, headers_kind)
        answers = [answer]
        if body is None or answer.WhichOneof("response") == "immediate_response":
            return answers
        common = getattr(answer, headers_kind).response
        mode = answer.mode_override if answer.HasField("mode_override") else None
        skipped = mode is not None and getattr(mode, f"{body_kind}_mode") == NONE
        if common.status == CONTINUE_AND_REPLACE or skipped:
            return answers
        message = ext_proc.HttpBody(body=body, end_of_stream=True)
        answers.append(
            await stream.ask(ext_proc.ProcessingRequest(**{body_kind: message}), body_kind)
        )
        return answers


def mutate(
    mutation: Any,
    get: Callable[[str], str | None],
    put: Callable[[str, str | None], None],
) -> None:
    """Apply a HeaderMutation through `get` (the current value) and `put` (None removes)."""
    for name in mutation.remove_headers:
        name = name.lower()
        if not name.startswith(":") and name != "host" and name not in FRAMING:
            put(name, None)
    for option in mutation.set_headers:
        name = option.header.key.lower()
        if name in NOT_SETTABLE or name in FRAMING or not name:
            continue
        value = _value(option.header)
        current = get(name)
        action = option.append_action
        if action == Option.ADD_IF_ABSENT:
            if current is None:
                put(name, value)
        elif action == Option.OVERWRITE_IF_EXISTS:
            if current is not None:
                put(name, value)
        elif action == Option.OVERWRITE_IF_EXISTS_OR_ADD:
            put(name, value)
        elif option.HasField("append") and option.append.value and current is not None:
            put(name, f"{current}, {value}")  # APPEND_IF_EXISTS_OR_ADD with append: true
        else:  # Envoy's ext_proc default: `append` false, overwrite
            put(name, value)


def body_of(common: Any, current: bytes) -> bytes:
    """`current` after the answer's body mutation."""
    mutation = common.body_mutation
    which = mutation.WhichOneof("mutation")
    if which == "body":
        return bytes(mutation.body)
    if which == "clear_body" and mutation.clear_body:
        return b""
    return current


def immediate(answer: Any) -> Reply:
    response = answer.immediate_response
    status = response.status.code if response.status.code >= 200 else 200
    headers: dict[str, str] = {}

    def put(name: str, value: str | None) -> None:
        if value is None:
            headers.pop(name, None)
        elif not name.startswith(":"):  # pseudo headers are no response headers
            headers[name] = value

    mutate(response.headers, headers.get, put)
    return Reply(status, bytes(response.body), headers)


def unavailable(
    plugin: str, ctx: RequestContext, degrade: bool, cause: BaseException | str
) -> Reply | None:
    """A processor failure: 503, or nothing (the request goes on untouched) with
    `allow_degradation`."""
    log.error(
        "external processor failed",
        extra={"plugin": plugin, "route_id": ctx.route_id, "error": str(cause) or repr(cause)},
    )
    return None if degrade else Reply(503, UNAVAILABLE)


def http_session() -> aiohttp.ClientSession:
    """The worker's HTTP client for ext-plugin-post-resp's upstream calls: bodies as received
    (no decompression), no cookie jar (cookies belong to each client), no default headers."""
    loop = asyncio.get_running_loop()
    session = _sessions.get(loop)
    if session is None or session.closed:
        session = _sessions[loop] = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0),
            auto_decompress=False,
            cookie_jar=aiohttp.DummyCookieJar(),
            skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
        )
    return session


async def close() -> None:
    """Close the running loop's channels and HTTP session (the worker's, at shutdown)."""
    loop = asyncio.get_running_loop()
    for key in [key for key in _channels if key[0] is loop]:
        await _channels.pop(key).close()
    session = _sessions.pop(loop, None)
    if session is not None:
        await session.close()
