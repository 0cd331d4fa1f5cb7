"""`api-breaker` (APISIX priority 1005, access + log): a circuit breaker on the upstream's
status codes, counted per route, host and URI as APISIX counts them (APISIX keys on host and
URI only; the route id keeps two routes with different configurations apart).

- Log phase: an upstream status in `unhealthy.http_statuses` adds one to the unhealthy count
  (and forgets the healthy one); every `unhealthy.failures`-th one opens the breaker. A status
  in `healthy.http_statuses` while unhealthy counts one success; `healthy.successes` of them
  close the breaker and forget the counts. Only statuses of the upstream count (a 502/504 of
  an upstream that could not be reached included, as nginx's `$upstream_status`); a plugin's
  answer, the breaker's own included, does not.
- Access phase: while open, for 2^n seconds after it opened (n = ceil(unhealthy count /
  failures), at most `max_breaker_sec`), requests get `break_response_code` without reaching
  the upstream, with `break_response_body` and `break_response_headers` (values may hold
  `$var`s) when a body is configured, as in APISIX. When the time is up, requests reach the
  upstream again: one more failure re-opens it for the longer time still counting from when it
  opened, and each `failures`-th restarts it.
- The state lives in this worker's memory, as APISIX keeps it in a shared dict of its node
  (one per node, shared by its nginx workers; here one per worker process, so each worker
  opens its breaker after its own failures). It outlives configuration versions. At most
  `MAX_TRACKED` host+URI states are kept; the oldest go first (as a full shared dict evicts).
- The breaker's clock is `time.monotonic` (`clock` in this module, replaceable in tests);
  APISIX's is whole seconds (`ngx.time()`), so its breaker may stay open up to a second
  longer.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gateways.edge.model.plugins import api_breaker as declared
from gateways.edge.plugin import Plugin, PluginEnv, Reply, RequestContext, parse_conf
from gateways.edge.variables import interpolate, variable

MAX_TRACKED = 100_000
UPSTREAM_STATUS = "api-breaker.upstream_status"  # ctx.vars: what the upstream answered

clock: Callable[[], float] = time.monotonic


class State:
    """The counts of one route + host + URI, as APISIX's three shared-dict keys."""

    __slots__ = ("healthy", "opened_at", "unhealthy")

    def __init__(self) -> None:
        self.unhealthy = 0
        self.healthy = 0
        self.opened_at: float | None = None  # when the breaker last opened


# This worker's states: "<route id> <host><uri>" → State.
_states: dict[str, State] = {}


@dataclass(frozen=True, slots=True)
class ApiBreakerConf:
    break_response_code: int
    max_breaker_sec: int
    unhealthy: Mapping[str, Any]  # http_statuses, failures (defaults filled in)
    healthy: Mapping[str, Any]  # http_statuses, successes
    break_response_body: str | None = None
    break_response_headers: list[Mapping[str, str]] | None = None


class ApiBreaker(declared.ApiBreaker, Plugin):
    """Circuit breaker: after `failures` unhealthy upstream statuses, answers
    `break_response_code` without calling the upstream for 2, 4, 8... seconds."""

    def __init__(self, conf: Any, env: PluginEnv) -> None:
        super().__init__(conf, env)
        settings = parse_conf(ApiBreakerConf, self.schema, conf)
        self.code = settings.break_response_code
        body = settings.break_response_body
        self.body = None if body is None else body.encode()
        self.headers = [
            (h["key"], interpolate(h["value"])) for h in settings.break_response_headers or ()
        ]
        self.max_seconds = settings.max_breaker_sec
        unhealthy, healthy = settings.unhealthy, settings.healthy
        self.unhealthy_statuses = frozenset(unhealthy["http_statuses"])
        self.failures: int = unhealthy["failures"]
        self.healthy_statuses = frozenset(healthy["http_statuses"])
        self.successes: int = healthy["successes"]

    async def access(self, ctx: RequestContext) -> Reply | None:
        state = _states.get(_key(ctx))
        if state is None or state.opened_at is None:
            return None
        times = max(math.ceil(state.unhealthy / self.failures), 1)
        seconds = min(2 ** min(times, 32), self.max_seconds)
        if clock() >= state.opened_at + seconds:
            return None
        if self.body is None:
            return Reply(self.code)
        return Reply(self.code, self.body, {name: value(ctx) for name, value in self.headers})

    def header_filter(self, ctx: RequestContext) -> None:
        # The status as the upstream sent it, before a later plugin may rewrite it; an
        # answer the upstream did not give has no upstream address.
        if "upstream_addr" in ctx.vars:
            ctx.vars[UPSTREAM_STATUS] = ctx.status

    def log(self, ctx: RequestContext) -> None:
        status = ctx.vars.get(UPSTREAM_STATUS)
        if status is None:
            return
        key = _key(ctx)
        state = _states.get(key)
        if status in self.unhealthy_statuses:
            if state is None:
                if len(_states) >= MAX_TRACKED:
                    del _states[next(iter(_states))]
                state = _states[key] = State()
            state.unhealthy += 1
            state.healthy = 0
            if state.unhealthy % self.failures == 0:
                state.opened_at = clock()
        elif status in self.healthy_statuses and state is not None:
            state.healthy += 1
            if state.healthy >= self.successes:
                del _states[key]  # healthy again


def _key(ctx: RequestContext) -> str:
    return f"{ctx.route_id} {variable(ctx, 'host')}{ctx.path}"
