"""Building plugins and request contexts in the edge plugin tests."""

from __future__ import annotations

import time
from typing import Any

from gateways.edge.plugin import Plugin, PluginEnv, RequestContext
from gateways.edge.plugins import REGISTRY
from gateways.edge.schema import check, with_defaults


def make_plugin(name: str, conf: dict[str, Any], env: PluginEnv | None = None) -> Any:
    """The plugin as the data plane builds it: schema-checked, defaults filled in."""
    cls: type[Plugin] = REGISTRY[name]
    problem = check(cls.schema, conf)
    assert problem is None, problem
    return cls(with_defaults(cls.schema, conf), env or PluginEnv())


def request(
    path: str = "/api/things",
    headers: dict[str, str] | None = None,
    query: str = "",
    method: str = "GET",
    route_id: str = "r1",
    client_ip: str = "127.0.0.1",
) -> RequestContext:
    ctx = RequestContext(
        method, path, query, {k.lower(): v for k, v in (headers or {}).items()}, client_ip,
        time.perf_counter(),
    )  # fmt: skip
    ctx.route_id = route_id
    return ctx


def burst(args: tuple[str, str, str, int, float]) -> int:
    """In a child process: `requests` concurrent access() calls of tenant-rate-limit against
    the store at `kv_url`, started at wall time `start`; returns how many were admitted."""
    import asyncio

    from runtime.stores.kv import connect_kv

    kv_url, tenant, route_id, requests, start = args

    async def run() -> int:
        env = PluginEnv()
        env.kv = connect_kv(kv_url)
        plugin = make_plugin("tenant-rate-limit", {"default_count": 50, "time_window": 60}, env)
        await env.kv.ping()  # connect before the start line
        await asyncio.sleep(max(0.0, start - time.time()))
        replies = await asyncio.gather(
            *(
                plugin.access(request(headers={"x-tenant-id": tenant}, route_id=route_id))
                for _ in range(requests)
            )
        )
        await env.kv.aclose()
        assert all(r is None or r.status == 429 for r in replies)
        return sum(r is None for r in replies)

    return asyncio.run(run())


def count_requests(args: tuple[str, int, int]) -> int:
    """In a child process: the prometheus plugin logs `n` requests of route r1 (status
    `status`) into multiprocess metrics in `directory`; returns the child's pid."""
    import os

    from gateways.edge.metrics import EdgeMetrics

    directory, n, status = args
    env = PluginEnv()
    env.metrics = EdgeMetrics(directory)
    plugin = make_plugin("prometheus", {}, env)
    for _ in range(n):
        ctx = request(route_id="r1")
        ctx.route = {"uri": "/api/*", "host": "edge.local"}
        ctx.status, ctx.bytes_received, ctx.bytes_sent = status, 100, 1000
        ctx.upstream_latency = 0.002
        plugin.log(ctx)
    return os.getpid()
