"""`limit-count` (APISIX priority 1002, access): at most `count` requests per `time_window`
seconds per key, with APISIX's semantics: a fixed window opened by the key's first request,
503 by default, `X-RateLimit-Reset` = seconds left in the window (unlike tenant-rate-limit's
Unix timestamp), a store error is a 500 unless `allow_degradation`.

- `policy: local` counts in this worker's memory (APISIX shares one counter between the
  nginx workers of a node; here each worker process counts alone, so N workers admit up to
  N times count: use `redis` for an exact limit).
- `policy: redis` / `redis-cluster` counts with one atomic script in the worker's shared
  key-value client (`env.kv`; concurrent requests' scripts share a round trip); the
  `redis_*` connection fields are accepted, as for tenant-rate-limit.
- The key (shared with limit-req and limit-conn, `_limit.py`): `key_type: var` names one
  variable (`remote_addr`, `consumer_name`, `route_id`, `server_addr`, `http_<header>`,
  `arg_<query arg>`...); `var_combination` joins `$var`s; `constant` is the key itself. A
  missing variable falls back to the client address.
- The counter restarts when the plugin's configuration changes (the key holds its hash);
  `group` shares one counter between routes.

Not implemented: `rules`, `$var` counts, `window_type: sliding` (accepted, counted fixed).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from gateways.edge.model.plugins import limit_count as declared
from gateways.edge.plugin import Plugin, PluginEnv, Reply, RequestContext, parse_conf
from gateways.edge.plugins._limit import (
    STORE_ERRORS,
    Script,
    conf_digest,
    key_getter,
    rejected_body,
)

SCRIPT = Script("""
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('SET', KEYS[1], ARGV[1] - 1, 'PX', ARGV[2])
  return {ARGV[1] - 1, tonumber(ARGV[2])}
end
return {redis.call('INCRBY', KEYS[1], -1), ttl}
""")
LOCAL_PRUNE_AT = 100_000  # keys kept by a local counter before expired ones are swept


@dataclass(frozen=True, slots=True)
class LimitCountConf:
    count: int
    time_window: int  # seconds
    key_type: str
    key: str
    policy: str
    redis_timeout: int  # milliseconds
    allow_degradation: bool
    show_limit_quota_header: bool
    rejected_code: int
    rejected_msg: str | None = None
    group: str | None = None


class LimitCount(declared.LimitCount, Plugin):
    """At most `count` requests per `time_window` per key (fixed window, local or in the key-value
    store)."""

    def __init__(self, conf: Any, env: PluginEnv) -> None:
        super().__init__(conf, env)
        settings = parse_conf(LimitCountConf, self.schema, conf)
        self.count = settings.count
        self.window = settings.time_window
        self.redis = settings.policy != "local"
        self.timeout = settings.redis_timeout / 1000
        self.degrade = settings.allow_degradation
        self.show = settings.show_limit_quota_header
        self.rejected_code = settings.rejected_code
        self.rejected_body = rejected_body(settings.rejected_msg)
        self.key_of = key_getter(settings.key_type, settings.key)
        self.group = settings.group
        # the counter's identity: the whole configuration as stored (not the parsed fields)
        self.prefix = f"plugin-limit-count:{conf_digest(conf)}:"
        self.limit_header = str(self.count)
        self._local: dict[str, list[float]] = {}  # key → [window end (monotonic), remaining]

    async def access(self, ctx: RequestContext) -> Reply | None:
        key = f"{self.prefix}{self.group or ctx.route_id}:{self.key_of(ctx)}"
        if self.redis:
            try:
                remaining, reset = await self._redis(key)
            except STORE_ERRORS:
                if self.degrade:
                    return None
                return Reply(500, {"error_msg": "failed to limit count"})
        else:
            remaining, reset = self._count_locally(key)
        headers = None
        if self.show:
            headers = {
                "X-RateLimit-Limit": self.limit_header,
                "X-RateLimit-Remaining": str(max(remaining, 0)),
                "X-RateLimit-Reset": str(reset),
            }
            ctx.vars[self.name] = headers
        if remaining < 0:
            return Reply(self.rejected_code, self.rejected_body, dict(headers or {}))
        return None

    def header_filter(self, ctx: RequestContext) -> None:
        headers = ctx.vars.get(self.name)
        if headers:
            ctx.response_headers.update(headers)

    def _count_locally(self, key: str) -> tuple[int, int]:
        now = time.monotonic()
        entry = self._local.get(key)
        if entry is None or entry[0] <= now:
            if len(self._local) >= LOCAL_PRUNE_AT:
                self._local = {k: e for k, e in self._local.items() if e[0] > now}
            entry = self._local[key] = [now + self.window, self.count]
        entry[1] -= 1
        return int(entry[1]), math.ceil(entry[0] - now)

    async def _redis(self, key: str) -> tuple[int, int]:
        args = (self.count, self.window * 1000)
        remaining, ttl_ms = await SCRIPT.run(self.env.kv, self.timeout, (key,), *args)
        return int(remaining), math.ceil(int(ttl_ms) / 1000)
