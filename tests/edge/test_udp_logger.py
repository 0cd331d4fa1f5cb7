"""udp-logger through a real data plane (serve_edge) to a real asyncio UDP endpoint: a datagram
per batch, batches too large for one datagram split into whole entries, the request body,
and the schema."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from edge_kit import route, serve_edge, upstream

from gateways.edge import batch
from gateways.edge.log_entry import encode
from gateways.edge.model.schema import check, with_defaults
from gateways.edge.plugins import REGISTRY
from gateways.edge.plugins.udp_logger import datagrams


@pytest.fixture(autouse=True)
async def no_leftovers() -> AsyncIterator[None]:
    yield
    await batch.close()


class UdpReceiver(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.received: asyncio.Queue[bytes] = asyncio.Queue()

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.received.put_nowait(data)

    async def next(self) -> Any:
        return json.loads(await asyncio.wait_for(self.received.get(), 15))


@asynccontextmanager
async def udp_receiver() -> AsyncIterator[tuple[UdpReceiver, int]]:
    loop = asyncio.get_running_loop()
    transport, receiver = await loop.create_datagram_endpoint(
        UdpReceiver, local_addr=("127.0.0.1", 0)
    )
    try:
        yield receiver, transport.get_extra_info("sockname")[1]
    finally:
        transport.close()


def udp_logger(port: int, **conf: Any) -> dict[str, Any]:
    return {"udp-logger": {"host": "127.0.0.1", "port": port, **conf}}


async def test_a_datagram_per_batch() -> None:
    async with upstream() as up, udp_receiver() as (receiver, port), serve_edge() as edge:
        edge.apply(
            routes=[
                route("two", "/two", up, plugins=udp_logger(port, batch_max_size=2)),
                route("one", "/one", up, plugins=udp_logger(port, batch_max_size=1)),
            ]
        )
        for _ in range(2):
            assert (await edge.call("/two", headers={"Cookie": "session=secret"}))[0] == 200
        entries = await receiver.next()
        assert [entry["route_id"] for entry in entries] == ["two", "two"]
        assert entries[0]["request"]["headers"]["cookie"] == "[REDACTED]"
        assert (await edge.call("/one"))[0] == 200
        entry = await receiver.next()  # batch_max_size 1: one object
    assert entry["route_id"] == "one" and entry["response"]["status"] == 200


async def test_the_request_body_when_the_expression_holds() -> None:
    async with upstream() as up, udp_receiver() as (receiver, port), serve_edge() as edge:
        conf = udp_logger(port, batch_max_size=1, include_req_body=True,
                          include_req_body_expr=[["request_method", "==", "PUT"]])  # fmt: skip
        edge.apply(routes=[route("r1", "/api/*", up, plugins=conf)])
        status, echoed, _ = await edge.call("/api/x", method="PUT", data=b'{"n": 1}')
        assert status == 200 and echoed["body"] == '{"n": 1}'
        assert (await receiver.next())["request"]["body"] == '{"n": 1}'
        assert (await edge.call("/api/x", method="POST", data=b"not logged"))[0] == 200
        assert "body" not in (await receiver.next())["request"]


def test_a_batch_too_large_for_a_datagram_is_split_into_whole_entries(
    caplog: pytest.LogCaptureFixture,
) -> None:
    entries = [{"n": i, "pad": "x" * 300} for i in range(10)]
    encoded = [encode(entry) for entry in entries]
    whole = datagrams(encoded, 10)
    assert len(whole) == 1 and json.loads(whole[0]) == entries
    parts = datagrams(encoded, 10, limit=1000)
    assert len(parts) > 1 and all(len(part) <= 1000 for part in parts)
    assert [entry for part in parts for entry in json.loads(part)] == entries
    with caplog.at_level(logging.ERROR, logger="gateways.edge.plugins.udp_logger"):
        kept = datagrams([encode({"pad": "x" * 2000}), encode({"n": 1})], 2, limit=1000)
    assert [json.loads(part) for part in kept] == [[{"n": 1}]]  # the oversized entry is dropped
    assert "does not fit in a datagram" in caplog.text


def test_schema_and_defaults() -> None:
    schema = REGISTRY["udp-logger"].schema
    assert check(schema, {"host": "h"}) == 'property "port" is required'
    assert check(schema, {"port": 3000}) == 'property "host" is required'
    assert check(schema, {"host": "h", "port": 1, "timeout": 0}) == (
        'property "timeout" validation failed: expected 0 to be at least 1'
    )
    assert check(schema, {"host": "h", "port": 1, "inactive_timeout": 0}) == (
        'property "inactive_timeout" validation failed: expected 0 to be at least 1'
    )
    defaults = with_defaults(schema, {"host": "h", "port": 1})
    assert (defaults["timeout"], defaults["name"], defaults["batch_max_size"]) == (
        3,
        "udp logger",
        1000,
    )
    assert (defaults["buffer_duration"], defaults["retry_delay"]) == (60, 1)
