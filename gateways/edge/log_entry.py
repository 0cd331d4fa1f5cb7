"""What the logger plugins (http-logger, tcp-logger, udp-logger) log, as APISIX's log-util
builds it, and `LoggerPlugin`, the phases they share.

The default entry, APISIX's shape:

    request {url, uri, method, headers, querystring, size[, body]}
    response {status, headers, size[, body]}
    upstream, client_ip, start_time (ms since the epoch), latency, upstream_latency,
    apisix_latency (ms), route_id, service_id, consumer {username}, server {hostname, version}

Absent values are left out (Lua's nil). Deliberate differences from APISIX:
- credentials are redacted: the request headers `Authorization`, `Proxy-Authorization`,
  `Cookie`, `apikey`, `X-API-Key` (and the other secret names of `runtime.logs`), the
  response's `Set-Cookie`, and the query arguments of those names (key-auth's `apikey`,
  jwt-auth's `jwt`) in `uri`, `url` and `querystring` become "[REDACTED]". A header a plugin
  was configured to read a credential from under another name is not known here. A
  `log_format` that names `$http_authorization` gets what it asked for.
- `request.size` and `response.size` (nginx's `$request_length`, `$bytes_sent`) are the body
  bytes plus the head as its header lines add up, not the bytes on the wire.
- `upstream_latency` is the time to the upstream's response head.

`log_format` (`{"field": "$var", "nested": {...}}`, five levels at most, deeper objects are
left out) replaces the default entry; `route_id` and `service_id` are always added, as APISIX
does. A value that is one `$var` keeps the variable's type; a string with `$var` references
inside is interpolated (APISIX keeps such strings as they are); other values are constants.
Variables are `gateways.edge.variables`' plus the log-time ones of `LOG_VARIABLES`
(`$time_iso8601`, `$request_time`, `$status`...). `log_format_extra` adds fields to the
default entry instead (ignored with `log_format`).

Bodies: with `include_req_body` (and `include_req_body_expr` true, evaluated before the
request goes upstream and again at log time), the request body is read whole in
`before_proxy` (within the edge's MAX_BODY_BYTES; APISIX buffers it in nginx likewise) and the
first `max_req_body_bytes` are logged as `request.body`; with `include_resp_body` (and
`include_resp_body_expr`, evaluated at the first response chunk) the first
`max_resp_body_bytes` of the response are kept as `response.body`. A logger that includes
neither does not take part in those phases, so responses keep their Content-Length.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote_plus

from gateways.edge.batch import BatchProcessor
from gateways.edge.plugin import Plugin, PluginEnv, Reply, RequestContext
from gateways.edge.variables import TEMPLATE_VAR, Condition, compile_vars, interpolate, variable
from runtime.config import VERSION
from runtime.logs import SECRET_KEYS

REDACTED = "[REDACTED]"
CREDENTIALS = SECRET_KEYS | {"proxy-authorization", "apikey", "set-cookie", "jwt"}
MAX_FORMAT_DEPTH = 5
SERVER = {"hostname": socket.gethostname(), "version": VERSION}

Render = Callable[[RequestContext], Any]


# ---- sizes and times -----------------------------------------------------------------------


def request_body_size(ctx: RequestContext) -> int:
    if ctx.bytes_received:
        return ctx.bytes_received
    if ctx.body is not None and not ctx.body_replaced:
        return len(ctx.body)
    length = ctx.headers.get("content-length", "")
    return int(length) if length.isdigit() else 0


def request_length(ctx: RequestContext) -> int:
    """nginx's $request_length: request line, header lines and body."""
    line = len(ctx.method) + len(ctx.path) + (len(ctx.query) + 1 if ctx.query else 0) + 12
    head = sum(len(name) + len(value) + 4 for name, value in ctx.headers.items()) + 2
    return line + head + request_body_size(ctx)


def bytes_sent(ctx: RequestContext) -> int:
    """nginx's $bytes_sent: status line, header lines and body."""
    try:
        phrase = HTTPStatus(ctx.status).phrase
    except ValueError:
        phrase = ""
    head = sum(len(name) + len(value) + 4 for name, value in ctx.response_headers.items())
    return 15 + len(phrase) + head + 2 + ctx.bytes_sent


def elapsed(ctx: RequestContext) -> float:
    """Seconds since the request's first byte."""
    return time.perf_counter() - ctx.started


def _body_text(body: bytes | bytearray | None, limit: int) -> str | None:
    return None if body is None else bytes(body[:limit]).decode("utf-8", "replace")


