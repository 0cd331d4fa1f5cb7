"""`limit-conn` (APISIX priority 1003, access + log): at most `conn` requests in flight per key,
as APISIX's `resty.limit.conn`. A request is counted in access and released in the log phase
(after its response). Up to `conn` pass at once; up to `conn + burst` pass after a delay of
`unit_delay * ceil(excess / conn)` seconds (excess = in flight beyond `conn`, this one
included); beyond that they are refused with `rejected_code` (503; body
`{"error_msg": rejected_msg}` when set) and not counted.

- `unit_delay` starts at `default_conn_delay`; unless `only_use_default_delay`, each release
  moves it halfway to the request's latency (the upstream's response time when proxied, else
  the request's time less its delay), as resty.limit.conn learns the typical request time.
- Released exactly once, in the log phase, whatever ended the request: a refusal by a later
  plugin, an upstream failure, a client that left while waiting or being served (the data
  plane runs the log phase for those too).
- `policy: local` counts in this worker's memory (APISIX shares one count between the nginx
  workers of a node; here each worker process counts alone, so N workers admit up to N times
  `conn`: use `redis` for an exact limit). Counts outlive configuration versions that leave
  the plugin's configuration unchanged.
- `policy: redis` / `redis-cluster` counts in the key-value store (`env.kv`, the worker's
  shared client; the `redis_*` fields are accepted, see `_limit.py`): each request is a member
  of the key's sorted set, added by one atomic script if the set holds fewer than
  `conn + burst`, scored with its expiry (`key_ttl` seconds, on the store's clock) so a worker
  that dies holding requests does not hold them forever; the release (`ZREM`) is sent after
  the response, never delaying it. A store error or a store slower than `redis_timeout` ms
  answers 500 `{"error_msg": "failed to limit conn"}` (APISIX: no body) unless
  `allow_degradation` (then the request passes, uncounted).
- The key: as limit-count (`key_type` `var` or `var_combination`; nothing resolved → the
  client address), prefixed with the configuration's hash and the route id.
- The delay applied is kept in `ctx.vars["limit_conn_delay"]` (seconds), for the log. Tests
  replace the module's `sleep`.

Not implemented: `rules` (newer APISIX). A WebSocket connection is released when its upgrade
is answered, not when it closes (the data plane's log phase runs then).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import secrets
import time
from asyncio import sleep
from dataclasses import dataclass
from typing import Any

from gateways.edge.model.plugins import limit_conn as declared
from gateways.edge.plugin import Plugin, PluginEnv, Reply, RequestContext, parse_conf
from gateways.edge.plugins._limit import (
    STORE_ERRORS,
    Script,
    conf_digest,
    key_getter,
    rejected_body,
)

log = logging.getLogger(__name__)

# KEYS[1]: the key's sorted set of requests in flight (member → expiry, store seconds).
# ARGV: conn + burst, key_ttl (seconds), this request's member. Returns {admitted, count}.
INCOMING = Script("""
local now = tonumber(redis.call('TIME')[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local count = redis.call('ZCARD', KEYS[1])
if count >= tonumber(ARGV[1]) then
  return {0, count}
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[2])
return {1, count + 1}
""")
LEASES = "limit-conn"  # ctx.vars: the requests this request holds, released in log

# This worker's counts (policy local): key → requests in flight (absent when none).
_in_flight: dict[str, int] = {}
# Releases sent to the store, held until done (the event loop keeps tasks weakly).
_releasing: set[asyncio.Task[None]] = set()


@dataclass(frozen=True, slots=True)
class LimitConnConf:
    conn: int
    burst: int
    default_conn_delay: float  # seconds
    only_use_default_delay: bool
    key_type: str
    key: str
    key_ttl: int  # seconds
    policy: str
    redis_timeout: int  # milliseconds
    allow_degradation: bool
    rejected_code: int
    rejected_msg: str | None = None


class LimitConn(declared.LimitConn, Plugin):
    """At most `conn` concurrent requests per key: up to `burst` more are delayed, beyond that
    refused (local or in the key-value store)."""

    def __init__(self, conf: Any, env: PluginEnv) -> None:
        super().__init__(conf, env)
        settings = parse_conf(LimitConnConf, self.schema, conf)
        self.conn = settings.conn
        self.limit = self.conn + settings.burst
        self.unit_delay = float(settings.default_conn_delay)
        self.learn_delay = not settings.only_use_default_delay
        self.key_ttl = settings.key_ttl
        self.redis = settings.policy != "local"
        self.timeout = settings.redis_timeout / 1000
        self.degrade = settings.allow_degradation
        self.rejected_code = settings.rejected_code
        self.rejected_body = rejected_body(settings.rejected_msg)
        self.key_of = key_getter(settings.key_type, settings.key)
        # the counter's identity: the whole configuration as stored (not the parsed fields)
        self.prefix = f"plugin-limit-conn:{conf_digest(conf)}:"
        # Sorted-set members are unique across processes and hosts: pid, random part, counter.
        self.member_prefix = f"{os.getpid()}.{secrets.token_hex(4)}."
        self.sequence = itertools.count()

    async def access(self, ctx: RequestContext) -> Reply | None:
        key = f"{self.prefix}{ctx.route_id}:{self.key_of(ctx)}"
        member = None
        if self.redis:
            member = self.member_prefix + str(next(self.sequence))
            try:
                admitted, count = await INCOMING.run(
                    self.env.kv, self.timeout, (key,), self.limit, self.key_ttl, member
                )
            except asyncio.CancelledError:  # the client left: the script may have run
                self._release_in_store(key, member)
                raise
            except STORE_ERRORS as exc:
                log.warning("failed to limit conn: %r", exc, extra={"route_id": ctx.route_id})
                self._release_in_store(key, member)  # in case the script ran after all
                if self.degrade:
                    return None
                return Reply(500, {"error_msg": "failed to limit conn"})
            if not int(admitted):
                return Reply(self.rejected_code, self.rejected_body)
            count = int(count)
        else:
            count = _in_flight.get(key, 0) + 1
            if count > self.limit:
                return Reply(self.rejected_code, self.rejected_body)
            _in_flight[key] = count
        delay = self.unit_delay * ((count - 1) // self.conn) if count > self.conn else 0.0
        ctx.vars.setdefault(LEASES, []).append((self, key, member, delay))
        if delay >= 0.001:
            ctx.vars["limit_conn_delay"] = delay
            try:
                await sleep(delay)
            except asyncio.CancelledError:  # the client left while waiting
                self.log(ctx)
                raise
        return None

    def log(self, ctx: RequestContext) -> None:
        # Every limit-conn of the request releases what the request holds, once: the first
        # to run takes the leases.
        leases = ctx.vars.pop(LEASES, None)
        for plugin, key, member, delay in leases or ():
            plugin._leave(ctx, key, member, delay)

    def _leave(self, ctx: RequestContext, key: str, member: str | None, delay: float) -> None:
        if self.learn_delay:
            if "upstream_addr" in ctx.vars:  # proxied
                latency = ctx.upstream_latency
            else:
                latency = max(time.perf_counter() - ctx.started - delay, 0.0)
            self.unit_delay = (latency + self.unit_delay) / 2
        if member is not None:
            self._release_in_store(key, member)
            return
        left = _in_flight.get(key, 0) - 1
        if left > 0:
            _in_flight[key] = left
        else:
            _in_flight.pop(key, None)

    def _release_in_store(self, key: str, member: str) -> None:
        task = asyncio.get_running_loop().create_task(self._zrem(key, member))
        _releasing.add(task)
        task.add_done_callback(_releasing.discard)

    async def _zrem(self, key: str, member: str) -> None:
        kv = self.env.kv
        if kv is None:
            return
        try:
            async with asyncio.timeout(self.timeout):
                await kv.zrem(key, member)
        except STORE_ERRORS as exc:  # the member expires after key_ttl
            log.warning("failed to release a limit-conn request: %r", exc)
