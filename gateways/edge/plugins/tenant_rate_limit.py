"""`tenant-rate-limit` (custom, priority 1001, access): a sliding window of `time_window`
seconds per tenant and route, counted in the key-value store's sorted set
`rl:{tenant_id}:{route_id}:{window}` (braces kept: the tenant is the cluster hash tag) by one
atomic Lua script per request.

- Tenant: the verified JWT's `tenant_id` (`ctx.tenant_id`, set by openid-connect, or the
  claims jwt-auth verified), else the consumer group of the authenticated consumer (an API key's
  consumer sits in its tenant's group, whose id is the tenant id: the platform's key layout),
  before the `tenant_header` header. No tenant → `missing_tenant_code`
  unless `allow_missing_tenant` (then the request passes unlimited). A header naming another
  tenant than the token's is refused with 403 unless the token holds the `platform-admin`
  role (the platform's rule in every layer); the upstream always receives the tenant that
  was counted in `tenant_header`, never a client's header that the token contradicts.
- Limit: the route override `rl:config:{tenant_id}:{route_id}` wins over the tenant override
  `rl:config:{tenant_id}`, which wins over `default_count`, read inside the same script (so a
  change applies to the next request). A value is either a plain integer (the limit) or the
  control plane's JSON `{"limit": 500, "window": "60s"}` (`window` optional: an integer of
  seconds or a string with an `s`/`m`/`h`/`d` unit); an overridden window counts in the key of
  that window (declared to the script: the plugin remembers the window each tenant's route
  was last told, see SCRIPT).
- The script reads the store's clock (`TIME`), so processes and hosts with skewed clocks
  still share one window, and admits only while the set holds fewer than the limit: several
  processes bursting at once never get more than the limit per window.
- Concurrent requests of one tenant and route are counted by one script call: those that
  reach the limiter in one turn of the event loop are sent together as `n` (ARGV[5]), and the
  script admits them in their order as if each had run its own script at that instant (the
  first `limit - count` of them, each with its own member), answering how many it admitted.
  Each request still gets its own headers (its own count) and its own 429. Calls of other
  tenants and routes share the store round trip (`runtime/stores/kv_pipeline.py`).
- Fails open when the store is unreachable or slower than `redis_timeout` ms (counted in
  `strata_edge_rate_limit_fail_open_total`), then skips the store for a second so a dead store
  does not add its timeout to every request.
- `redis_host`, `redis_port`, `redis_pool_size` are accepted for compatibility with the spec,
  but the worker's shared client (`env.kv`, from REDIS_URL) is used: one pool per worker
  for every route and plugin instead of one per plugin configuration, which is the same store
  in every deployment of the platform and keeps its TLS and credentials in one setting.
- `X-RateLimit-Reset` is a Unix timestamp (when the oldest counted request leaves the
  window), unlike limit-count's seconds-left.
"""

from __future__ import annotations

import asyncio
import functools
import os
import secrets
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from redis.exceptions import RedisError

from gateways.edge.keys import rate_limit_override, rate_limit_window
from gateways.edge.model.plugins import tenant_rate_limit as declared
from gateways.edge.plugin import Plugin, PluginEnv, Reply, RequestContext, parse_conf
from runtime.access import IDENTIFIER  # the platform's tenant id alphabet
from runtime.stores.kv_pipeline import NoScriptError, PipelinedCalls, PipelinedScript, pipelined

