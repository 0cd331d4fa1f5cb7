"""`analytics-logger` (custom, priority 399, log): one row per request into the analytics
store's `gateway.request_log`, with the edge's extra columns (path, request_size,
response_size, client_ip, user_agent, consumer_name).

Rows go through the worker's analytics sink (`env.sink`: straight into ClickHouse when the
worker may write it; otherwise each batch one entry of the analytics outbox, which the chDB
owner's drainer inserts several batches at a time, or over gRPC to it while the key-value
store is out: `runtime/stores/outbox_sink.py`), which writes `INSERT ... FORMAT
JSONEachRow`; `clickhouse_url` and `database` are accepted as the spec lists them, and the
sink's store and the `gateway` database are what is written.

Batching follows APISIX's batch processor: the log phase only appends to a per-worker buffer
(it never waits); a batch is written when `batch_max_size` rows are waiting (full batches
only, one write at a time: the rows that arrive during a write wait for the next full batch or
the timer, rather than each request of a busy turn starting a write of what little is there)
or every `inactive_timeout` seconds (everything waiting); a failed write is retried
`max_retry_count` times `retry_delay` seconds apart, and then its rows stay buffered for the
next flush until they are older than `buffer_duration` seconds, so a store outage shorter than
that loses nothing. One batcher per worker and settings is shared by every route using the
plugin; the data plane calls `close()` at shutdown to write what is left.

Never logged: the Authorization header, API keys (the path column has no query string) and
any other header except User-Agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

from gateways.edge.model.plugins import analytics_logger as declared
from gateways.edge.plugin import Plugin, PluginEnv, RequestContext, parse_conf
from runtime.cancelling import cancel_and_wait

log = logging.getLogger(__name__)
MAX_BUFFERED = 100_000  # rows kept while the store is down, beyond which the oldest go


@dataclass(frozen=True, slots=True)
class AnalyticsLoggerConf:
    table: str
    timeout: int  # milliseconds
    batch_max_size: int
    inactive_timeout: int  # seconds
    buffer_duration: int  # seconds
    max_retry_count: int
    retry_delay: int  # seconds
    tenant_header: str


class Batcher:
    """Rows of one worker for one table and one set of batch settings."""

    def __init__(self, env: PluginEnv, settings: AnalyticsLoggerConf) -> None:
        self.sink = env.sink
        self.metrics = env.metrics
        self.table = settings.table
        self.max_size = settings.batch_max_size
        self.inactive = settings.inactive_timeout
        self.buffer_duration = settings.buffer_duration
        self.retries = settings.max_retry_count
        self.retry_delay = settings.retry_delay
        self.timeout = settings.timeout / 1000
        self.rows: list[dict[str, Any]] = []
        self._lock = asyncio.Lock()
        self._ticker: asyncio.Task[None] | None = None
        self._full: asyncio.Task[None] | None = None  # the write of full batches, if one runs

    def add(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        if self._ticker is None:
            self._ticker = asyncio.get_running_loop().create_task(self._tick())
        if len(self.rows) >= self.max_size and self._full is None:
            self._full = asyncio.get_running_loop().create_task(self.flush(full_only=True))
            self._full.add_done_callback(self._full_done)

    def _full_done(self, task: asyncio.Task[None]) -> None:
        if self._full is task:
            self._full = None

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self.inactive)
            await self.flush()

    async def flush(self, full_only: bool = False) -> None:
        """Write everything buffered (`full_only`: while a full batch is waiting), a batch at
        a time; on a batch that still fails after its retries, keep the rows young enough and
        stop until the next flush."""
        async with self._lock:
            while len(self.rows) >= (self.max_size if full_only else 1):
                batch = self.rows[: self.max_size]
                del self.rows[: self.max_size]
                if not await self._write(batch):
                    cutoff = time.time() - self.buffer_duration
                    kept = [row for row in batch if row["timestamp"] >= cutoff]
                    self._dropped(len(batch) - len(kept))
                    self.rows[:0] = kept
                    if len(self.rows) > MAX_BUFFERED:
                        self._dropped(len(self.rows) - MAX_BUFFERED)
                        del self.rows[: len(self.rows) - MAX_BUFFERED]
                    return

    async def _write(self, batch: list[dict[str, Any]]) -> bool:
        token = uuid.uuid4().hex  # the batch's name on each retry: a write given up on (a
        # timeout, the chDB owner killed before its reply) that landed is not written twice
        for attempt in range(self.retries + 1):
            if attempt:
                await asyncio.sleep(self.retry_delay)
            try:
                async with asyncio.timeout(self.timeout):
                    await self.sink.write(self.table, batch, token)
                return True
            except Exception as exc:  # any sink failure: the store or the gRPC hop to it
                if self.metrics is not None:
                    self.metrics.analytics_write_failures.inc()
                log.warning(
                    "request log batch write failed",
                    extra={"rows": len(batch), "attempt": attempt + 1, "error": repr(exc)},
                )
        return False

    def _dropped(self, count: int) -> None:
        if count and self.metrics is not None:
            self.metrics.analytics_rows_dropped.inc(count)
        if count:
            log.error("request log rows dropped", extra={"rows": count})

    async def close(self) -> None:
        if self._ticker is not None:
            await cancel_and_wait([self._ticker], 2)  # (once may not do: cancelling.py)
            self._ticker = None
        if self._full is not None:
            with contextlib.suppress(Exception):
                await self._full
        await self.flush()


_BATCHERS: dict[tuple[Any, ...], Batcher] = {}
_SETTINGS = ("table", "batch_max_size", "inactive_timeout", "buffer_duration",
             "max_retry_count", "retry_delay", "timeout")  # fmt: skip


def batcher_for(env: PluginEnv, settings: AnalyticsLoggerConf) -> Batcher:
    """The worker's batcher for these settings (routes with the same settings share it)."""
    key = (id(env.sink), *(getattr(settings, name) for name in _SETTINGS))
    batcher = _BATCHERS.get(key)
    if batcher is None:
        batcher = _BATCHERS[key] = Batcher(env, settings)
    return batcher


