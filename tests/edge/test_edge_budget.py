"""The per-request CPU of the reference chain (request-id, openid-connect, tenant-rate-limit,
prometheus, analytics-logger) with a repeated token, against the real Valkey and IdP."""

from __future__ import annotations

import time
from typing import Any

from helpers import make_plugin, request
from support import user_token

from gateways.edge.metrics import EdgeMetrics
from gateways.edge.plugin import PluginEnv
from gateways.edge.plugins import analytics_logger
from runtime.auth import JwksCache
from runtime.stores.kv import connect_kv


class CountingSink:
    rows = 0

    async def write(self, table: str, rows: Any) -> int:
        self.rows += len(rows)
        return len(rows)


async def test_cpu_per_request(idp: str, valkey_url: str) -> None:
    env = PluginEnv()
    env.kv, env.metrics, env.sink = connect_kv(valkey_url), EdgeMetrics(), CountingSink()
    env.jwks = JwksCache(f"{idp}/protocol/openid-connect/certs")
    discovery = f"{idp}/.well-known/openid-configuration"
    chain = [
        make_plugin("request-id", {}, env),
        make_plugin(
            "openid-connect",
            {"client_id": "edge", "discovery": discovery, "bearer_only": True},
            env,
        ),
        make_plugin("tenant-rate-limit", {"default_count": 10**9}, env),
        make_plugin("prometheus", {}, env),
        make_plugin("analytics-logger", {"batch_max_size": 10_000}, env),
    ]
    token = await user_token(idp)

    async def one() -> None:
        ctx = request(headers={"authorization": f"Bearer {token}", "user-agent": "bench"})
        for plugin in chain:
            assert await plugin.rewrite(ctx) is None
        for plugin in chain:
            assert await plugin.access(ctx) is None
        ctx.status = 200
        for plugin in chain:
            plugin.header_filter(ctx)
        for plugin in chain:
            plugin.log(ctx)

    for _ in range(200):
        await one()
    n = 2000
    started = time.process_time()
    for _ in range(n):
        await one()
    per_request = (time.process_time() - started) / n
    print(f"plugins' CPU per request: {per_request * 1e6:.0f} µs")
    # Most of it is redis-py's client side of the one EVALSHA round trip.
    assert per_request < 300e-6
    await analytics_logger.close()
    await env.kv.aclose()
