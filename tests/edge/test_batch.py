"""APISIX's batch processor (gateways/edge/batch.py), shared by the logger plugins: when a
batch goes, retries, the bound on what a dead receiver holds up, and an owner gone."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from gateways.edge import batch
from gateways.edge.batch import BatchProcessor


@pytest.fixture(autouse=True)
async def no_leftovers() -> AsyncIterator[None]:
    yield
    await batch.close()


class Receiver:
    """A `send` that records each batch; `gate` (when set) holds every send until it opens."""

    def __init__(self) -> None:
        self.batches: list[list[Any]] = []
        self.sent = asyncio.Event()
        self.gate: asyncio.Event | None = None

    async def send(self, entries: list[Any], batch_max_size: int) -> None:
        if self.gate is not None:
            await self.gate.wait()
        self.batches.append(list(entries))
        self.sent.set()


async def test_full_batches_go_at_once_the_rest_after_inactive_timeout() -> None:
    receiver = Receiver()
    processor = BatchProcessor(
        {"batch_max_size": 3, "inactive_timeout": 0.05, "buffer_duration": 60}, receiver.send
    )
    for i in range(7):
        processor.push(i)
    assert processor.buffer == [6] and len(processor.batches) == 2  # cut without waiting
    await asyncio.sleep(0)
    await asyncio.wait_for(receiver.sent.wait(), 10)
    assert receiver.batches[:2] == [[0, 1, 2], [3, 4, 5]]
    while len(receiver.batches) < 3:  # the last entry: once nothing came for 0.05 s
        receiver.sent.clear()
        await asyncio.wait_for(receiver.sent.wait(), 10)
    assert receiver.batches[2] == [6]
    assert processor not in batch._PENDING  # idle: nothing keeps it alive any more


async def test_buffer_duration_cuts_a_batch_that_keeps_growing() -> None:
    receiver = Receiver()
    conf = {"batch_max_size": 1000, "inactive_timeout": 0.5, "buffer_duration": 0.1}
    processor = BatchProcessor(conf, receiver.send)
    pushed = 0
    while not receiver.batches and pushed < 500:  # an entry every 10 ms: never inactive
        processor.push(pushed)
        pushed += 1
        await asyncio.sleep(0.01)
    assert pushed < 500, "the oldest entry's age must cut the batch"
    assert len(receiver.batches[0]) > 1
    assert receiver.batches[0] == list(range(len(receiver.batches[0])))


async def test_a_failed_batch_is_retried_then_dropped(caplog: pytest.LogCaptureFixture) -> None:
    attempts: list[list[int]] = []

    async def refuse(entries: list[Any], batch_max_size: int) -> None:
        attempts.append(list(entries))
        raise ConnectionRefusedError("connection refused")

    conf = {"name": "test logger", "batch_max_size": 2, "max_retry_count": 2, "retry_delay": 0}
    processor = BatchProcessor(conf, refuse)
    processor.push(1)
    processor.push(2)
    with caplog.at_level(logging.ERROR, logger="gateways.edge.batch"):
        await processor.flush()
    assert attempts == [[1, 2]] * 3  # the send and two retries
    assert processor.dropped == 2
    messages = [r.getMessage() for r in caplog.records]
    assert "Batch Processor[test logger] failed to process entries: connection refused" in messages
    assert (
        "Batch Processor[test logger] exceeded the max_retry_count[2] dropping the entries"
        in messages
    )


async def test_a_stuck_receiver_holds_up_at_most_max_pending(
    caplog: pytest.LogCaptureFixture,
) -> None:
    receiver = Receiver()
    receiver.gate = asyncio.Event()
    processor = BatchProcessor({"batch_max_size": 1, "name": "stuck"}, receiver.send, 3)
    processor.push(0)
    await asyncio.sleep(0)  # the sender takes entry 0 and waits on the receiver
    with caplog.at_level(logging.WARNING, logger="gateways.edge.batch"):
        for i in range(1, 8):
            processor.push(i)  # never waits, whatever the receiver does
    assert processor.waiting == 3 and processor.dropped == 4
    assert any("dropped the 1 oldest" in r.getMessage() for r in caplog.records)
    receiver.gate.set()
    await processor.flush()
    assert receiver.batches == [[0], [5], [6], [7]]  # the oldest waiting entries went


async def test_a_processor_whose_plugin_is_gone_still_sends() -> None:
    receiver = Receiver()

    def log_once() -> None:
        processor = BatchProcessor({"batch_max_size": 10, "inactive_timeout": 0.05}, receiver.send)
        processor.push("last words")

    log_once()  # the processor's only owner is gone
    gc.collect()
    await asyncio.wait_for(receiver.sent.wait(), 10)
    assert receiver.batches == [["last words"]]


async def test_close_sends_what_every_processor_holds() -> None:
    receiver = Receiver()
    one = BatchProcessor({"batch_max_size": 10, "inactive_timeout": 60}, receiver.send)
    two = BatchProcessor({"batch_max_size": 10, "inactive_timeout": 60}, receiver.send)
    one.push("a")
    two.push("b")
    await batch.close()
    assert sorted(receiver.batches) == [["a"], ["b"]]
    assert not batch._PENDING
