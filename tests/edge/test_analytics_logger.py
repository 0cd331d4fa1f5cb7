"""analytics-logger into the real chDB's gateway.request_log, through the runtime's sink."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any

from edge_kit import make_plugin, request

from gateways.edge.metrics import EdgeMetrics
from gateways.edge.plugin import PluginEnv
from gateways.edge.plugins import analytics_logger
from runtime.errors import Unavailable
from runtime.stores.analytics import Analytics, DirectSink


class OutageSink:
    """The real sink behind a switch: while `down`, writes fail as an unreachable store's do."""

    def __init__(self, inner: DirectSink) -> None:
        self.inner = inner
        self.down = False
        self.failures = 0

    async def write(self, table: str, rows: Sequence[Any], token: str | None = None) -> int:
        if self.down:
            self.failures += 1
            raise Unavailable("analytics store error: connection refused")
        return await self.inner.write(table, rows, token)


def env_for(sink: Any) -> PluginEnv:
    env = PluginEnv()
    env.sink = sink
    env.metrics = EdgeMetrics()
    return env


async def rows_of(analytics: Analytics, tenant: str) -> list[dict[str, Any]]:
    return await analytics.query(
        "SELECT * FROM gateway.request_log WHERE tenant_id = {t:String} ORDER BY timestamp",
        {"t": tenant},
    )


def served(tenant: str | None = None, **kw: Any) -> Any:
    headers = {"User-Agent": "curl/8", "Authorization": "Bearer secret-token", "apikey": "k-123"}
    if tenant:
        headers["X-Tenant-ID"] = tenant
    ctx = request(headers=headers, query="apikey=secret-query-key", **kw)
    ctx.status, ctx.bytes_received, ctx.bytes_sent = 200, 120, 2048
    ctx.request_id = "req-1"
    return ctx


async def test_rows_land_without_credentials(analytics: Analytics) -> None:
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    plugin = make_plugin("analytics-logger", {"batch_max_size": 2}, env_for(DirectSink(analytics)))
    first = served(tenant)
    first.headers["traceparent"] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    plugin.log(first)
    plugin.log(served(tenant, method="POST"))  # the second row fills the batch: it flushes
    await asyncio.sleep(0.5)
    rows = await rows_of(analytics, tenant)
    assert len(rows) == 2
    row = rows[0]
    assert row["route_id"] == "r1" and row["status_code"] == 200 and row["path"] == "/api/things"
    assert (row["request_size"], row["response_size"]) == (120, 2048)
    assert row["client_ip"] == "127.0.0.1" and row["user_agent"] == "curl/8"
    assert row["trace_id"] == "0af7651916cd43dd8448eb211c80319c"
    assert rows[1]["trace_id"] == "req-1" and rows[1]["method"] == "POST"
    assert row["latency_ms"] >= 0
    for value in (str(v) for r in rows for v in r.values()):
        assert "secret" not in value and "k-123" not in value
    await analytics_logger.close()


async def test_inactive_timeout_flush_and_tenant_sources(analytics: Analytics) -> None:
    plugin = make_plugin(
        "analytics-logger", {"inactive_timeout": 1}, env_for(DirectSink(analytics))
    )
    from_ctx, from_claims = f"t-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    ctx = served()
    ctx.tenant_id = from_ctx
    plugin.log(ctx)
    ctx = served()
    ctx.jwt_claims = {"tenant_id": from_claims}
    plugin.log(ctx)
    header_wins = served("header-tenant-" + from_ctx)
    header_wins.tenant_id = from_ctx
    plugin.log(header_wins)
    await asyncio.sleep(1.6)
    assert len(await rows_of(analytics, from_ctx)) == 1
    assert len(await rows_of(analytics, from_claims)) == 1
    assert len(await rows_of(analytics, "header-tenant-" + from_ctx)) == 1
    await analytics_logger.close()


async def test_a_short_outage_loses_no_row(analytics: Analytics) -> None:
    sink = OutageSink(DirectSink(analytics))
    conf = {"max_retry_count": 2, "retry_delay": 0, "inactive_timeout": 100}
    env = env_for(sink)
    plugin = make_plugin("analytics-logger", conf, env)
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    sink.down = True
    for _ in range(3):
        plugin.log(served(tenant))
    await plugin.batcher.flush()
    assert sink.failures == 3  # one write and two retries
    assert len(plugin.batcher.rows) == 3  # kept for the next flush
    sink.down = False
    plugin.log(served(tenant))
    await analytics_logger.close()  # the shutdown flush writes everything buffered
    assert len(await rows_of(analytics, tenant)) == 4
    assert env.metrics.analytics_rows_dropped._value.get() == 0


async def test_rows_older_than_buffer_duration_are_dropped(analytics: Analytics) -> None:
    sink = OutageSink(DirectSink(analytics))
    conf = {"max_retry_count": 0, "buffer_duration": 1, "inactive_timeout": 100}
    env = env_for(sink)
    plugin = make_plugin("analytics-logger", conf, env)
    sink.down = True
    plugin.log(served("gone"))
    await plugin.batcher.flush()
    assert len(plugin.batcher.rows) == 1
    await asyncio.sleep(1.1)
    await plugin.batcher.flush()
    assert plugin.batcher.rows == []
    assert env.metrics.analytics_rows_dropped._value.get() == 1
    await analytics_logger.close()


def test_routes_with_the_same_settings_share_a_batcher() -> None:
    env = env_for(object())
    one = make_plugin("analytics-logger", {}, env)
    two = make_plugin("analytics-logger", {}, env)
    other = make_plugin("analytics-logger", {"batch_max_size": 5}, env)
    assert one.batcher is two.batcher and one.batcher is not other.batcher
    analytics_logger._BATCHERS.clear()


class CountingSink:
    """The real sink, counting the rows of each write."""

    def __init__(self, inner: DirectSink) -> None:
        self.inner = inner
        self.writes: list[int] = []

    async def write(self, table: str, rows: Sequence[Any], token: str | None = None) -> int:
        self.writes.append(len(rows))
        return await self.inner.write(table, rows, token)


async def test_a_busy_turn_writes_full_batches_only(analytics: Analytics) -> None:
    """25 requests logged in one turn of the loop with `batch_max_size` 10: two writes of 10
    (one after the other), the 5 left wait for the next full batch or the timer. Each request
    past the tenth used to start a write of its own, which wrote whatever had come in since
    (batches of a few rows under load: a gRPC call and a chDB insert each)."""
    sink = CountingSink(DirectSink(analytics))
    conf = {"batch_max_size": 10, "inactive_timeout": 100}
    plugin = make_plugin("analytics-logger", conf, env_for(sink))
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    for _ in range(25):
        plugin.log(served(tenant))
    for _ in range(100):
        await asyncio.sleep(0.05)
        if sink.writes == [10, 10]:
            break
    assert sink.writes == [10, 10]
    assert len(plugin.batcher.rows) == 5
    for _ in range(5):  # the batch fills: written
        plugin.log(served(tenant))
    await asyncio.sleep(0.5)
    assert sink.writes == [10, 10, 10] and plugin.batcher.rows == []
    plugin.log(served(tenant))
    await analytics_logger.close()  # the shutdown flush writes what is left, however few
    assert sink.writes == [10, 10, 10, 1]
    assert len(await rows_of(analytics, tenant)) == 31