# Variables that only have a value once the response is done (nginx's), for log_format.
LOG_VARIABLES: dict[str, Render] = {
    "time_iso8601": lambda ctx: datetime.now().astimezone().isoformat(timespec="seconds"),
    "time_local": lambda ctx: datetime.now().astimezone().strftime("%d/%b/%Y:%H:%M:%S %z"),
    "msec": lambda ctx: f"{time.time():.3f}",
    "request_time": lambda ctx: f"{elapsed(ctx):.3f}",
    "upstream_response_time": lambda ctx: (
        f"{ctx.upstream_latency:.3f}" if ctx.vars.get("upstream_addr") else None
    ),
    "request_length": request_length,
    "bytes_sent": bytes_sent,
    "body_bytes_sent": lambda ctx: ctx.bytes_sent,
    "hostname": lambda ctx: SERVER["hostname"],
    "request_body": lambda ctx: _body_text(ctx.body, len(ctx.body or b"")),
}


# ---- credentials ---------------------------------------------------------------------------


def redacted_headers(headers: Mapping[str, str]) -> dict[str, str]:
    return {k: REDACTED if k.lower() in CREDENTIALS else v for k, v in headers.items()}


def redacted_query(query: str) -> str:
    """The raw query string with the values of credential arguments replaced."""
    if not query:
        return query
    parts = query.split("&")
    for i, part in enumerate(parts):
        key = part.partition("=")[0]
        if unquote_plus(key).lower() in CREDENTIALS:
            parts[i] = f"{key}={REDACTED}"
    return "&".join(parts)


def query_args(query: str) -> dict[str, Any]:
    """ngx.req.get_uri_args(): a value per argument, a list when repeated, true without `=`."""
    args: dict[str, Any] = {}
    for part in query.split("&"):
        if not part:
            continue
        raw_key, eq, raw_value = part.partition("=")
        key = unquote_plus(raw_key)
        value: Any = unquote_plus(raw_value) if eq else True
        if key.lower() in CREDENTIALS:
            value = REDACTED
        if key in args:
            held = args[key]
            args[key] = [*held, value] if isinstance(held, list) else [held, value]
        else:
            args[key] = value
    return args


# ---- entries -------------------------------------------------------------------------------


def full_entry(ctx: RequestContext) -> dict[str, Any]:
    """APISIX's default log entry of the request (get_full_log)."""
    latency = elapsed(ctx) * 1000
    upstream = ctx.vars.get("upstream_addr")
    upstream_latency = ctx.upstream_latency * 1000 if upstream else None
    query = redacted_query(ctx.query)
    uri = ctx.path + ("?" + query if query else "")
    entry: dict[str, Any] = {
        "request": {
            "url": f"{ctx.scheme}://{ctx.host}{uri}",
            "uri": uri,
            "method": ctx.method,
            "headers": redacted_headers(ctx.headers),
            "querystring": query_args(ctx.query),
            "size": request_length(ctx),
        },
        "response": {
            "status": ctx.status,
            "headers": redacted_headers(ctx.response_headers),
            "size": bytes_sent(ctx),
        },
        "server": dict(SERVER),
        "service_id": ctx.service_id or "",
        "route_id": ctx.route_id,
        "client_ip": ctx.client_ip,
        "start_time": round(time.time() * 1000 - latency),
        "latency": latency,
        "apisix_latency": max(latency - (upstream_latency or 0.0), 0.0),
    }
    if upstream:
        entry["upstream"] = upstream
        entry["upstream_latency"] = upstream_latency
    if ctx.consumer is not None:
        entry["consumer"] = {"username": ctx.consumer_name or ctx.consumer.get("username")}
    return entry


def compile_format(fmt: Mapping[str, Any]) -> Callable[[RequestContext], dict[str, Any]]:
    """A `log_format` object → the function building the entry of a request (compiled once)."""
    names: set[str] = set()
    fields = _fields(fmt, 1, names)
    late = [(name, LOG_VARIABLES[name]) for name in sorted(names) if name in LOG_VARIABLES]

    def render(ctx: RequestContext) -> dict[str, Any]:
        for name, compute in late:  # in ctx.vars, where `variable` and `interpolate` look
            ctx.vars[name] = compute(ctx)
        return _render(fields, ctx)

    return render


def _fields(fmt: Mapping[str, Any], depth: int, names: set[str]) -> list[tuple[str, Any]]:
    fields: list[tuple[str, Any]] = []
    for key, value in fmt.items():
        if isinstance(value, Mapping):
            if depth < MAX_FORMAT_DEPTH:
                fields.append((key, _fields(value, depth + 1, names)))
        elif isinstance(value, str) and TEMPLATE_VAR.search(value):
            refs = [m.group(1) or m.group(2) for m in TEMPLATE_VAR.finditer(value)]
            names.update(refs)
            if TEMPLATE_VAR.fullmatch(value):
                fields.append((key, _variable(refs[0])))
            else:
                fields.append((key, interpolate(value)))
        else:
            fields.append((key, _constant(value)))
    return fields


