"""Standalone mode across processes: `python -m gateways.edge --workers 2` with EDGE_CONFIG_FILE
serves the file's routes from both processes on one port, and SIGHUP rereads it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from support import ADMIN_API_KEY, MASTER_KEY, free_port
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
    proxy, admin = free_port(), free_port()
    env = {
        **os.environ,
        "MASTER_KEY": MASTER_KEY,
        "ADMIN_API_KEY": ADMIN_API_KEY,
        "REDIS_URL": valkey_url,
        "HTTP_PORT": str(proxy),
        "ADMIN_PORT": str(admin),
        "METRICS_PORT": str(free_port()),
        "GRPC_PORT": str(free_port()),
        "EDGE_CONFIG_FILE": str(config),
    }
    primary = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateways.edge", "--workers", "2", env=env
    )
    try:
        async with aiohttp.ClientSession() as http:
            for _ in range(150):
                try:
                    async with http.get(f"http://127.0.0.1:{admin}/health") as resp:
                        if resp.status == 200:
                            break
                except aiohttp.ClientError:
                    pass
                assert primary.returncode is None, "the edge exited"
                await asyncio.sleep(0.1)
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
