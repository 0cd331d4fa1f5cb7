"""`redirect` (APISIX priority 900, rewrite): answers with a redirect (`Location`) instead of
calling the upstream. Exactly one of:

- `uri`: the target, with `$var` / `${var}` request variables (`$uri`, `$host`, `$arg_x`...);
- `regex_uri` `[regex, template]`: the request path (`$uri`) with the regex's first match
  replaced by the template (`$1`, `${1}`, `$0`; nginx's `ngx.re.sub`); a path that does not
  match is not redirected;
- `http_to_https: true`: a plain-HTTP request (the scheme from `X-Forwarded-Proto`, else the
  connection) goes to `https://$host$request_uri` with 301 for GET and HEAD, 308 otherwise
  (which keeps the method and body); an HTTPS request is not redirected.

`ret_code` (302) is the status for `uri` and `regex_uri`. `encode_uri` escapes the target's
path as nginx does; `append_query_string` appends the request's query (not with
`http_to_https`, which keeps it anyway). Control characters coming from request variables are
percent-encoded in `Location`.

Difference from APISIX: the https port comes from no local TLS listener (this edge terminates
no TLS; APISIX uses `plugin_attr.redirect.https_port` or its `ssl.listen` port), so the target
has no port: 443.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateways.edge.model.plugins import redirect as declared
from gateways.edge.model.plugins.substitutions import Substitution, escape_uri, header_safe
from gateways.edge.plugin import Plugin, PluginEnv, Reply, RequestContext, parse_conf
from gateways.edge.variables import interpolate, variable


@dataclass(frozen=True, slots=True)
class RedirectConf:
    ret_code: int
    encode_uri: bool
    append_query_string: bool
    uri: str | None = None
    regex_uri: list[str] | None = None
    http_to_https: bool = False


class Redirect(declared.Redirect, Plugin):
    """Answers with a redirect: a fixed or templated URI, a regex rewrite of the path, or
    HTTP to HTTPS."""

    def __init__(self, conf: Any, env: PluginEnv) -> None:
        super().__init__(conf, env)
        settings = parse_conf(RedirectConf, self.schema, conf)
        self.ret_code = settings.ret_code
        self.to_https = settings.http_to_https
        self.uri = interpolate(settings.uri) if settings.uri is not None else None
        regex_uri = settings.regex_uri
        self.substitution = Substitution(regex_uri[0], regex_uri[1]) if regex_uri else None
        self.encode = settings.encode_uri
        self.append_query = settings.append_query_string

    async def rewrite(self, ctx: RequestContext) -> Reply | None:
        status = self.ret_code
        if self.to_https:
            if (ctx.headers.get("x-forwarded-proto") or ctx.scheme) != "http":
                return None
            target = f"https://{variable(ctx, 'host')}{request_uri(ctx)}"
            status = 301 if ctx.method in ("GET", "HEAD") else 308
        elif self.uri is not None:
            target = self.uri(ctx)
        elif self.substitution is not None:
            target, found = self.substitution.apply(ctx.path)
            if found is None:
                return None
        else:
            return None  # http_to_https: false
        if self.encode:
            path, mark, rest = target.partition("?")
            target = escape_uri(path) + mark + rest
        if self.append_query and ctx.query:
            target += ("&" if "?" in target else "?") + ctx.query
        return Reply(status, b"", {"Location": header_safe(target)})


def request_uri(ctx: RequestContext) -> str:
    """nginx's `$request_uri`: the target as the client sent it (origin form)."""
    if ctx.real_request_uri.startswith("/"):
        return ctx.real_request_uri
    return ctx.path + (f"?{ctx.query}" if ctx.query else "")
