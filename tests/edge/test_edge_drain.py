"""The edge's data plane drains (SIGTERM, as in a rolling update): every request already begun
is answered, with `connection: close`, by the primary and its workers alike; idle keep-alive
connections are closed at once; nothing new is accepted. Before, a SIGTERM closed only the
listener and the process exited in ~0.2 s, cutting every request in flight. In-process: a
request still running after the drain's grace is cut, and the drain says how many were."""

from __future__ import annotations

import asyncio
import signal
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from edge_kit import standalone_file, upstream
from shared_kit import edge_env, start_edge

from runtime.http1.server import Exchange, serve

pytestmark = pytest.mark.timeout(60)

SLOW_SECS = 1.5  # the upstream's answer time: the drain begins while every request waits


async def fetch(port: int, path: str) -> bytes:
    """One GET on a new connection, read until the peer closes (the drain's answers say
    `connection: close`)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: edge\r\n\r\n".encode())
    try:
        async with asyncio.timeout(15):
            return await reader.read()
    finally:
        writer.close()


@pytest.fixture
async def slow_upstream() -> AsyncIterator[int]:
    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(SLOW_SECS)
        return web.json_response({"upstream": request.path})

    async with upstream(slow) as port:
        yield port


@pytest.mark.parametrize("workers", [1, 2])
async def test_a_sigterm_answers_every_request_in_flight(
    valkey_url: str, tmp_path: Path, slow_upstream: int, workers: int
) -> None:
    config = standalone_file(tmp_path, slow_upstream)
    env = edge_env(valkey_url, EDGE_CONFIG_FILE=str(config))
    proxy = int(env["HTTP_PORT"])
    primary = await start_edge(env, workers=workers)
    idle_reader, idle = await asyncio.open_connection("127.0.0.1", proxy)  # no request on it
    try:
        calls = [asyncio.create_task(fetch(proxy, f"/api/{i}")) for i in range(8)]
        await asyncio.sleep(SLOW_SECS / 3)  # every request has reached the upstream
        began = time.monotonic()
        primary.send_signal(signal.SIGTERM)
        async with asyncio.timeout(15):
            assert await idle_reader.read() == b""  # closed, not left to the end
        idle_closed = time.monotonic() - began
        replies = await asyncio.gather(*calls)
        code = await asyncio.wait_for(primary.wait(), 30)
    finally:
        idle.close()
        if primary.returncode is None:
            primary.kill()
    for i, reply in enumerate(replies):
        assert reply.startswith(b"HTTP/1.1 200"), reply[:200]
        assert b"\r\nconnection: close\r\n" in reply.lower(), reply[:400]
        assert reply.endswith(b'{"upstream": "/api/%d"}' % i), reply[-100:]
    assert idle_closed < SLOW_SECS, idle_closed  # before any request in flight was answered
    assert code == 0
    with pytest.raises(OSError):  # nothing listens any more
        socket.create_connection(("127.0.0.1", proxy), timeout=2).close()


async def test_a_request_still_running_after_the_grace_is_cut() -> None:
    began = asyncio.Event()

    async def never(exchange: Exchange) -> None:
        began.set()
        await asyncio.Event().wait()

    listening = await serve(never, "127.0.0.1", 0, 1024)
    port = listening.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    await began.wait()
    assert await listening.drain(grace=0.2) == 1
    async with asyncio.timeout(5):
        assert await reader.read() == b""  # closed without an answer
    assert not listening.connections
    writer.close()