def _variable(name: str) -> Render:
    return lambda ctx: variable(ctx, name)


def _constant(value: Any) -> Render:
    return lambda ctx: value


def _render(fields: list[tuple[str, Any]], ctx: RequestContext) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, field in fields:
        value = _render(field, ctx) if isinstance(field, list) else field(ctx)
        if value is not None:
            out[key] = value
    return out


def encode(entry: Any) -> bytes:
    """One entry as compact JSON, as APISIX's cjson writes it."""
    return json.dumps(entry, separators=(",", ":"), ensure_ascii=False, default=str).encode()


def as_batch(entries: list[bytes], batch_max_size: int) -> bytes:
    """Encoded entries as APISIX sends a batch: a JSON array (the lone object when
    `batch_max_size` is 1)."""
    return entries[0] if batch_max_size == 1 else b"[" + b",".join(entries) + b"]"


# ---- the plugins ---------------------------------------------------------------------------


class LoggerPlugin(Plugin):
    """A logger: builds each request's entry in the log phase and hands it to its batch
    processor, whose batches go to `send` (the subclass's transport)."""

    def __init__(self, conf: Any, env: PluginEnv) -> None:
        super().__init__(conf, env)
        log_format = conf.get("log_format")
        extra = conf.get("log_format_extra")
        self.log_format = compile_format(log_format) if log_format else None
        self.log_format_extra = compile_format(extra) if extra and not log_format else None
        self.include_req_body: bool = conf.get("include_req_body", False)
        self.include_resp_body: bool = conf.get("include_resp_body", False)
        self.req_body_when = _condition(conf.get("include_req_body_expr"))
        self.resp_body_when = _condition(conf.get("include_resp_body_expr"))
        self.max_req_body: int = conf.get("max_req_body_bytes", 512 * 1024)
        self.max_resp_body: int = conf.get("max_resp_body_bytes", 512 * 1024)
        self.resp_body_key = f"{self.name}.response_body"  # one instance of a name per chain
        self.batch = BatchProcessor(conf, self.send)

    async def send(self, entries: list[Any], batch_max_size: int) -> None:
        raise NotImplementedError

    def active_phases(self) -> frozenset[str]:
        # Without body logging, no body phases: the response keeps its Content-Length.
        unused = set()
        if not self.include_req_body:
            unused.add("before_proxy")
        if not self.include_resp_body:
            unused.add("body_filter")
        return self.phases() - unused

    async def before_proxy(self, ctx: RequestContext) -> Reply | None:
        if self.include_req_body and (self.req_body_when is None or self.req_body_when(ctx)):
            await ctx.read_body()  # kept in ctx.body, and sent upstream from there
        return None

    def body_filter(self, ctx: RequestContext, chunk: bytes, eof: bool) -> bytes:
        if not self.include_resp_body:
            return chunk
        held = ctx.vars.get(self.resp_body_key)
        if held is None:  # the first chunk decides, as APISIX evaluates the expression once
            wanted = self.resp_body_when is None or self.resp_body_when(ctx)
            held = ctx.vars[self.resp_body_key] = bytearray() if wanted else False
        if isinstance(held, bytearray) and len(held) < self.max_resp_body:
            held += chunk[: self.max_resp_body - len(held)]
        return chunk

    def log(self, ctx: RequestContext) -> None:
        # Encoded now, one entry at a time: a batch of 1000 encoded at once would hold the
        # event loop for tens of milliseconds.
        self.batch.push(encode(self.entry(ctx)))

    def entry(self, ctx: RequestContext) -> dict[str, Any]:
        if self.log_format is not None:
            entry = self.log_format(ctx)
            entry["route_id"] = ctx.route_id
            entry["service_id"] = ctx.service_id or ""
            return entry
        entry = full_entry(ctx)
        if self.log_format_extra is not None:
            entry.update(self.log_format_extra(ctx))
        if (
            self.include_req_body
            and ctx.body is not None
            and (self.req_body_when is None or self.req_body_when(ctx))
        ):
            entry["request"]["body"] = _body_text(ctx.body, self.max_req_body)
        held = ctx.vars.get(self.resp_body_key)
        if isinstance(held, bytearray):
            entry["response"]["body"] = _body_text(held, self.max_resp_body)
        return entry


def _condition(expr: Any) -> Condition | None:
    return compile_vars(expr) if expr else None
