"""`cors` (APISIX priority 4000, rewrite + header_filter): Cross-Origin Resource Sharing.

- rewrite: any `OPTIONS` request (a preflight) is answered 200 here, without calling the
  upstream; the CORS headers are added to it by header_filter like to any other response.
- header_filter: the allowed origin for the request's `Origin`:
  - `allow_origins`: `*` (any origin, answered `*`), `**` (any origin, answered with the
    request's own origin: allowed even with credentials), one origin (always answered as
    configured; the browser compares), or a comma list (the request's origin if listed, else no
    CORS headers);
  - `allow_origins_by_regex`: when set, only origins matching one of the regexes (searched,
    not anchored, as APISIX does) are allowed and `allow_origins` is ignored.
  Allowed → `Access-Control-Allow-Origin`, `-Allow-Methods` (`**`: every method),
  `-Allow-Headers` (`**`: the request's `Access-Control-Request-Headers`), `-Max-Age`,
  `-Expose-Headers` (only when configured), `-Allow-Credentials: true` with `allow_credential`.
  `Vary: Origin` is added whenever the answer depends on the origin (not a plain `*`).
  `timing_allow_origins` (same syntax) / `timing_allow_origins_by_regex` set
  `Timing-Allow-Origin` for a matching origin.
- `allow_credential: true` with `*` in `allow_origins` (its default), `allow_methods`,
  `allow_headers`, `expose_headers` or `timing_allow_origins` is refused, as APISIX's
  check_schema does; so is a regex that does not compile.

Not applicable: `allow_origins_by_metadata` is accepted (schema-checked) but has no effect:
this edge has no plugin_metadata to hold the named origin lists.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gateways.edge.model.plugins import cors as declared
from gateways.edge.plugin import Plugin, PluginEnv, Reply, RequestContext, parse_conf

EVERY_METHOD = "GET,POST,PUT,DELETE,PATCH,HEAD,OPTIONS,CONNECT,TRACE"


class OriginRule:
    """One origin setting (`allow_origins` or `timing_allow_origins`, with its regexes)."""

    __slots__ = ("listed", "regex", "value")

    def __init__(self, value: str | None, regexes: list[str] | None) -> None:
        self.value = value
        self.listed = frozenset(value.split(",")) if value and "," in value else None
        self.regex = re.compile("|".join(regexes)) if regexes else None

    def allowed(self, origin: str | None) -> str | None:
        """The `Access-Control-Allow-Origin` value for `origin`, None when not allowed."""
        if self.regex is not None:
            return origin if origin and self.regex.search(origin) else None
        if self.listed is not None:
            return origin if origin in self.listed else None
        if self.value == "**":
            return origin or "*"
        return self.value


@dataclass(frozen=True, slots=True)
class CorsConf:
    allow_origins: str
    allow_methods: str
    allow_headers: str
    max_age: int
    allow_credential: bool
    expose_headers: str | None = None
    allow_origins_by_regex: list[str] | None = None
    timing_allow_origins: str | None = None
    timing_allow_origins_by_regex: list[str] | None = None


class Cors(declared.Cors, Plugin):
    """Answers CORS preflight requests at the edge and adds the CORS headers to responses."""

    def __init__(self, conf: Any, env: PluginEnv) -> None:
        super().__init__(conf, env)
        settings = parse_conf(CorsConf, self.schema, conf)
        self.origins = OriginRule(settings.allow_origins, settings.allow_origins_by_regex)
        timing, timing_regexes = (
            settings.timing_allow_origins,
            settings.timing_allow_origins_by_regex,
        )
        self.timing = OriginRule(timing, timing_regexes) if timing or timing_regexes else None
        methods = settings.allow_methods
        allow_headers = settings.allow_headers
        self.echo_request_headers = allow_headers == "**"
        # the headers every allowed response gets, computed once
        self.headers = {
            "access-control-allow-methods": EVERY_METHOD if methods == "**" else methods,
            "access-control-max-age": str(settings.max_age),
        }
        if settings.expose_headers:
            self.headers["access-control-expose-headers"] = settings.expose_headers
        if not self.echo_request_headers:
            self.headers["access-control-allow-headers"] = allow_headers
        if settings.allow_credential:
            self.headers["access-control-allow-credentials"] = "true"

    async def rewrite(self, ctx: RequestContext) -> Reply | None:
        if ctx.method == "OPTIONS":
            return Reply(200)
        return None

    def header_filter(self, ctx: RequestContext) -> None:
        origin = ctx.headers.get("origin")
        headers = ctx.response_headers
        allowed = self.origins.allowed(origin)
        if allowed != "*":
            vary = headers.get("vary")
            if not vary:
                headers["vary"] = "Origin"
            elif "origin" not in (token.strip().lower() for token in vary.split(",")):
                headers["vary"] = f"{vary}, Origin"
        if allowed is not None:
            headers["access-control-allow-origin"] = allowed
            headers.update(self.headers)
            if self.echo_request_headers:
                requested = ctx.headers.get("access-control-request-headers")
                if requested:
                    headers["access-control-allow-headers"] = requested
        if self.timing is not None:
            timing = self.timing.allowed(origin)
            if timing is not None and (timing == "*" or timing == origin):
                headers["timing-allow-origin"] = timing
