"""`response-rewrite` (APISIX priority 899, header_filter + body_filter): rewrites the status,
headers and body of a response, the upstream's or one a plugin answered (a 401 from key-auth,
a 429 from a limiter).

- `vars` (lua-resty-expr) is evaluated when the response head is known, so response variables
  work: `status`, `upstream_http_<name>` / `sent_http_<name>`; when it does not hold, nothing
  is rewritten.
- `status_code` replaces the status. `headers` runs `add` (appended to a header already there,
  joined with ", "), then `set` (an empty value removes the header, as nginx does), then
  `remove`; the legacy flat map `{"Name": value}` is a `set`. Values may use `$var`/`${var}`
  (e.g. `$balancer_ip:$balancer_port`, `$remote_addr`).
- `body` (with `body_base64`, decoded once here) replaces the body; `filters` substitute
  regexes in it (`scope` once|global, `options` are ngx.re's PCRE flags: `i`, `m`, `s`, `x`,
  `u`/`U` (match UTF-8 text rather than bytes), `a` (anchored at the start); `j`, `o`, `d`, `D`,
  `J` change nothing here; the replacement's `$0`, `$1`, `${1}`, `$$` are ngx.re.sub's). Either
  drops `Content-Length`, `Content-Encoding`, `Last-Modified` and `ETag`, as APISIX does; the
  rewritten body is sent chunked.
- `filters` buffer the body up to `max_resp_body_size` bytes (64 MiB). A longer response is cut
  there, as APISIX does since 3.17 (PR #13705, `hold_body_chunk` with a limit): the first
  `max_resp_body_size` bytes are filtered and sent, the rest is dropped.

Differences: regexes are Python's `re`, not PCRE (the same for the common syntax; PCRE-only
constructs such as `(?<name>...)` are refused by the Admin API with the compiler's message). A
header added where the response already has it is joined into one line, also `Set-Cookie`.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gateways.edge.model.plugins import response_rewrite as declared
from gateways.edge.model.plugins.response_rewrite import Substitution, is_operations
from gateways.edge.plugin import Plugin, PluginEnv, RequestContext, parse_conf
from gateways.edge.variables import compile_vars, interpolate

ADD_ENTRY = re.compile(r"^([^:\s]+)\s*:\s*([^:]+)$")  # APISIX's parse of "Name: value"
BODY_HEADERS = ("content-length", "content-encoding", "last-modified", "etag")

Template = Callable[[RequestContext], str]


class Buffer:
    """One response's state: the body held back for `filters`, and whether it was sent."""

    __slots__ = ("chunks", "done", "size")

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.size = 0
        self.done = False


def _value(value: Any) -> Template:
    return interpolate(value if isinstance(value, str) else str(value))


def _find(headers: dict[str, str], lower: str) -> list[str]:
    """The keys of `headers` naming `lower` (plugins may have written any case)."""
    return [key for key in headers if key.lower() == lower]


@dataclass(frozen=True, slots=True)
class ResponseRewriteConf:
    body_base64: bool
    max_resp_body_size: int
    headers: dict[str, Any] | None = None  # {add, set, remove} or the legacy flat map
    body: str | None = None
    status_code: int | None = None
    vars: list[Any] | None = None
    filters: list[dict[str, Any]] | None = None  # each compiled by `Substitution`


class ResponseRewrite(declared.ResponseRewrite, Plugin):
    """Rewrites the status, headers and body of the upstream's or a plugin's response."""

    def __init__(self, conf: Mapping[str, Any], env: PluginEnv) -> None:
        super().__init__(conf, env)  # (`check_conf` has passed: chain.plugin_conf)
        self.key = f"{self.name}#{id(self)}"  # this instance's state in ctx.vars
        settings = parse_conf(ResponseRewriteConf, self.schema, conf)
        self.condition = compile_vars(settings.vars) if settings.vars else None
        self.status = settings.status_code
        body = settings.body
        self.body: bytes | None = None
        if body is not None:
            self.body = base64.b64decode(body) if settings.body_base64 else body.encode()
        self.filters = [Substitution(entry) for entry in settings.filters or ()]
        self.max_size = int(settings.max_resp_body_size)
        self.rewrites_body = self.body is not None or bool(self.filters)
        self.add: list[tuple[str, Template]] = []
        self.set: list[tuple[str, Template]] = []
        self.remove: list[str] = []
        headers = settings.headers or {}
        if is_operations(headers):
            for line in headers.get("add") or ():
                found = ADD_ENTRY.match(line)
                if found:  # (APISIX logs and skips what its own parse refuses)
                    self.add.append((found.group(1), _value(found.group(2))))
            self.set = [(name, _value(value)) for name, value in (headers.get("set") or {}).items()]
            self.remove = [name.lower() for name in headers.get("remove") or ()]
        else:
            self.set = [(name, _value(value)) for name, value in headers.items()]

    def active_phases(self) -> frozenset[str]:
        # Headers or status only: no body phase, so the response keeps its Content-Length.
        return self.phases() if self.rewrites_body else self.phases() - {"body_filter"}

    def header_filter(self, ctx: RequestContext) -> None:
        if self.condition is not None and not self.condition(ctx):
            return
        if self.rewrites_body:
            ctx.vars[self.key] = Buffer()
        if self.status is not None:
            ctx.status = self.status
        headers = ctx.response_headers
        if self.rewrites_body:
            for name in BODY_HEADERS:
                for key in _find(headers, name):
                    del headers[key]
        for name, value in self.add:
            keys = _find(headers, name.lower())
            text = value(ctx)
            if keys:
                headers[keys[0]] = f"{headers[keys[0]]}, {text}"
            else:
                headers[name] = text
        for name, value in self.set:
            text = value(ctx)
            for key in _find(headers, name.lower()):
                del headers[key]
            if text != "":
                headers[name] = text
        for name in self.remove:
            for key in _find(headers, name):
                del headers[key]

    def body_filter(self, ctx: RequestContext, chunk: bytes, eof: bool) -> bytes:
        buffer: Buffer | None = ctx.vars.get(self.key)
        if buffer is None:
            return chunk  # not rewritten (no body change, or `vars` did not hold)
        if buffer.done:
            return b""  # the new body was sent: what follows is dropped
        if self.body is not None:
            buffer.done = True
            return self.body
        if chunk:
            buffer.chunks.append(chunk)
            buffer.size += len(chunk)
        if buffer.size >= self.max_size:
            body = b"".join(buffer.chunks)[: self.max_size]  # APISIX truncates
        elif eof:
            body = b"".join(buffer.chunks)
        else:
            return b""
        buffer.done = True
        buffer.chunks = []
        for substitution in self.filters:
            body = substitution.apply(body)
        return body
