"""APISIX's batch processor (`apisix/utils/batch-processor.lua`), shared by the logger plugins.

    processor = BatchProcessor(conf, send)   # conf: the plugin's batch fields, defaults filled
    processor.push(entry)                    # the log phase: append, never wait

Entries are buffered per processor (one per plugin instance, so per worker). The buffer is cut
into a batch when it holds `batch_max_size` entries, when no entry came for `inactive_timeout`
seconds, or when its oldest entry is `buffer_duration` seconds old. Batches are handed to
`await send(entries, batch_max_size)` one after the other by a background task; a send that
raises is retried `max_retry_count` times `retry_delay` seconds apart, then its entries are
dropped with an error line, as APISIX does. So a slow or dead receiver never slows or fails a
request: the request only appends. What a dead receiver can hold up is bounded: beyond
`max_pending` entries waiting (default ten batches), the oldest are dropped and counted in a
warning.

A configuration push builds new plugin instances, hence new processors; the old one still
sends what it holds: its inactivity timer fires (nothing new comes to it) and its batches go
out. Until then the worker-wide `_PENDING` set keeps it alive; it leaves the set once it holds
nothing, and is then collected with its plugin instance. `close()` (the data plane's stop)
sends what every processor of the worker still holds.

Sending batches one at a time (APISIX runs one timer per batch, concurrently) keeps a hanging
receiver from piling up connections; each plugin bounds its own send with its `timeout`.

analytics-logger keeps its own batcher: its spec'd behaviour differs on purpose (a failed
write keeps its rows for the next flush until they are `buffer_duration` old, so a short store
outage loses nothing, where this processor drops a batch after its retries; one batcher per
worker and settings is shared by every route; its tests drive that batcher directly).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

log = logging.getLogger(__name__)

Send = Callable[[list[Any], int], Awaitable[None]]  # (entries, batch_max_size); raises on failure
DROP_WARNING_EVERY = 10.0  # seconds between two "entries dropped" warnings of one processor


class BatchProcessor:
    """Entries of one plugin instance on their way to `send`, a batch at a time."""

    def __init__(self, conf: Mapping[str, Any], send: Send, max_pending: int | None = None):
        self.name: str = conf.get("name", "log buffer")
        self.batch_max_size: int = conf.get("batch_max_size", 1000)
        self.inactive_timeout: float = conf.get("inactive_timeout", 5)
        self.buffer_duration: float = conf.get("buffer_duration", 60)
        self.max_retry_count: int = conf.get("max_retry_count", 0)
        self.retry_delay: float = conf.get("retry_delay", 1)
        self.max_pending = max_pending or max(10 * self.batch_max_size, 1000)
        self.send = send
        self.buffer: list[Any] = []
        self.batches: deque[list[Any]] = deque()  # cut, waiting for the sender
        self.waiting = 0  # entries in `buffer` and `batches`
        self.dropped = 0  # entries given up on: buffer overflow, or retries exhausted
        self._first_at = self._last_at = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._sender: asyncio.Task[None] | None = None
        self._unreported = 0  # overflow drops not yet in a warning
        self._warned_at = float("-inf")

    def push(self, entry: Any) -> None:
        """Buffer one entry (the log phase); never waits and never raises."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        if not self.buffer:
            self._first_at = now
        self._last_at = now
        self.buffer.append(entry)
        self.waiting += 1
        _PENDING.add(self)
        if len(self.buffer) >= self.batch_max_size:
            self._cut()
        elif self._timer is None:
            first_due = min(self.inactive_timeout, self.buffer_duration)
            self._timer = loop.call_later(first_due, self._on_timer)
        if self.waiting > self.max_pending:
            self._drop_oldest(self.waiting - self.max_pending)

    def _on_timer(self) -> None:
        self._timer = None
        if not self.buffer:
            return
        loop = asyncio.get_running_loop()
        due = min(self._last_at + self.inactive_timeout, self._first_at + self.buffer_duration)
        if loop.time() + 0.001 >= due:  # the loop may wake a hair early
            self._cut()
        else:
            self._timer = loop.call_later(due - loop.time(), self._on_timer)

    def _cut(self) -> None:
        """The buffer becomes a batch for the sender."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.buffer:
            self.batches.append(self.buffer)
            self.buffer = []
        if self._sender is None and self.batches:
            self._sender = asyncio.get_running_loop().create_task(self._send_all())

    async def _send_all(self) -> None:
        try:
            while self.batches:
                batch = self.batches.popleft()
                self.waiting -= len(batch)
                await self._send(batch)
        finally:  # (here, not in a done callback: `flush` sees the change when the task ends)
            self._sender = None
            if not self.buffer and not self.batches:
                _PENDING.discard(self)

    async def _send(self, batch: list[Any]) -> None:
        for attempt in range(self.max_retry_count + 1):
            if attempt:
                await asyncio.sleep(self.retry_delay)
            try:
                await self.send(batch, self.batch_max_size)
                return
            except Exception as exc:  # the receiver's failure, whatever it is
                log.error(
                    "Batch Processor[%s] failed to process entries: %s",
                    self.name,
                    exc or repr(exc),
                    extra={"entries": len(batch), "attempt": attempt + 1},
                )
        self.dropped += len(batch)
        log.error(
            "Batch Processor[%s] exceeded the max_retry_count[%d] dropping the entries",
            self.name,
            self.max_retry_count,
            extra={"entries": len(batch)},
        )

    def _drop_oldest(self, count: int) -> None:
        """Over `max_pending`: the oldest waiting entries go (the receiver cannot keep up)."""
        self.dropped += count
        self.waiting -= count
        self._unreported += count
        while count:
            oldest = self.batches[0] if self.batches else self.buffer
            gone = min(count, len(oldest))
            del oldest[:gone]
            if self.batches and not oldest:
                self.batches.popleft()
            count -= gone
        now = asyncio.get_running_loop().time()
        if now - self._warned_at >= DROP_WARNING_EVERY:
            log.warning(
                "Batch Processor[%s] has %d entries waiting: dropped the %d oldest",
                self.name,
                self.max_pending,
                self._unreported,
                extra={"dropped_total": self.dropped},
            )
            self._warned_at, self._unreported = now, 0

    async def flush(self) -> None:
        """Cut the buffer now and wait until every batch has been sent (or given up on)."""
        self._cut()
        while self._sender is not None:
            await asyncio.wait([self._sender])


# Processors holding entries, so that one whose plugin instance is gone still sends them.
_PENDING: set[BatchProcessor] = set()


async def close() -> None:
    """Send what every processor of this worker holds (the data plane calls it at stop)."""
    for processor in list(_PENDING):
        with contextlib.suppress(Exception):
            await processor.flush()
