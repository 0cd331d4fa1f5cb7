"""RateLimitService: the rate limit hierarchy the edge's tenant-rate-limit enforces
(gateways/edge/plugins/tenant_rate_limit.py), read and written in the keys it reads on every
request, so a change applies to the next request:

    rl:config:{tenant_id}              tenant override: JSON {"limit": 500, "window": "60s"}
                                       (the plugin also reads a plain integer: the limit)
    rl:config:{tenant_id}:{route_id}   route override, same format; wins over the tenant's
    rl:{tenant_id}:{route_id}:{secs}   the plugin's sliding windows (sorted sets scored by the
                                       store's clock in µs): `current_traffic` counts them

Precedence at the edge: route override > tenant override > the route's `default_count`.
`global_default` is the platform setting `default_rate_limit` (`cp:settings` JSON, owned by
the settings service; the spec's 100 when unset) over the spec's 60 s window.

`current_traffic` of the tenant-wide levels is the tenant's requests counted in windows of
that level's length on every edge route; of a route override, on that route. Route overrides
are listed for the routes of the edge configuration (an override of a deleted route no
longer applies to anything). Writing a route override needs the route to exist.
"""

from __future__ import annotations

import json
import re
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from controlplane.edge_config.store import EdgeConfigStore
from controlplane.tenancy import (
    identifier,
    invalid,
    require_tenant_exists,
    store_errors,
    tenant_marker,
    tenant_not_found,
    visible_tenant,
)
from gateways.edge.keys import rate_limit_override, rate_limit_window
from gateways.edge.model import ROUTES
from runtime.context import ServicerContext
from runtime.errors import NotFound, PermissionDenied
from strata.controlplane.v1 import rate_limit_pb2, rate_limit_pb2_grpc

SETTINGS = "cp:settings"  # platform settings JSON (the settings service writes it)
DEFAULT_LIMIT = 100  # spec: default_rate_limit
DEFAULT_WINDOW = "60s"  # spec: rate limit window default
MAX_LIMIT = 1_000_000_000
MAX_WINDOW_SECS = 86_400
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
WINDOW = re.compile(r"([1-9][0-9]{0,5})([smhd])")
STORED_WINDOW = re.compile(r"([0-9]+)([smhd]?)")  # what the plugin parses

# KEYS: any key of the tenant. The clock of the node holding the tenant's windows: the one the
# edge's limiter counts with (a cluster pipeline cannot carry TIME, and nodes' clocks differ).
_CLOCK = "return redis.call('TIME')"

