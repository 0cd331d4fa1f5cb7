"""The analytics outbox's drainer: rows from the tables' streams (`outbox.py`) into ClickHouse.

It runs in every process that writes ClickHouse itself (its sink is a `DirectSink`: with the
embedded chDB, the control plane that owns it; with a remote ClickHouse, every service), each
as one consumer of the streams' consumer group (`clickhouse`), so several drainers share the
work and never read an entry twice.

A drainer loops: per table, `XREADGROUP ... COUNT 500 STREAMS <stream> >` (no BLOCK: the
pooled client's 1 s timeout; an entry is one row, or a batch of rows from `outbox_sink.py`),
the batch inserted in one INSERT, then `XACK` and `XDEL` (the stream stays
short); `POLL_SECS` between rounds that found no full batch. A batch is inserted whole, with
ClickHouse's `insert_deduplication_token` named by its entries (`outbox:<table>:<first id>:
<last id>:<count>`), and retried until it is written (the drainer refreshes its claim
meanwhile): so each consumer holds at most one unacknowledged batch per stream, and that
batch is exactly the entries pending on it.

Recovery: every `RECOVER_SECS` a drainer looks at the group's other consumers; one whose
entries have been pending for `MIN_IDLE_SECS` (a drainer killed between its insert and its
XACK, or before its insert) has its batch claimed (`XCLAIM` with that idle time: of two
drainers claiming at once, one gets it) and inserted again under the same token: ClickHouse
skips it when the dead drainer had inserted it (`schema.DEDUP_WINDOW`), so no row is written
twice and none is lost. A consumer with nothing pending and idle for `FORGET_SECS` is deleted
from the group (each process has a consumer of its own: host, pid, a random part).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Iterable, Sequence
from typing import Any

from redis.exceptions import ResponseError

from runtime.errors import InvalidRequest
from runtime.stores.analytics import Analytics, AnalyticsSink, DirectSink
from runtime.stores.outbox import FIELD, GROUP, ROWS, stream_key
from runtime.stores.schema import WRITABLE_TABLES

log = logging.getLogger(__name__)

MAX_BATCH = 500
POLL_SECS = 0.25
RECOVER_SECS = 2.0
MIN_IDLE_SECS = 15.0  # a batch pending this long on another consumer: its drainer is gone
FORGET_SECS = 3600.0
RETRY_FIRST_SECS = 0.5
RETRY_MAX_SECS = 5.0
SHUTDOWN_SECS = 5.0  # within the launcher's 10 s grace before SIGKILL

Entry = tuple[str, dict[str, str] | None]  # (stream id, fields); fields None: entry deleted


def consumer_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{os.urandom(3).hex()}"


class OutboxDrain:
    """One consumer of the outbox streams of `tables`, writing into `analytics`."""

    def __init__(
        self,
        kv: Any,
        analytics: Analytics,
        tables: Iterable[str] = sorted(WRITABLE_TABLES),
        *,
        name: str | None = None,
        min_idle_secs: float = MIN_IDLE_SECS,
    ) -> None:
        self.kv = kv
        self.analytics = analytics
        self.tables = tuple(tables)
        self.name = name or consumer_name()
        self.min_idle_ms = int(min_idle_secs * 1000)
        self._task: asyncio.Task[None] | None = None
        self._grouped: set[str] = set()
        self._stopping = False
        self.moved = 0  # rows inserted (or found inserted already) and acknowledged

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="outbox-drain")

    async def close(self) -> None:
        """Stop the loop, then move what the streams hold now (a process stopping gracefully,
        as the in-memory writer flushed at shutdown), `SHUTDOWN_SECS` at most; a batch cut
        short stays pending and is claimed by another drainer."""
        self._stopping = True  # a client that turns the cancellation into its own error
        if self._task is None:
            return
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        self._task = None
        try:
            async with asyncio.timeout(SHUTDOWN_SECS):
                while await self.drain_once():
                    pass
        except Exception as exc:
            log.warning("analytics outbox not drained at shutdown: %r", exc)

    async def _run(self) -> None:
        delay = POLL_SECS
        recovered = time.monotonic()
        while not self._stopping:
            try:
                read = await self.drain_once()
                if time.monotonic() - recovered >= RECOVER_SECS:
                    recovered = time.monotonic()
                    await self.recover()
                delay = 0.0 if read >= MAX_BATCH else POLL_SECS
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the store out: rows wait in their streams
                if self._stopping:
                    return
                log.warning("analytics outbox not drained, trying again: %r", exc)
                delay = min(max(delay, RETRY_FIRST_SECS) * 2, RETRY_MAX_SECS)
            await asyncio.sleep(delay)

    async def drain_once(self) -> int:
        """One round over the tables; the entries read (a full batch or more: more may wait)."""
        read = 0
        for table in self.tables:
            entries = await self._read(table)
            if entries:
                await self._store(table, entries)
                read += len(entries)
        return read

    async def _group(self, key: str) -> None:
        try:
            await self.kv.xgroup_create(key, GROUP, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._grouped.add(key)

    async def _read(self, table: str) -> list[Entry]:
        key = stream_key(table)
        if key not in self._grouped:
            await self._group(key)
        try:
            reply = await self.kv.xreadgroup(GROUP, self.name, {key: ">"}, count=MAX_BATCH)
        except ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            await self._group(key)  # the store was emptied (or is new): the group again
            return []
        return _entries(reply)

    async def _store(self, table: str, entries: Sequence[Entry]) -> None:
        """Insert one batch under its token until it is written; then acknowledge it."""
        await self._insert(table, entries)
        await self._ack(table, entries)

    async def _insert(self, table: str, entries: Sequence[Entry]) -> None:
        key = stream_key(table)
        ids = [entry_id for entry_id, _ in entries]
        lines = [line for _, fields in entries for line in _lines(fields)]
        token = f"outbox:{table}:{ids[0]}:{ids[-1]}:{len(ids)}"
        delay = RETRY_FIRST_SECS
        while lines:
            try:
                await self.analytics.insert_lines(table, lines, token)
                break
            except InvalidRequest as exc:  # not a table rows may go to: nothing to retry
                log.error("%s: %d outbox rows dropped: %s", table, len(lines), exc)
                break
            except Exception as exc:  # the analytics store out: the batch waits, still ours
                if self._stopping:
                    raise
                log.warning(
                    "%s: %d outbox rows not written yet, retrying in %.1f s: %s",
                    table, len(lines), delay, exc,
                )  # fmt: skip
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_SECS)
                await self.kv.xclaim(key, GROUP, self.name, 0, ids, justid=True)

    async def _ack(self, table: str, entries: Sequence[Entry]) -> None:
        key = stream_key(table)
        ids = [entry_id for entry_id, _ in entries]
        async with self.kv.pipeline(transaction=False) as pipe:
            pipe.xack(key, GROUP, *ids)
            pipe.xdel(key, *ids)
            await pipe.execute()
        self.moved += sum(len(_lines(fields)) for _, fields in entries)

    async def recover(self) -> int:
        """Claim and write the batches of consumers gone quiet; the rows recovered."""
        recovered = 0
        for table in self.tables:
            key = stream_key(table)
            try:
                consumers = await self.kv.xinfo_consumers(key, GROUP)
            except ResponseError as exc:
                if "NOGROUP" in str(exc) or "no such key" in str(exc):
                    continue
                raise
            for consumer in consumers:
                name = str(consumer["name"])
                if name == self.name:
                    continue
                if int(consumer["pending"]):
                    recovered += await self._claim(table, name)
                elif int(consumer["idle"]) >= FORGET_SECS * 1000:
                    await self.kv.xgroup_delconsumer(key, GROUP, name)
        return recovered

    async def _claim(self, table: str, consumer: str) -> int:
        key = stream_key(table)
        stale = await self.kv.xpending_range(
            key, GROUP, "-", "+", MAX_BATCH, consumername=consumer, idle=self.min_idle_ms
        )
        if not stale:
            return 0  # its drainer is at work
        ids = [str(p["message_id"]) for p in stale]
        claimed = _claimed(await self.kv.xclaim(key, GROUP, self.name, self.min_idle_ms, ids))
        if not claimed:
            return 0  # another drainer claimed it first
        log.warning("%s: recovering %d outbox rows pending on %s", table, len(claimed), consumer)
        await self._store(table, claimed)
        pending = await self.kv.xpending_range(key, GROUP, "-", "+", 1, consumername=consumer)
        if not pending:
            await self.kv.xgroup_delconsumer(key, GROUP, consumer)
        return sum(len(_lines(fields)) for _, fields in claimed)


def _lines(fields: dict[str, str] | None) -> list[bytes]:
    """An entry's rows as JSON lines: its one row, or a batch's (`outbox_sink.py`)."""
    if not fields:
        return []  # deleted meanwhile
    if FIELD in fields:
        return [fields[FIELD].encode()]
    return fields[ROWS].encode().split(b"\n") if ROWS in fields else []


def _entries(reply: Any) -> list[Entry]:
    """XREADGROUP's reply (RESP2 list or RESP3 map) for one stream: its entries."""
    if not reply:
        return []
    streams = reply.values() if isinstance(reply, dict) else [s[1] for s in reply]
    entries: list[Entry] = []
    for stream in streams:
        if isinstance(stream, list) and stream and isinstance(stream[0], list):
            stream = stream[0]  # RESP3: [[entries]]
        entries.extend((str(entry_id), fields) for entry_id, fields in stream)
    return entries


def _claimed(reply: Any) -> list[Entry]:
    return [(str(entry_id), fields) for entry_id, fields in reply or ()]


def drain_for(kv: Any, sink: AnalyticsSink) -> OutboxDrain | None:
    """The drainer of a process that writes ClickHouse itself, else None."""
    if isinstance(sink, DirectSink):
        return OutboxDrain(kv, sink.analytics)
    return None
