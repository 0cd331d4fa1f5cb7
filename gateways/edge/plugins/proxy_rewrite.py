"""`proxy-rewrite` (APISIX priority 1008, rewrite): changes the request sent upstream (through
`ctx.upstream_uri`, `ctx.upstream_headers`, `ctx.method`); the client's request as the other
plugins see it (`$uri`, `$host`, headers) is left alone.

- `uri`: the new path, with `$var` / `${var}` request variables. A variable's value never adds
  a query ("?" in it is escaped); a literal "?" in the template starts one. The path is
  escaped as nginx's `ngx.escape_uri`; the request's query is appended (`&` after a template's
  own query).
- `regex_uri` `[regex, template, regex, template, ...]`: the first regex that matches the
  request path (`$uri`) has its first match replaced by its template (`$1`, `${1}`, `$0`); no
  match keeps the path. `uri` wins over `regex_uri`.
- `use_real_request_uri_unsafe`: start from the request target exactly as received (path and
  query, not normalized) and send the result without escaping nor appending the query.
- `host`: the `Host` sent upstream (when the upstream's `pass_host` is `pass`, the default;
  `node` and `rewrite` upstreams send their own, as APISIX does).
- `method`: the method sent upstream.
- `headers`: `{add, set, remove}` run in that order, or the legacy flat map (= `set`). Values
  are strings or numbers (or arrays of them), with `$var` variables and `$1` / `${1}` for the
  `regex_uri` captures; `set` to "" removes the header, as nginx does.

Differences from APISIX: `add` to a header the request already has (or an array value) joins
the values with ", " into one header, since the proxy sends each header name once (equivalent
for list-valued headers, RFC 9110 §5.3, but not for `Set-Cookie`-like ones); the proxy's own
`X-Forwarded-*` and `X-Real-IP` are not changed by `headers`. Regexes are Python's `re`
(PCRE's `(?<name>...)` is `(?P<name>...)` here).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateways.edge.model.plugins import proxy_rewrite as declared
from gateways.edge.model.plugins.substitutions import (
    escape_lax,
    escape_uri,
    header_safe,
    substitutions,
)
from gateways.edge.plugin import Plugin, PluginEnv, Reply, RequestContext, parse_conf
from gateways.edge.variables import interpolate

CAPTURE = re.compile(r"\$(\d+)|\$\{(\d+)\}")

Render = Callable[[RequestContext, "re.Match[str] | None"], str]


def compile_value(value: Any) -> Render:
    """A header value (string, number or array) → its value for a request, variables and
    `regex_uri` captures resolved."""
    if isinstance(value, list):
        items = [compile_value(item) for item in value]
        return lambda ctx, found: ", ".join(item(ctx, found) for item in items)
    text = value if isinstance(value, str) else str(value)
    if "$" not in text:
        return lambda ctx, found: text
    pieces: list[int | Callable[[RequestContext], str]] = []
    last = 0
    for capture in CAPTURE.finditer(text):
        pieces.append(interpolate(text[last : capture.start()]))
        pieces.append(int(capture.group(1) or capture.group(2)))
        last = capture.end()
    pieces.append(interpolate(text[last:]))

    def render(ctx: RequestContext, found: re.Match[str] | None) -> str:
        out = []
        for piece in pieces:
            if isinstance(piece, int):
                group = found.group(piece) if found and piece <= found.re.groups else None
                out.append(group or "")
            else:
                out.append(piece(ctx))
        return header_safe("".join(out))

    return render


@dataclass(frozen=True, slots=True)
class ProxyRewriteConf:
    use_real_request_uri_unsafe: bool
    uri: str | None = None
    method: str | None = None
    regex_uri: list[str] | None = None
    host: str | None = None
    headers: dict[str, Any] | None = None  # {add, set, remove} or the legacy flat map


class ProxyRewrite(declared.ProxyRewrite, Plugin):
    """Rewrites the request sent upstream: URI (template or regex), host, method, headers."""

    def __init__(self, conf: Any, env: PluginEnv) -> None:
        super().__init__(conf, env)
        settings = parse_conf(ProxyRewriteConf, self.schema, conf)
        self.unsafe = settings.use_real_request_uri_unsafe
        self.uri_path: Callable[[RequestContext], str] | None = None
        self.uri_query: Callable[[RequestContext], str] | None = None
        if settings.uri is not None:
            # split the template, not its result: a variable's "?" must not start a query
            path, mark, query = settings.uri.partition("?")
            self.uri_path = interpolate(path)
            self.uri_query = interpolate(query) if mark else None
        self.substitutions = substitutions(settings.regex_uri or [])
        self.host = settings.host
        self.method = settings.method
        headers = settings.headers or {}
        if not any(isinstance(headers.get(verb), dict | list) for verb in ("add", "set", "remove")):
            headers = {"set": headers}  # the legacy flat map: headers to set
        self.add = [(k.lower(), compile_value(v)) for k, v in headers.get("add", {}).items()]
        self.remove = [name.lower() for name in headers.get("remove", [])]
        self.set = [(k.lower(), compile_value(v)) for k, v in headers.get("set", {}).items()]

    async def rewrite(self, ctx: RequestContext) -> Reply | None:
        found = self._rewrite_uri(ctx)
        changes = ctx.upstream_headers
        for name, render in self.add:
            value = render(ctx, found)
            current = changes[name] if name in changes else ctx.headers.get(name)
            changes[name] = f"{current}, {value}" if current else value
        for name in self.remove:
            changes[name] = None
        for name, render in self.set:
            changes[name] = render(ctx, found) or None  # "" removes, as in nginx
        if self.host:
            changes["host"] = self.host
        if self.method:
            ctx.method = self.method
        return None

    def _rewrite_uri(self, ctx: RequestContext) -> re.Match[str] | None:
        """Sets `ctx.upstream_uri`; returns the `regex_uri` match (for `$1` in headers)."""
        query = f"?{ctx.query}" if ctx.query else ""
        real = (ctx.real_request_uri or ctx.path + query) if self.unsafe else ""
        if self.uri_path is not None:
            path = self.uri_path(ctx)
            own = None if self.uri_query is None else self.uri_query(ctx)
            if self.unsafe:
                ctx.upstream_uri = escape_lax(path.replace("?", "%3F")) + (
                    "" if own is None else "?" + escape_lax(own)
                )
            else:
                uri = escape_uri(path) + ("" if own is None else "?" + escape_lax(own))
                ctx.upstream_uri = uri + _args(ctx, own is not None)
            return None
        subject = real if self.unsafe else ctx.path
        for substitution in self.substitutions:
            rewritten, found = substitution.apply(subject)
            if found is None:
                continue
            if self.unsafe:
                ctx.upstream_uri = escape_lax(rewritten)
            elif "?" in ctx.path:  # a decoded %3F: the whole result is a path
                ctx.upstream_uri = escape_uri(rewritten) + _args(ctx, False)
            else:  # a "?" from the template starts a query
                path, mark, own = rewritten.partition("?")
                uri = escape_uri(path) + mark + escape_lax(own)
                ctx.upstream_uri = uri + _args(ctx, bool(mark))
            return found
        if self.unsafe:
            ctx.upstream_uri = real
        return None


def _args(ctx: RequestContext, has_query: bool) -> str:
    """The request's query, appended to a rewritten URI."""
    if not ctx.query:
        return ""
    return ("&" if has_query else "?") + ctx.query