# KEYS: the tenant's marker, the override key (both in the tenant's slot). ARGV: value.
# The tenant must exist (controlplane/tenancy.py: a deletion removes the marker first).
_PUT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('SET', KEYS[2], ARGV[1])
return 1
"""


def config_key(tenant_id: str, route_id: str | None = None) -> str:
    return rate_limit_override(tenant_id, route_id)


def window_secs(window: str, field: str = "window") -> int:
    """Seconds of a window such as `60s`, `5m`, `1h`, `1d` (1 s to 1 day); 400 otherwise."""
    match = WINDOW.fullmatch(window)
    secs = int(match.group(1)) * UNITS[match.group(2)] if match else 0
    if not 0 < secs <= MAX_WINDOW_SECS:
        raise invalid(
            field, f"{field} must be a duration such as 60s, 5m or 1h (from 1s to 1d), not "
            f"{window[:40]!r}"
        )  # fmt: skip
    return secs


def checked_limit(request: Any) -> int:
    if not request.HasField("limit"):
        raise invalid("limit", "limit is required: requests allowed per window")
    if not 0 < request.limit <= MAX_LIMIT:
        raise invalid("limit", f"limit must be a positive integer up to {MAX_LIMIT}")
    return int(request.limit)


def stored_level(raw: str | None) -> tuple[int, str] | None:
    """(limit, window) of an override as the plugin reads it; None when unset or unreadable
    (the plugin ignores it then)."""
    if raw is None:
        return None
    text = raw.strip()
    if text.isdigit():
        return int(text), DEFAULT_WINDOW
    try:
        conf = json.loads(text)
        limit = int(conf["limit"])
    except (ValueError, TypeError, KeyError):
        return None
    window = conf.get("window")
    if isinstance(window, int) and not isinstance(window, bool) and window > 0:
        return limit, f"{window}s"
    match = STORED_WINDOW.fullmatch(window) if isinstance(window, str) else None
    if match is not None and int(match.group(1)) > 0:
        return limit, window if match.group(2) else f"{window}s"
    return limit, DEFAULT_WINDOW


def _stored_secs(window: str) -> int:
    match = STORED_WINDOW.fullmatch(window)
    if match is None:
        return 60
    return int(match.group(1)) * UNITS.get(match.group(2) or "s", 1)


class RateLimitServicer(rate_limit_pb2_grpc.RateLimitServiceServicer):
    def __init__(self, kv: Redis, edge_store: EdgeConfigStore) -> None:
        self.kv = kv
        self.edge_store = edge_store
        self._put = kv.register_script(_PUT)
        self._clock = kv.register_script(_CLOCK)

    @store_errors
    async def GetRateLimitHierarchy(
        self, request: rate_limit_pb2.GetRateLimitHierarchyRequest, context: ServicerContext
    ) -> rate_limit_pb2.GetRateLimitHierarchyResponse:
        tenant = identifier(request.tenant_id, "tenant_id")
        if visible_tenant(tenant) not in (None, tenant):  # the guard refuses this first
            raise PermissionDenied(f"this token may not read the limits of {tenant!r}")
        await require_tenant_exists(self.kv, tenant)
        routes = sorted((await self.edge_store.load()).of(ROUTES))
        async with self.kv.pipeline(transaction=False) as pipe:
            pipe.get(config_key(tenant))
            for route in routes:
                pipe.get(config_key(tenant, route))
            tenant_raw, *route_raws = await pipe.execute()
        secs, micros = await self._clock(keys=[config_key(tenant)])
        now = int(secs) * 1_000_000 + int(micros)
        default = (await self._default_limit(), DEFAULT_WINDOW)
        override = stored_level(tenant_raw)
        by_route = {
            route: level
            for route, raw in zip(routes, route_raws, strict=True)
            if (level := stored_level(raw)) is not None
        }
        # Live counts: the windows each level counts in, on every route (one round trip).
        spans = {_stored_secs(level[1]) for level in (default, override) if level is not None}
        wanted = {(route, span) for route in routes for span in spans}
        wanted |= {(route, _stored_secs(w)) for route, (_, w) in by_route.items()}
        ordered = sorted(wanted)
        async with self.kv.pipeline(transaction=False) as pipe:
            for route, span in ordered:
                since = f"({now - span * 1_000_000}"
                pipe.zcount(rate_limit_window(tenant, route, span), since, "+inf")
            counted = dict(zip(ordered, await pipe.execute(), strict=True))

        def tenant_wide(window: str) -> int:
            span = _stored_secs(window)
            return sum(int(counted.get((route, span), 0)) for route in routes)

        hierarchy = rate_limit_pb2.RateLimitHierarchy(
            tenant_id=tenant,
            global_default=rate_limit_pb2.RateLimitLevel(
                limit=default[0], window=default[1], current_traffic=tenant_wide(default[1])
            ),
            route_overrides=[
                rate_limit_pb2.RouteRateLimitOverride(
                    route_id=route,
                    limit=limit,
                    window=window,
                    current_traffic=int(counted.get((route, _stored_secs(window)), 0)),
                )
                for route, (limit, window) in sorted(by_route.items())
            ],
        )
        if override is not None:
            hierarchy.tenant_override.CopyFrom(
                rate_limit_pb2.RateLimitLevel(
                    limit=override[0], window=override[1], current_traffic=tenant_wide(override[1])
                )
            )
        return rate_limit_pb2.GetRateLimitHierarchyResponse(hierarchy=hierarchy)

    @store_errors
    async def PutTenantRateLimit(
        self, request: rate_limit_pb2.PutTenantRateLimitRequest, context: ServicerContext
    ) -> rate_limit_pb2.PutTenantRateLimitResponse:
        tenant = identifier(request.tenant_id, "tenant_id")
        limit = checked_limit(request)
        window = request.window if request.HasField("window") else DEFAULT_WINDOW
        window_secs(window)
        await self._write(tenant, config_key(tenant), limit, window)
        return rate_limit_pb2.PutTenantRateLimitResponse(status="updated", limit=limit)

    @store_errors
    async def PutRouteRateLimit(
        self, request: rate_limit_pb2.PutRouteRateLimitRequest, context: ServicerContext
    ) -> rate_limit_pb2.PutRouteRateLimitResponse:
        tenant = identifier(request.tenant_id, "tenant_id")
        route = identifier(request.route_id, "route_id")
        limit = checked_limit(request)
        window = request.window if request.HasField("window") else DEFAULT_WINDOW
        window_secs(window)
        await require_tenant_exists(self.kv, tenant)
        if route not in (await self.edge_store.load()).of(ROUTES):
            raise NotFound("Route not found")
        await self._write(tenant, config_key(tenant, route), limit, window)
        return rate_limit_pb2.PutRouteRateLimitResponse(
            status="updated", route_id=route, limit=limit
        )

    async def _write(self, tenant: str, key: str, limit: int, window: str) -> None:
        value = json.dumps({"limit": limit, "window": window})
        if not await self._put(keys=[tenant_marker(tenant), key], args=[value]):
            raise tenant_not_found()

    async def _default_limit(self) -> int:
        """The platform's `default_rate_limit` (settings JSON), else the spec's 100."""
        try:
            raw = await self.kv.get(SETTINGS)
        except ResponseError:  # not a JSON string (another layout): the spec's default
            return DEFAULT_LIMIT
        try:
            value = json.loads(raw)["default_rate_limit"] if raw else None
        except (ValueError, TypeError, KeyError):
            return DEFAULT_LIMIT
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
        return DEFAULT_LIMIT