# KEYS: the tenant override, the default window's set, the route override, the set of the
# window an override last asked for (`override_windows`; the default's when none did), all
# under the tenant's hash tag. ARGV: default limit, default window, member, KEYS[4]'s window,
# and optionally n (requests counted by this call, 1 if absent) with the first of their
# sequence numbers (their members are ARGV[3] .. first + i). Returns {admitted, limit, count,
# reset} (`admitted` of the n, the first ones; count after them), or {-1, window} when an
# override asks for a window other than KEYS[4]'s: the caller sends it again with that
# window's set as KEYS[4] (a script touches only the keys it was given, so a cluster can run
# it on the tenant's slot).
SCRIPT = """
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local key = KEYS[2]
local override = redis.call('GET', KEYS[3]) or redis.call('GET', KEYS[1])
if override then
  local n = tonumber(override)
  if n then
    limit = n
  else
    local ok, conf = pcall(cjson.decode, override)
    if ok and type(conf) == 'table' then
      limit = tonumber(conf.limit) or limit
      local w = conf.window
      if type(w) == 'string' then
        local units = {s = 1, m = 60, h = 3600, d = 86400}
        local value, unit = string.match(w, '^(%d+)([smhd]?)$')
        if value then w = tonumber(value) * (units[unit] or 1) else w = nil end
      end
      if type(w) == 'number' and w > 0 and w ~= window then
        if w ~= tonumber(ARGV[4]) then return {-1, w} end
        window = w
        key = KEYS[4]
      end
    end
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local span = window * 1000000
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - span)
local count = redis.call('ZCARD', key)
local n = tonumber(ARGV[5]) or 1
local admitted = 0
if count < limit then
  admitted = math.min(n, math.ceil(limit - count))
  if ARGV[5] then
    local first = tonumber(ARGV[6])
    local i = 0
    while i < admitted do  -- ZADD in chunks: Lua's unpack has a stack limit
      local pairs = {}
      local last = math.min(admitted, i + 500)
      for j = i, last - 1 do
        pairs[#pairs + 1] = now
        pairs[#pairs + 1] = ARGV[3] .. string.format('%d', first + j)
      end
      redis.call('ZADD', key, unpack(pairs))
      i = last
    end
  else
    redis.call('ZADD', key, now, ARGV[3])
  end
  redis.call('PEXPIRE', key, window * 1000)
  count = count + admitted
end
local reset = now + span
local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
if oldest[2] then reset = tonumber(oldest[2]) + span end
return {admitted, limit, count, math.ceil(reset / 1000000)}
"""
LIMITER = PipelinedScript(SCRIPT)
DOWN_BACKOFF = 1.0  # seconds the store is skipped after a failure
MAX_REMEMBERED = 100_000  # (tenant, route) pairs whose override's window is remembered
WINDOW_RETRIES = 2  # sends after a {-1, window} answer (an override changed in between)


@dataclass(frozen=True, slots=True)
class TenantRateLimitConf:
    # redis_host, redis_port, redis_pool_size: accepted, unused (the worker's shared `env.kv`)
    redis_timeout: int
    default_count: int
    time_window: int
    rejected_code: int
    rejected_msg: str
    tenant_header: str
    allow_missing_tenant: bool
    missing_tenant_code: int
    show_limit_header: bool


