"""tcp-logger through a real data plane (serve_edge) to a real asyncio TCP server: one
connection per batch holding its JSON, TLS with the server name of tls_options, log_format,
bodies, and the schema."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from edge_kit import route, serve_edge, upstream
from shared_kit import self_signed

from gateways.edge import batch
from gateways.edge.model.schema import check, with_defaults
from gateways.edge.plugins import REGISTRY


@pytest.fixture(autouse=True)
async def no_leftovers() -> AsyncIterator[None]:
    yield
    await batch.close()


class TcpReceiver:
    """Every connection's bytes, once the logger closes it, land in `received`."""

    def __init__(self) -> None:
        self.received: asyncio.Queue[bytes] = asyncio.Queue()
        self.server_names: list[str | None] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await self.received.put(await reader.read())  # until the logger closes
        writer.close()

    async def next(self) -> Any:
        return json.loads(await asyncio.wait_for(self.received.get(), 15))


@asynccontextmanager
async def tcp_receiver(tls: ssl.SSLContext | None = None) -> AsyncIterator[tuple[TcpReceiver, int]]:
    receiver = TcpReceiver()
    if tls is not None:
        tls.sni_callback = lambda sock, name, context: receiver.server_names.append(name)
    server = await asyncio.start_server(receiver.handle, "127.0.0.1", 0, ssl=tls)
    try:
        yield receiver, server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


def self_signed_server(directory: Path) -> ssl.SSLContext:
    """A server TLS context with a throwaway self-signed certificate."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*self_signed(directory, "logs.internal"))
    return context


def tcp_logger(port: int, **conf: Any) -> dict[str, Any]:
    return {"tcp-logger": {"host": "127.0.0.1", "port": port, **conf}}


async def test_a_batch_per_connection_as_a_json_array() -> None:
    async with upstream() as up, tcp_receiver() as (receiver, port), serve_edge() as edge:
        edge.apply(routes=[route("r1", "/api/*", up, plugins=tcp_logger(port, batch_max_size=2))])
        for path in ("/api/a", "/api/b?apikey=secret"):
            assert (await edge.call(path, headers={"Authorization": "Bearer secret"}))[0] == 200
        entries = await receiver.next()
    assert sorted(entry["request"]["uri"] for entry in entries) == [
        "/api/a",
        "/api/b?apikey=[REDACTED]",
    ]
    assert all(entry["request"]["headers"]["authorization"] == "[REDACTED]" for entry in entries)
    assert {entry["upstream"] for entry in entries} == {f"127.0.0.1:{up}"}


async def test_tls_with_the_server_name_of_tls_options(tmp_path: Path) -> None:
    async with (
        upstream() as up,
        tcp_receiver(self_signed_server(tmp_path)) as (receiver, port),
        serve_edge() as edge,
    ):
        conf = tcp_logger(port, batch_max_size=1, tls=True, tls_options="logs.internal")
        edge.apply(routes=[route("r1", "/api/*", up, plugins=conf)])
        assert (await edge.call("/api/secure"))[0] == 200
        entry = await receiver.next()  # batch_max_size 1: one object
    assert entry["request"]["uri"] == "/api/secure"
    assert receiver.server_names == ["logs.internal"]


async def test_log_format_and_the_response_body() -> None:
    async with upstream() as up, tcp_receiver() as (receiver, port), serve_edge() as edge:
        edge.apply(
            routes=[
                route("fmt", "/fmt", up, plugins=tcp_logger(
                    port, batch_max_size=1,
                    log_format={"host": "$host", "client_ip": "$remote_addr", "st": "$status"})),
                route("body", "/body", up, plugins=tcp_logger(
                    port, batch_max_size=1, include_resp_body=True,
                    include_resp_body_expr=[["status", "==", 200]])),
            ]
        )  # fmt: skip
        assert (await edge.call("/fmt", headers={"Host": "edge.local:9080"}))[0] == 200
        assert await receiver.next() == {
            "host": "edge.local",
            "client_ip": "127.0.0.1",
            "st": 200,
            "route_id": "fmt",
            "service_id": "",
        }
        status, echoed, _ = await edge.call("/body")
        entry = await receiver.next()
    assert status == 200 and json.loads(entry["response"]["body"]) == echoed


def test_schema_and_defaults() -> None:
    schema = REGISTRY["tcp-logger"].schema
    assert check(schema, {"port": 5044}) == 'property "host" is required'
    assert check(schema, {"host": "127.0.0.1"}) == 'property "port" is required'
    assert check(schema, {"host": "h", "port": -1}) == (
        'property "port" validation failed: expected -1 to be at least 0'
    )
    assert check(schema, {"host": "h", "port": 1, "timeout": 0}) == (
        'property "timeout" validation failed: expected 0 to be at least 1'
    )
    assert check(schema, {"host": "h", "port": 1, "tls": "yes"}) == (
        'property "tls" validation failed: wrong type: expected boolean, got string'
    )
    defaults = with_defaults(schema, {"host": "h", "port": 1})
    assert (defaults["tls"], defaults["timeout"], defaults["name"]) == (False, 1000, "tcp logger")
    assert (defaults["batch_max_size"], defaults["max_retry_count"]) == (1000, 0)
    assert (defaults["include_req_body"], defaults["max_req_body_bytes"]) == (False, 524288)
