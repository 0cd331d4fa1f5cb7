"""Clients for the real stores: Redis protocol (kv), ClickHouse (analytics), Milvus (vectors).

`Stores` is what a service's servicers receive; `open_stores` builds it from the config the
way every service's `__main__` does, and tests build it from session fixtures instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import redis.asyncio as redis

from runtime.config import ServiceConfig
from runtime.stores.analytics import Analytics, AnalyticsSink, DirectSink
from runtime.stores.kv import connect_kv
from runtime.stores.kv_pipeline import close_pipelined
from runtime.stores.kv_reachability import close_reachability
from runtime.stores.outbox_drain import OutboxDrain, drain_for
from runtime.stores.outbox_sink import OutboxSink
from runtime.stores.shipping import ShippingSink


@dataclass
class Stores:
    kv: redis.Redis
    sink: AnalyticsSink  # where log rows go
    analytics: Analytics | None = None  # set where this process may query ClickHouse
    drain: OutboxDrain | None = field(default=None, init=False)

    async def start_drain(self) -> None:
        """Start the analytics outbox's drainer (`outbox_drain.py`) if this process writes
        ClickHouse itself (on_startup, after the migrations)."""
        if self.drain is None:
            self.drain = drain_for(self.kv, self.sink)
            if self.drain is not None:
                await self.drain.start()

    async def stop_drain(self) -> None:
        if self.drain is not None:
            await self.drain.close()
            self.drain = None

    async def close(self) -> None:
        await self.stop_drain()
        close_pipelined(self.kv)
        close_reachability(self.kv)
        await self.kv.aclose()
        if isinstance(self.sink, OutboxSink | ShippingSink):
            await self.sink.close()
        if self.analytics is not None:
            await self.analytics.close()


def open_stores(config: ServiceConfig) -> Stores:
    kv = connect_kv(config.redis_url)
    if config.owns_analytics:
        analytics = Analytics(config.clickhouse_url, config.clickhouse_password)
        return Stores(kv=kv, sink=DirectSink(analytics), analytics=analytics)
    # Batches go into the outbox, which the owner's drainer inserts several at a time; over
    # gRPC to the owner only while the store is out (`outbox_sink.py`).
    shipping = ShippingSink(config.controlplane_grpc, config.master_key, config.grpc_deadline_secs)
    return Stores(kv=kv, sink=OutboxSink(kv, shipping))