class TenantRateLimit(declared.TenantRateLimit, Plugin):
    """Per-tenant sliding window in the key-value store, with overrides in `rl:config:{tenant}`
    (spec custom plugin)."""

    def __init__(self, conf: Any, env: PluginEnv) -> None:
        super().__init__(conf, env)
        settings = parse_conf(TenantRateLimitConf, self.schema, conf)
        self.timeout = settings.redis_timeout / 1000
        self.count = str(settings.default_count)
        self.window = settings.time_window
        self.window_arg = str(self.window)
        self.rejected_code = settings.rejected_code
        self.rejected = {"error_msg": settings.rejected_msg}
        self.header = settings.tenant_header.lower()
        self.allow_missing = settings.allow_missing_tenant
        self.missing_code = settings.missing_tenant_code
        self.show = settings.show_limit_header
        self.down_until = 0.0
        # Members of the sorted set must be unique across processes: pid, a random part
        # (pids repeat across hosts) and a counter.
        self.member_prefix = f"{os.getpid()}.{secrets.token_hex(4)}."
        self.sequence = 0
        # (tenant, route) → the requests of this loop turn, waiting for their group's call.
        self.pending: dict[tuple[str, str], list[asyncio.Future[list[int] | None]]] = {}
        self.sending: set[asyncio.Task[None]] = set()  # the loop holds tasks weakly
        # (tenant, route) → the window its override last asked for: its set is sent as
        # KEYS[4], so an overridden window costs one round trip too (a second one only right
        # after the override's window changes). Oldest first, bounded.
        self.override_windows: dict[tuple[str, str], int] = {}

    async def access(self, ctx: RequestContext) -> Reply | None:
        claims = ctx.jwt_claims
        tenant = ctx.tenant_id
        if not tenant and claims:
            tenant = claims.get("tenant_id")
        if not tenant and ctx.consumer:  # a consumer of a tenant's group (group id = tenant)
            tenant = str(ctx.consumer.get("group_id") or "") or None
        named = ctx.headers.get(self.header)
        if tenant and named and named != tenant and not _platform_admin(claims):
            return Reply(403, {"error_msg": f"token tenant {tenant!r} may not act for {named!r}"})
        if not tenant or _platform_admin(claims):
            tenant = named or tenant
        if not tenant or not IDENTIFIER.fullmatch(tenant):
            if self.allow_missing:
                return None
            message = "Invalid tenant ID" if tenant else "Missing tenant ID"
            return Reply(self.missing_code, {"error_msg": message})
        ctx.tenant_id = tenant
        ctx.upstream_headers[self.header] = tenant  # what was counted is what upstream sees
        outcome = await self._count(tenant, ctx.route_id)
        if outcome is None:
            return None  # failed open
        allowed, limit, count, reset = outcome
        headers = None
        if self.show:
            headers = {
                "X-RateLimit-Limit": str(limit),
                "X-RateLimit-Remaining": str(max(limit - count, 0)),
                "X-RateLimit-Reset": str(reset),
                "X-Tenant-ID": tenant,
            }
            ctx.vars[self.name] = headers
        if allowed:
            return None
        return Reply(self.rejected_code, self.rejected, dict(headers) if headers else {})

    def header_filter(self, ctx: RequestContext) -> None:
        headers = ctx.vars.get(self.name)
        if headers:
            ctx.response_headers.update(headers)

    def _count(self, tenant: str, route_id: str) -> asyncio.Future[list[int] | None]:
        """This request's {allowed, limit, count, reset}, or None (failed open): it joins the
        requests of its tenant and route waiting for this turn's script call."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[int] | None] = loop.create_future()
        if self.env.kv is None or time.monotonic() < self.down_until:
            self._fail_open()
            future.set_result(None)
            return future
        pair = (tenant, route_id)
        group = self.pending.get(pair)
        if group is None:
            if not self.pending:  # after the requests that are ready in this turn
                loop.call_soon(self._flush)
            self.pending[pair] = [future]
        else:
            group.append(future)
        return future

    def _flush(self) -> None:
        """One script call per (tenant, route) of this turn's requests, sent without a task:
        the batcher's future, a timer for `redis_timeout` and a callback that answers them
        (a cluster's client, a script not loaded yet or an override's window to ask for take
        the coroutine path, `_send`)."""
        groups, self.pending = self.pending, {}
        kv = self.env.kv
        calls = pipelined(kv) if kv is not None else None
        loop = asyncio.get_running_loop()
        for pair, futures in groups.items():
            first = self.sequence
            self.sequence += len(futures)
            if not isinstance(calls, PipelinedCalls):
                self._in_task(self._send(pair, futures, first))
                continue
            asked = self.override_windows.get(pair, self.window)
            keys, args = self._call(pair, asked, len(futures), first)
            sent = calls.evalsha(LIMITER.sha, len(keys), *keys, *args)
            timer = loop.call_later(self.timeout, sent.cancel)  # a late reply is dropped
            sent.add_done_callback(
                functools.partial(
                    self._answered, pair=pair, futures=futures, first=first, timer=timer
                )
            )

    def _answered(
        self,
        done: asyncio.Future[Any],
        pair: tuple[str, str],
        futures: list[asyncio.Future[list[int] | None]],
        first: int,
        timer: asyncio.TimerHandle,
    ) -> None:
        timer.cancel()
        exc = TimeoutError("the store did not answer in time") if done.cancelled() else (
            done.exception()
        )  # fmt: skip
        if exc is None:
            outcome = done.result()
            if outcome[0] != -1:
                _answer(futures, outcome)
                return
            self._remember(pair, int(outcome[1]))  # counted nowhere yet: ask that window
        elif not isinstance(exc, NoScriptError):  # NOSCRIPT: nothing ran, load it and count
            if isinstance(exc, RedisError | OSError | TimeoutError):
                self.down_until = time.monotonic() + DOWN_BACKOFF
            self._open_all(futures)
            return
        self._in_task(self._send(pair, futures, first))

    def _in_task(self, send: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(send)
        self.sending.add(task)
        task.add_done_callback(self.sending.discard)

    def _call(
        self, pair: tuple[str, str], asked: int, n: int, first: int
    ) -> tuple[tuple[str, ...], tuple[Any, ...]]:
        tenant, route_id = pair
        keys = (
            rate_limit_override(tenant),
            rate_limit_window(tenant, route_id, self.window),
            rate_limit_override(tenant, route_id),
            rate_limit_window(tenant, route_id, asked),
        )
        return keys, (self.count, self.window_arg, self.member_prefix, asked, n, first)

    async def _send(
        self,
        pair: tuple[str, str],
        futures: list[asyncio.Future[list[int] | None]],
        first: int,
    ) -> None:
        """The coroutine path of one group's call (`PipelinedScript`: the script loaded when
        the store lacks it, a cluster's routing), sent again while an override asks for
        another window; each request gets its outcome."""
        kv = self.env.kv
        asked = self.override_windows.get(pair, self.window)
        try:
            async with asyncio.timeout(self.timeout):  # other calls share the round trip
                for _ in range(1 + WINDOW_RETRIES):
                    keys, args = self._call(pair, asked, len(futures), first)
                    outcome: list[int] = await LIMITER(kv, keys, args)
                    if outcome[0] != -1:
                        _answer(futures, outcome)
                        return
                    asked = int(outcome[1])
                    self._remember(pair, asked)
        except (RedisError, OSError, TimeoutError):
            self.down_until = time.monotonic() + DOWN_BACKOFF
        except BaseException:
            self._open_all(futures)
            raise
        self._open_all(futures)  # the override's window kept changing under every send

    def _open_all(self, futures: list[asyncio.Future[list[int] | None]]) -> None:
        for future in futures:
            if not future.done():
                self._fail_open()
                future.set_result(None)

    def _remember(self, pair: tuple[str, str], window: int) -> None:
        remembered = self.override_windows
        remembered.pop(pair, None)
        if len(remembered) >= MAX_REMEMBERED:
            del remembered[next(iter(remembered))]
        remembered[pair] = window

    def _fail_open(self) -> None:
        metrics = self.env.metrics
        if metrics is not None:
            metrics.rate_limit_fail_open.labels(self.name).inc()


def _answer(futures: list[asyncio.Future[list[int] | None]], outcome: list[int]) -> None:
    """Each request's own {allowed, limit, count, reset} from one call's {admitted, limit,
    count after, reset}: the first `admitted` were let in, one after the other."""
    admitted, limit, after, reset = (int(value) for value in outcome[:4])
    before = after - admitted
    for i, future in enumerate(futures):
        if future.done():  # its request is gone (the client left)
            continue
        if i < admitted:
            future.set_result([1, limit, before + i + 1, reset])
        else:
            future.set_result([0, limit, after, reset])


def _platform_admin(claims: Any) -> bool:
    """A token of the platform's administrators acts for any tenant it names."""
    if not claims:
        return False
    roles = (claims.get("realm_access") or {}).get("roles") or ()
    return "platform-admin" in roles
