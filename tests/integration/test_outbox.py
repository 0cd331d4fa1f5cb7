"""The analytics outbox against the real stores (the session's Valkey cluster, chDB): rows
appended on the request path and awaited before the answer, moved into ClickHouse by a
drainer; a drainer that dies between its insert and its acknowledgement, or before its insert,
has its batch recovered by another without a row written twice; an unreachable store sends
rows the old way (memory, then the sink) without failing anyone."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from shared_kit import free_port

from runtime.background import RowWriter
from runtime.errors import InvalidRequest
from runtime.stores.analytics import Analytics, DirectSink
from runtime.stores.kv import connect_kv, ready_kv
from runtime.stores.kv_pipeline import close_pipelined
from runtime.stores.kv_reachability import close_reachability
from runtime.stores.outbox import GROUP, Outbox, hold_rows, rows_held, stream_key
from runtime.stores.outbox_drain import OutboxDrain
from runtime.stores.outbox_sink import OutboxSink

pytestmark = pytest.mark.kv_cluster

TABLE = "ai_request_log"


class Refusing:
    """A sink for writers whose rows must all go to the outbox."""

    async def write(self, table: str, rows: Any, token: str | None = None) -> int:
        raise AssertionError(f"{len(rows)} rows fell back to memory")


NO_SINK = Refusing()


@pytest.fixture
async def kv(valkey_url: str) -> AsyncIterator[Any]:
    client = connect_kv(valkey_url)
    await ready_kv(client)
    yield client
    close_pipelined(client)
    close_reachability(client)
    await client.aclose()


def row(tenant: str, n: int) -> dict[str, Any]:
    return {
        "timestamp": time.time() + n / 1000,
        "tenant_id": tenant,
        "model": "echo-1",
        "provider": "echo",
        "tokens_prompt": 3,
        "tokens_completion": 5,
        "cache_hit": False,
        "pii_detected": False,
        "latency_ms": 1.5,
        "trace_id": f"{tenant}-{n}",
    }


async def trace_ids(analytics: Analytics, tenant: str) -> list[str]:
    rows = await analytics.query(
        f"SELECT trace_id FROM gateway.{TABLE} WHERE tenant_id = {{t:String}} ORDER BY trace_id",
        {"t": tenant},
    )
    return [r["trace_id"] for r in rows]


async def until_rows(analytics: Analytics, tenant: str, count: int) -> list[str]:
    for _ in range(100):
        found = await trace_ids(analytics, tenant)
        if len(found) >= count:
            return found
        await asyncio.sleep(0.1)
    return await trace_ids(analytics, tenant)


async def pending_of(kv: Any, consumer: str) -> int:
    entries = await kv.xpending_range(stream_key(TABLE), GROUP, "-", "+", 1000,
                                      consumername=consumer)  # fmt: skip
    return len(entries)


async def appended(kv: Any, tenant: str, count: int) -> None:
    """`count` rows of `tenant` logged as a request does, and awaited as its answer does."""
    writer = RowWriter(NO_SINK, TABLE, Outbox(kv))
    with hold_rows() as held:
        for n in range(count):
            writer.log_row(row(tenant, n))
        assert len(held) == count
        await rows_held(held)
    assert writer._rows == []  # none fell back to memory


async def read_by_a_drainer(
    kv: Any, analytics: Analytics, tenant: str, count: int
) -> tuple[OutboxDrain, Any]:
    """`count` rows of `tenant` appended, then read by a drainer `dead-<tenant>` (which the
    test treats as killed: it never acknowledges them); the drainer and what it read."""
    await appended(kv, tenant, count)
    dead = OutboxDrain(kv, analytics, name=f"dead-{tenant}")
    entries = await dead._read(TABLE)
    assert sum(1 for _, f in entries if f and tenant in f["row"]) == count
    return dead, entries


async def test_a_logged_row_is_in_the_stream_when_the_answer_may_leave(
    kv: Any, analytics: Analytics
) -> None:
    tenant = f"ob-{uuid.uuid4().hex[:8]}"
    before = await kv.xlen(stream_key(TABLE))
    await appended(kv, tenant, 3)
    assert await kv.xlen(stream_key(TABLE)) >= before + 3  # no drainer here yet
    drain = OutboxDrain(kv, analytics)
    await drain.start()
    try:
        assert await until_rows(analytics, tenant, 3) == [f"{tenant}-{n}" for n in range(3)]
    finally:
        await drain.close()


async def test_a_drainer_killed_between_insert_and_ack_leaves_no_duplicate(
    kv: Any, analytics: Analytics
) -> None:
    tenant = f"ob-{uuid.uuid4().hex[:8]}"
    dead, entries = await read_by_a_drainer(kv, analytics, tenant, 5)
    await dead._insert(TABLE, entries)  # written, then killed before XACK
    assert await trace_ids(analytics, tenant) == [f"{tenant}-{n}" for n in range(5)]
    assert await pending_of(kv, dead.name) == len(entries)
    heir = OutboxDrain(kv, analytics, name=f"heir-{tenant}", min_idle_secs=0.2)
    await asyncio.sleep(0.3)
    assert await heir.recover() >= 5
    assert await trace_ids(analytics, tenant) == [f"{tenant}-{n}" for n in range(5)]  # once
    assert await pending_of(kv, dead.name) == 0
    assert await pending_of(kv, heir.name) == 0


async def test_a_dead_consumers_pending_batch_is_claimed_and_written_by_another(
    kv: Any, analytics: Analytics
) -> None:
    tenant = f"ob-{uuid.uuid4().hex[:8]}"
    dead, entries = await read_by_a_drainer(kv, analytics, tenant, 4)  # killed before its insert
    heir = OutboxDrain(kv, analytics, name=f"heir-{tenant}", min_idle_secs=0.2)
    assert await heir.recover() == 0  # not idle long enough: its drainer may be at work
    assert await pending_of(kv, dead.name) == len(entries)
    await asyncio.sleep(0.3)
    assert await heir.recover() >= 4
    assert await trace_ids(analytics, tenant) == [f"{tenant}-{n}" for n in range(4)]
    assert await pending_of(kv, dead.name) == 0
    consumers = {c["name"] for c in await kv.xinfo_consumers(stream_key(TABLE), GROUP)}
    assert dead.name not in consumers  # forgotten once its batch was recovered


async def test_two_drainers_share_the_stream_and_write_each_row_once(
    kv: Any, analytics: Analytics
) -> None:
    tenant = f"ob-{uuid.uuid4().hex[:8]}"
    drains = [OutboxDrain(kv, analytics) for _ in range(2)]
    for d in drains:
        await d.start()
    try:
        for batch in range(4):
            await appended(kv, f"{tenant}", 1)  # trace ids repeat per call: count rows
            await asyncio.sleep(0.05 * batch)
        await appended(kv, f"{tenant}-many", 50)
        found = await until_rows(analytics, f"{tenant}-many", 50)
        assert len(found) == 50 and len(set(found)) == 50
        assert len(await until_rows(analytics, tenant, 4)) == 4
    finally:
        for d in drains:
            await d.close()


async def test_an_unreachable_store_sends_rows_the_old_way(analytics: Analytics) -> None:
    tenant = f"ob-{uuid.uuid4().hex[:8]}"
    dead_kv = connect_kv(f"redis://127.0.0.1:{free_port()}/0")
    writer = RowWriter(DirectSink(analytics), TABLE, Outbox(dead_kv))
    try:
        with hold_rows() as held:
            writer.log_row(row(tenant, 0))  # the append fails: queued in memory
            await rows_held(held)
        writer.log_row(row(tenant, 1))  # the store is known down now: memory at once
        assert await until_rows(analytics, tenant, 2) == [f"{tenant}-0", f"{tenant}-1"]
    finally:
        await writer.flush()
        close_pipelined(dead_kv)
        close_reachability(dead_kv)
        await dead_kv.aclose()


async def test_a_batch_inserted_twice_under_its_token_is_written_once(
    analytics: Analytics,
) -> None:
    tenant = f"ob-{uuid.uuid4().hex[:8]}"
    lines = [json.dumps(row(tenant, n)).encode() for n in range(3)]
    for _ in range(2):
        await analytics.insert_lines(TABLE, lines, f"outbox:test:{tenant}")
    await analytics.insert(TABLE, [row(tenant, 9)])
    await analytics.insert(TABLE, [row(tenant, 9)])  # the same rows, not deduplicated
    assert await trace_ids(analytics, tenant) == [
        f"{tenant}-0", f"{tenant}-1", f"{tenant}-2", f"{tenant}-9", f"{tenant}-9"
    ]  # fmt: skip


async def test_a_named_batch_written_again_through_a_sink_is_written_once(
    analytics: Analytics,
) -> None:
    """The edge's batches (and the log-ingest RPC's): a retry of a write given up on that
    had landed (its reply lost) writes nothing twice."""
    tenant = f"ob-{uuid.uuid4().hex[:8]}"
    sink = DirectSink(analytics)
    rows = [row(tenant, n) for n in range(2)]
    for _ in range(2):
        assert await sink.write(TABLE, rows, f"batch-{tenant}") == 2
    assert await trace_ids(analytics, tenant) == [f"{tenant}-0", f"{tenant}-1"]


class Recording:
    """A fallback sink that records what it was given (the log-ingest RPC's place)."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, int, str | None]] = []

    async def write(self, table: str, rows: Any, token: str | None = None) -> int:
        self.writes.append((table, len(rows), token))
        return len(rows)


async def test_a_batch_sent_through_the_outbox_sink_is_one_entry_appended_once(
    kv: Any, analytics: Analytics
) -> None:
    """A process that does not own ClickHouse (the edge's analytics-logger): its batch is one
    stream entry; a retry under the same name appends nothing; the drainer moves the batch's
    rows and single rows in one insert, each row once."""
    tenant = f"ob-{uuid.uuid4().hex[:8]}"
    fallback = Recording()
    sink = OutboxSink(kv, fallback)
    before = await kv.xlen(stream_key(TABLE))
    rows = [row(tenant, n) for n in range(30)]
    for _ in range(2):  # the second: a retry of a write whose reply was lost
        assert await sink.write(TABLE, rows, f"batch-{tenant}") == 30
    assert await sink.write(TABLE, [row(tenant, 30)]) == 1  # unnamed: appended as given
    assert await kv.xlen(stream_key(TABLE)) == before + 2
    await appended(kv, f"{tenant}-one", 1)  # a single row's entry beside them
    assert fallback.writes == []
    drain = OutboxDrain(kv, analytics)
    try:
        assert await drain.drain_once() >= 3
    finally:
        await drain.close()
    found = await trace_ids(analytics, tenant)
    assert found == sorted(f"{tenant}-{n}" for n in range(31))
    assert await trace_ids(analytics, f"{tenant}-one") == [f"{tenant}-one-0"]


async def test_the_outbox_sink_ships_over_the_fallback_while_the_store_is_out() -> None:
    dead_kv = connect_kv(f"redis://127.0.0.1:{free_port()}/0")
    fallback = Recording()
    sink = OutboxSink(dead_kv, fallback)
    try:
        assert await sink.write(TABLE, [row("t", 0)], "named") == 1  # the append fails
        assert await sink.write(TABLE, [row("t", 1), row("t", 2)]) == 2  # known down: at once
        assert fallback.writes == [(TABLE, 1, "named"), (TABLE, 2, None)]
        with pytest.raises(InvalidRequest, match="unknown analytics table 'nope'"):
            await sink.write("nope", [row("t", 3)])
    finally:
        close_pipelined(dead_kv)
        close_reachability(dead_kv)
        await dead_kv.aclose()
