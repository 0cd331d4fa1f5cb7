"""Work a request path hands off: log rows of one analytics table (appended to the table's
outbox stream in the key-value store, which the answer waits for, `runtime/stores/outbox.py`;
queued in memory and written in batches when the store cannot take them), notifications to
the control plane (NotificationService/CreateNotification over gRPC, with the master key),
and any other detached coroutine (kept referenced, failures logged)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from runtime.cancelling import cancel_and_wait
from runtime.peers import Peer
from runtime.stores.analytics import AnalyticsSink, Row
from runtime.stores.outbox import Outbox
from strata.controlplane.v1 import notification_pb2, notification_pb2_grpc

log = logging.getLogger(__name__)

FLUSH_SECS = 0.2
MAX_BATCH = 500
# While the sink fails (the control plane or the analytics store is out), rows wait and the
# batch is tried again, every RETRY_FIRST_SECS doubling up to RETRY_MAX_SECS; beyond
# MAX_WAITING rows the oldest are dropped (memory stays bounded through any outage).
RETRY_FIRST_SECS = 0.5
RETRY_MAX_SECS = 5.0
MAX_WAITING = 200_000
SHUTDOWN_FLUSH_SECS = 5.0  # part of a service's drain (tests/shared_kit.py `drain_secs`)


class RowWriter:
    """Log rows of one analytics table. With an `outbox`, each row is appended to the table's
    stream in the key-value store at once (the front door's answer waits for it; a drainer
    moves it into ClickHouse), so a killed process loses none. Without one, or when the store
    cannot take it, the row is queued here and written in batches shortly after (never
    awaited by a request); a batch the sink could not take is kept and tried again until it is
    written, so an outage of the analytics store loses no row. The control plane's STS audit
    uses it alone; `Background` adds notifications and other detached work."""

    def __init__(self, sink: AnalyticsSink, table: str, outbox: Outbox | None = None) -> None:
        self.sink = sink
        self.table = table
        self.outbox = outbox
        self._rows: list[Row] = []
        self._flusher: asyncio.Task[None] | None = None

    def log_row(self, row: Row) -> None:
        """Append one row to the outbox, or queue it (written in batches shortly after)."""
        if self.outbox is not None:
            appended = self.outbox.append(self.table, row)
            if appended is not None:
                appended.add_done_callback(lambda done: self._appended(row, done))
                return
        self._queue(row)

    def _appended(self, row: Row, done: asyncio.Future[Any]) -> None:
        exc = None if done.cancelled() else done.exception()
        if exc is None and not done.cancelled():
            return
        assert self.outbox is not None
        if exc is not None:
            self.outbox.failed(exc)
        log.warning("%s: a row not appended to the outbox, queued in memory: %r", self.table, exc)
        self._queue(row)

    def _queue(self, row: Row) -> None:
        self._rows.append(row)
        if len(self._rows) > MAX_WAITING:
            dropped = len(self._rows) - MAX_WAITING
            del self._rows[:dropped]
            log.warning("%s: %d rows dropped (over %d waiting)", self.table, dropped, MAX_WAITING)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_soon(), name=self.table)

    async def _flush_soon(self) -> None:
        await asyncio.sleep(FLUSH_SECS)
        await self._write_all()

    async def _write_all(self) -> None:
        delay = RETRY_FIRST_SECS
        while self._rows:
            batch = self._rows[:MAX_BATCH]
            del self._rows[: len(batch)]  # in flight: not trimmed by log_row meanwhile
            try:
                await self.sink.write(self.table, batch)
            except asyncio.CancelledError:
                self._rows[:0] = batch
                raise
            except Exception as exc:  # the analytics store's failures must not reach clients
                self._rows[:0] = batch  # first in line again
                log.warning(
                    "%s: %d rows not written yet, retrying in %.1f s: %s",
                    self.table, len(self._rows), delay, exc,
                )  # fmt: skip
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_SECS)
                continue
            delay = RETRY_FIRST_SECS

    async def flush(self) -> None:
        """Wait until what is queued is written (shutdown), SHUTDOWN_FLUSH_SECS at most."""
        if self._flusher is None or self._flusher.done():
            return
        done, _ = await asyncio.wait([self._flusher], timeout=SHUTDOWN_FLUSH_SECS)
        if not done:
            await cancel_and_wait([self._flusher], 1)  # (once may not do: cancelling.py)
            log.warning("%s: %d rows not written at shutdown", self.table, len(self._rows))


class Background(RowWriter):
    """One service's detached work. `table` is the analytics table its `log_row` rows go to."""

    def __init__(
        self, sink: AnalyticsSink, controlplane: Peer, table: str, outbox: Outbox | None = None
    ) -> None:
        super().__init__(sink, table, outbox)
        self.controlplane = controlplane
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

    def notify(self, tenant_id: str, notification_type: str, title: str, message: str) -> None:
        """Create a control plane notification, detached."""
        request = notification_pb2.CreateNotificationRequest(
            tenant_id=tenant_id, notification_type=notification_type, title=title, message=message
        )
        stub = notification_pb2_grpc.NotificationServiceStub(self.controlplane.channel)
        self.spawn(self.controlplane.call(stub.CreateNotification, request), notification_type)

    async def close(self) -> None:
        await self.flush()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5)
        await self.controlplane.close()