async def close() -> None:
    """Flush every batcher of this worker (the data plane calls it at shutdown)."""
    for batcher in list(_BATCHERS.values()):
        await batcher.close()
    _BATCHERS.clear()


class AnalyticsLogger(declared.AnalyticsLogger, Plugin):
    """Batches one row per request into the analytics store's `gateway.request_log` (spec custom
    plugin)."""

    def __init__(self, conf: Any, env: PluginEnv) -> None:
        super().__init__(conf, env)
        settings = parse_conf(AnalyticsLoggerConf, self.schema, conf)
        self.tenant_header = settings.tenant_header.lower()
        self.batcher = batcher_for(env, settings)

    def log(self, ctx: RequestContext) -> None:
        headers = ctx.headers
        tenant = headers.get(self.tenant_header) or ctx.tenant_id
        if not tenant and ctx.jwt_claims:
            tenant = ctx.jwt_claims.get("tenant_id")
        traceparent = headers.get("traceparent")
        trace_id = traceparent[3:35] if traceparent and len(traceparent) >= 35 else ""
        now = time.time()
        self.batcher.add(
            {
                "timestamp": now,  # Unix seconds: DateTime64(3) reads it exactly
                "tenant_id": tenant or "",
                "route_id": ctx.route_id,
                "method": ctx.method,
                "status_code": ctx.status,
                "latency_ms": (time.perf_counter() - ctx.started) * 1000,
                "trace_id": trace_id or ctx.request_id,
                "path": ctx.path,
                "request_size": ctx.bytes_received,
                "response_size": ctx.bytes_sent,
                "client_ip": ctx.client_ip,
                "user_agent": headers.get("user-agent", ""),
                "consumer_name": ctx.consumer_name,
            }
        )
