"""The edge configuration end to end: a route written through an edge's Admin API (:9180,
forwarded to the control plane) reaches every data-plane worker process over xDS; workers
keep serving their last good configuration while the control plane is down and catch up
when it returns; a change made through one control plane replica reaches an edge connected
to another."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from shared_kit import ADMIN_API_KEY, edge_env, free_port, start_edge
from test_edge_config import clear_store
from test_edge_standalone import fetch
from test_edge_workers import children

from controlplane.app import build as build_controlplane
from controlplane.config import ControlPlaneConfig
from runtime.serve import Running, start

pytestmark = pytest.mark.timeout(90)


@dataclass
class EdgeProcess:
    process: asyncio.subprocess.Process
    proxy: int
    admin: int
    metrics: int
    pids: list[int]

    async def put_route(self, route_id: str, route: dict[str, Any]) -> None:
        async with (
            aiohttp.ClientSession() as http,
            http.put(
                f"http://127.0.0.1:{self.admin}/apisix/admin/routes/{route_id}",
                json=route,
                headers={"X-API-KEY": ADMIN_API_KEY},
            ) as resp,
        ):
            assert resp.status in (200, 201), await resp.text()

    async def served_by_every_worker(self, path: str, within: float) -> float:
        """Seconds until every worker process answers `path` with 200 (fresh connections,
        which the kernel spreads over the workers' SO_REUSEPORT sockets)."""
        started = time.monotonic()
        seen: set[int | None] = set()
        while time.monotonic() - started < within:
            reply, pid = await asyncio.to_thread(fetch, self.proxy, path, self.pids)
            if reply.startswith(b"HTTP/1.1 200"):
                seen.add(pid)
                if seen >= set(self.pids):
                    return time.monotonic() - started
            await asyncio.sleep(0.01)
        raise AssertionError(f"{path}: served by {seen} of {self.pids} within {within}s")


@pytest.fixture
async def upstream() -> AsyncIterator[int]:
    async def hello(request: web.Request) -> web.Response:
        return web.json_response({"upstream": request.path})

    app = web.Application()
    app.router.add_get("/{tail:.*}", hello)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    yield runner.addresses[0][1]
    await runner.cleanup()


@pytest.fixture
def control_plane(
    config_for: Callable[..., Any], stores_for: Callable[..., Any]
) -> Callable[[int], Any]:
    """`await control_plane(grpc_port)`: a control plane replica (its own process state, the
    shared Valkey), on a fixed port so that it can be restarted where edges expect it."""

    async def make(port: int) -> Running:
        config = config_for(ControlPlaneConfig, GRPC_PORT=str(port), EDGE_CONFIG_POLL_SECS="0.5")
        return await start(build_controlplane(config, stores_for(config)), "127.0.0.1", 0, port)

    return make


@asynccontextmanager
async def edge(cp_port: int, valkey_url: str, idp: str) -> AsyncIterator[EdgeProcess]:
    """`python -m gateways.edge --workers 2` subscribed to the control plane on `cp_port`."""
    env = edge_env(
        valkey_url,
        IDP_JWKS_URL=f"{idp}/protocol/openid-connect/certs",
        CONTROLPLANE_GRPC=f"127.0.0.1:{cp_port}",
    )
    process = await start_edge(env)
    try:
        for _ in range(50):  # the worker starts just after the primary
            pids = [process.pid, *children(process.pid)]
            if len(pids) == 2:
                break
            await asyncio.sleep(0.1)
        proxy, admin, metrics = (
            int(env[name]) for name in ("HTTP_PORT", "ADMIN_PORT", "METRICS_PORT")
        )
        yield EdgeProcess(process, proxy, admin, metrics, pids)
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), 20)


def route(uri: str, upstream: int) -> dict[str, Any]:
    return {"uri": uri, "upstream": {"nodes": {f"127.0.0.1:{upstream}": 1}}}


async def test_a_change_reaches_every_worker_and_survives_the_control_plane(
    valkey_url: str, idp: str, upstream: int, control_plane: Any
) -> None:
    await clear_store(valkey_url, seeded=True)
    cp_port = free_port()
    cp = await control_plane(cp_port)
    async with edge(cp_port, valkey_url, idp) as proc:
        await proc.put_route("a", route("/a/*", upstream))
        await proc.served_by_every_worker("/a/x", within=5)  # a deadline, not a speed figure

        await cp.stop(grace=0.1)  # the control plane goes away
        await asyncio.sleep(0.5)
        await proc.served_by_every_worker("/a/still", within=2)  # the last good config

        cp = await control_plane(cp_port)  # back: the workers reconnect (with backoff)
        try:
            await proc.put_route("b", route("/b/*", upstream))
            await proc.served_by_every_worker("/b/x", within=15)
        finally:
            await cp.stop(grace=0.1)


