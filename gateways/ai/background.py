"""Work the request path hands off and never waits for: `ai_request_log` rows (batched into
the analytics sink) and `budget_warning` notifications (the control plane's
NotificationService/CreateNotification over gRPC, with the master key)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from runtime.peers import Peer
from runtime.stores.analytics import AnalyticsSink, Row
from strata.controlplane.v1 import notification_pb2, notification_pb2_grpc

log = logging.getLogger(__name__)

TABLE = "ai_request_log"
FLUSH_SECS = 0.2
MAX_BATCH = 500


class Background:
    def __init__(self, sink: AnalyticsSink, controlplane: Peer) -> None:
        self.sink = sink
        self.controlplane = controlplane
        self._rows: list[Row] = []
        self._flusher: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, work: Coroutine[Any, Any, Any], name: str) -> None:
        """Run `work` detached (kept referenced until done; failures logged)."""
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("%s failed: %s", task.get_name(), task.exception())

    def log_row(self, row: Row) -> None:
        self._rows.append(row)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_soon(), name="ai-request-log")

    async def _flush_soon(self) -> None:
        await asyncio.sleep(FLUSH_SECS)
        while self._rows:
            batch, self._rows = self._rows[:MAX_BATCH], self._rows[MAX_BATCH:]
            try:
                await self.sink.write(TABLE, batch)
            except Exception as exc:  # the analytics store's failures must not reach clients
                log.warning("ai_request_log: %d rows not written: %s", len(batch), exc)

    def budget_warning(self, tenant_id: str, remaining: int, limit: int | None) -> None:
        used = f" ({limit - remaining} of {limit} tokens used)" if limit else ""
        request = notification_pb2.CreateNotificationRequest(
            tenant_id=tenant_id,
            notification_type="budget_warning",
            title="Token budget 80% used",
            message=f"Tenant {tenant_id} has used 80% of its token budget{used}; "
            f"{max(remaining, 0)} tokens are left.",
        )
        stub = notification_pb2_grpc.NotificationServiceStub(self.controlplane.channel)
        self.spawn(self.controlplane.call(stub.CreateNotification, request), "budget-warning")

    async def close(self) -> None:
        if self._flusher is not None:
            await asyncio.wait([self._flusher], timeout=5)
        if self._rows:
            await self._flush_soon()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5)
        await self.controlplane.close()
