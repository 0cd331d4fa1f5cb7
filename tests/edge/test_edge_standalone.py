"""Standalone mode across processes: `python -m gateways.edge --workers 2` with EDGE_CONFIG_FILE
serves the file's routes from both processes on one port, and SIGHUP rereads it."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import time
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from shared_kit import edge_env, start_edge
from test_edge_workers import accepting_pid, children

pytestmark = pytest.mark.timeout(60)


def fetch(port: int, path: str, pids: list[int]) -> tuple[bytes, int | None]:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(f"GET {path} HTTP/1.1\r\nHost: edge\r\n\r\n".encode())
        reply = b""
        while b"\r\n\r\n" not in reply or not reply.rstrip().endswith(b"}"):
            chunk = conn.recv(4096)
            if not chunk:
                break
            reply += chunk
        return reply, accepting_pid(conn, port, pids)


async def test_two_workers_serve_the_standalone_file(valkey_url: str, tmp_path: Path) -> None:
    async def hello(request: web.Request) -> web.Response:
        return web.json_response({"upstream": request.path})

    app = web.Application()
    app.router.add_get("/{tail:.*}", hello)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    upstream = runner.addresses[0][1]
    config = tmp_path / "apisix.yaml"
    config.write_text(
        "routes:\n"
        f"  - {{id: r1, uri: /api/*, upstream: {{nodes: {{'127.0.0.1:{upstream}': 1}}}}}}\n"
        "#END\n"
    )
    env = edge_env(valkey_url, EDGE_CONFIG_FILE=str(config))
    proxy = int(env["HTTP_PORT"])
    primary = await start_edge(env)
    try:
        pids = [primary.pid, *children(primary.pid)]
        assert len(pids) == 2
        seen: set[int | None] = set()
        for _ in range(200):
            reply, pid = await asyncio.to_thread(fetch, proxy, "/api/x", pids)
            assert reply.startswith(b"HTTP/1.1 200") and b'"/api/x"' in reply
            seen.add(pid)
            if seen == set(pids):
                break
            await asyncio.sleep(0.02)
        assert seen == set(pids)
        # SIGHUP to the primary: every process rereads the file
        # (JSON is YAML: the .yaml file may hold either)
        new = {
            "routes": [
                {"id": "r2", "uri": "/v2/*", "upstream": {"nodes": {f"127.0.0.1:{upstream}": 1}}}
            ]
        }
        config.write_text(json.dumps(new))
        primary.send_signal(signal.SIGHUP)
        await asyncio.sleep(1.0)
        for _ in range(20):
            reply, _ = await asyncio.to_thread(fetch, proxy, "/v2/y", pids)
            assert reply.startswith(b"HTTP/1.1 200"), reply[:100]
            reply, _ = await asyncio.to_thread(fetch, proxy, "/api/x", pids)
            assert reply.startswith(b"HTTP/1.1 404")
    finally:
        primary.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(primary.wait(), 20)
        await runner.cleanup()
    assert code == 0


async def test_streams_and_websockets_through_worker_processes(
    valkey_url: str, tmp_path: Path
) -> None:
    """Through `python -m gateways.edge --workers 2`: server-sent events pass one by one as
    the upstream writes them, a 20 MB upload reaches the upstream while the client is still
    sending, and a WebSocket upgrade is proxied both ways."""
    first_chunk_at: list[float] = []
    upload_done_at: list[float] = []

    async def sse(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for i in range(3):
            await response.write(f"data: {i}\n\n".encode())
            await asyncio.sleep(0.3)
        await response.write_eof()
        return response

    async def upload(request: web.Request) -> web.Response:
        size = 0
        async for chunk in request.content.iter_any():
            if not first_chunk_at:
                first_chunk_at.append(time.monotonic())
            size += len(chunk)
        return web.json_response({"received": size})

    async def ws(request: web.Request) -> web.WebSocketResponse:
        socket_ = web.WebSocketResponse()
        await socket_.prepare(request)
        async for message in socket_:
            await socket_.send_str(f"echo {message.data}")
        return socket_

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_get("/sse", sse)
    app.router.add_post("/upload", upload)
    app.router.add_get("/ws", ws)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    nodes = {f"127.0.0.1:{runner.addresses[0][1]}": 1}
    config = tmp_path / "apisix.json"
    config.write_text(
        json.dumps(
            {
                "routes": [
                    {"id": "sse", "uri": "/sse", "upstream": {"nodes": nodes}},
                    {"id": "up", "uri": "/upload", "upstream": {"nodes": nodes}},
                    {
                        "id": "ws",
                        "uri": "/ws",
                        "enable_websocket": True,
                        "upstream": {"nodes": nodes},
                    },
                ]
            }
        )
    )
    env = edge_env(valkey_url, EDGE_CONFIG_FILE=str(config), MAX_BODY_BYTES=str(64 * 1024 * 1024))
    edge = await start_edge(env)
    base = f"http://127.0.0.1:{env['HTTP_PORT']}"
    try:
        async with aiohttp.ClientSession() as http:
            arrivals = []
            async with http.get(f"{base}/sse") as resp:
                assert resp.headers["Content-Type"] == "text/event-stream"
                async for line in resp.content:
                    if line.startswith(b"data:"):
                        arrivals.append(time.monotonic())
            assert len(arrivals) == 3
            assert arrivals[1] - arrivals[0] > 0.2  # each event as it was written

            async def slow_body():  # 20 MB in 1 MB pieces, 50 ms apart
                for _ in range(20):
                    yield b"x" * (1024 * 1024)
                    await asyncio.sleep(0.05)
                upload_done_at.append(time.monotonic())

            async with http.post(f"{base}/upload", data=slow_body()) as resp:
                assert (await resp.json()) == {"received": 20 * 1024 * 1024}
            assert first_chunk_at[0] < upload_done_at[0]  # streamed, not held whole

            async with http.ws_connect(f"{base}/ws") as socket_:
                await socket_.send_str("hello")
                assert (await socket_.receive(timeout=5)).data == "echo hello"
    finally:
        edge.terminate()
        await asyncio.wait_for(edge.wait(), 20)
        await runner.cleanup()