async def test_a_change_through_one_replica_reaches_an_edge_of_another(
    valkey_url: str, idp: str, upstream: int, control_plane: Any
) -> None:
    await clear_store(valkey_url, seeded=True)
    one, two = free_port(), free_port()
    first, second = await control_plane(one), await control_plane(two)
    try:
        async with edge(one, valkey_url, idp) as writer, edge(two, valkey_url, idp) as reader:
            await writer.put_route("r", route("/r/*", upstream))
            await reader.served_by_every_worker("/r/x", within=5)  # a deadline, not a speed
    finally:
        await first.stop(grace=0.1)
        await second.stop(grace=0.1)


async def raw_get(port: int, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str]]:
    """One request on a fresh connection (so that a burst spreads over the workers)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    lines = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    writer.write(f"GET {path} HTTP/1.1\r\nHost: edge\r\nConnection: close\r\n{lines}\r\n".encode())
    reply = await reader.read()
    writer.close()
    head = reply.split(b"\r\n\r\n", 1)[0].decode().split("\r\n")
    fields = dict(line.split(": ", 1) for line in head[1:])
    return int(head[0].split()[1]), {k.lower(): v for k, v in fields.items()}


async def test_reference_plugins_across_workers(
    valkey_url: str, idp: str, upstream: int, control_plane: Any, analytics: Any
) -> None:
    """Through both worker processes at once: tenant-rate-limit admits exactly its limit in a
    concurrent burst (429s with the limit headers), prometheus shows one view of both
    workers, and analytics-logger's rows reach gateway.request_log through the control
    plane, without credentials."""
    await clear_store(valkey_url, seeded=True)
    cp_port = free_port()
    cp = await control_plane(cp_port)
    tenant = f"burst-{os.getpid()}-{time.monotonic_ns()}"
    try:
        async with edge(cp_port, valkey_url, idp) as proc:
            await proc.put_route(
                "limited",
                {
                    **route("/limited/*", upstream),
                    "plugins": {
                        "tenant-rate-limit": {"default_count": 20},
                        "analytics-logger": {"inactive_timeout": 1},
                        "prometheus": {},
                        "request-id": {},
                    },
                },
            )
            # Written after it: a worker serving this one has the limited route too (every
            # configuration arrives whole), and the burst's counts stay the burst's own.
            await proc.put_route("warm", route("/warm/*", upstream))
            await proc.served_by_every_worker("/warm/x", within=5)
            headers = {"X-Tenant-ID": tenant, "Authorization": "Bearer not-logged"}
            replies = await asyncio.gather(
                *(raw_get(proc.proxy, f"/limited/{i}", headers) for i in range(60))
            )
            statuses = sorted(status for status, _ in replies)
            assert statuses.count(200) == 20 and statuses.count(429) == 40, statuses
            refused = next(h for s, h in replies if s == 429)
            assert refused["x-ratelimit-limit"] == "20"
            assert refused["x-ratelimit-remaining"] == "0"
            assert refused["x-tenant-id"] == tenant
            assert int(refused["x-ratelimit-reset"]) > time.time()  # a Unix timestamp

            async with (
                aiohttp.ClientSession() as http,
                http.get(f"http://127.0.0.1:{proc.metrics}/apisix/prometheus/metrics") as resp,
            ):
                exposition = await resp.text()
            counted = sum(
                float(line.rsplit(" ", 1)[1])
                for line in exposition.splitlines()
                if line.startswith("apisix_http_status{") and 'route="limited"' in line
            )
            assert f'node="127.0.0.1:{upstream}"' in exposition  # the upstream node served
            assert counted == 60  # the whole burst, whichever worker served each request

            rows: list[dict[str, Any]] = []
            for _ in range(100):
                rows = await analytics.query(
                    "SELECT * FROM gateway.request_log WHERE tenant_id = {t:String}",
                    {"t": tenant},
                )
                if len(rows) >= 60:
                    break
                await asyncio.sleep(0.1)
            assert len(rows) == 60
            assert {r["status_code"] for r in rows} == {200, 429}
            assert {r["route_id"] for r in rows} == {"limited"}
            assert not any("not-logged" in str(value) for r in rows for value in r.values())
    finally:
        await cp.stop(grace=0.1)
