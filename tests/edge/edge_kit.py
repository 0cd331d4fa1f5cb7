"""Building plugins and request contexts in the edge plugin tests, and an in-process data
plane on a real socket (`serve_edge`) with real aiohttp upstreams (`upstream`)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from shared_kit import ADMIN_API_KEY, MASTER_KEY, edge_snapshot

from gateways.edge.config import EdgeConfig
from gateways.edge.dataplane import DataPlane
from gateways.edge.model.schema import check, with_defaults
from gateways.edge.plugin import Plugin, PluginEnv, RequestContext
from gateways.edge.plugins import REGISTRY


def make_plugin(name: str, conf: dict[str, Any], env: PluginEnv | None = None) -> Any:
    """The plugin as the data plane builds it: schema-checked, defaults filled in."""
    cls: type[Plugin] = REGISTRY[name]
    problem = check(cls.schema, conf)
    assert problem is None, problem
    return cls(with_defaults(cls.schema, conf), env or PluginEnv())


def request(
    path: str = "/api/things",
    headers: dict[str, str] | None = None,
    query: str = "",
    method: str = "GET",
    route_id: str = "r1",
    client_ip: str = "127.0.0.1",
) -> RequestContext:
    ctx = RequestContext(
        method, path, query, {k.lower(): v for k, v in (headers or {}).items()}, client_ip,
        time.perf_counter(),
    )  # fmt: skip
    ctx.route_id = route_id
    return ctx


def burst(args: tuple[str, str, str, int, float]) -> int:
    """In a child process: `requests` concurrent access() calls of tenant-rate-limit against
    the store at `kv_url`, started at wall time `start`; returns how many were admitted."""
    import asyncio

    from runtime.stores.kv import connect_kv

    kv_url, tenant, route_id, requests, start = args

    async def run() -> int:
        env = PluginEnv()
        env.kv = connect_kv(kv_url)
        plugin = make_plugin("tenant-rate-limit", {"default_count": 50, "time_window": 60}, env)
        await env.kv.ping()  # connect before the start line
        await asyncio.sleep(max(0.0, start - time.time()))
        replies = await asyncio.gather(
            *(
                plugin.access(request(headers={"x-tenant-id": tenant}, route_id=route_id))
                for _ in range(requests)
            )
        )
        await env.kv.aclose()
        assert all(r is None or r.status == 429 for r in replies)
        return sum(r is None for r in replies)

    return asyncio.run(run())


def count_requests(args: tuple[str, int, int]) -> int:
    """In a child process: the prometheus plugin logs `n` requests of route r1 (status
    `status`) into multiprocess metrics in `directory`; returns the child's pid."""
    import os

    from gateways.edge.metrics import EdgeMetrics

    directory, n, status = args
    env = PluginEnv()
    env.metrics = EdgeMetrics(directory)
    plugin = make_plugin("prometheus", {}, env)
    for _ in range(n):
        ctx = request(route_id="r1")
        ctx.route = {"uri": "/api/*", "host": "edge.local"}
        ctx.status, ctx.bytes_received, ctx.bytes_sent = status, 100, 1000
        ctx.upstream_latency = 0.002
        plugin.log(ctx)
    return os.getpid()


# ---- a data plane on a real socket, with real upstreams -------------------------------------

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
EDGE_CONFIG = EdgeConfig.from_env(
    {"ADMIN_API_KEY": ADMIN_API_KEY, "MASTER_KEY": MASTER_KEY, "MAX_BODY_BYTES": str(64 << 20)}
)


@asynccontextmanager
async def upstream(handler: Handler | None = None) -> AsyncIterator[int]:
    """An aiohttp upstream on a free port answering every path with `handler` (default
    `echo`); yields the port."""
    app = web.Application(client_max_size=64 << 20)
    app.router.add_route("*", "/{tail:.*}", handler or echo)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()


def standalone_file(directory: Path, upstream_port: int) -> Path:
    """A standalone configuration (EDGE_CONFIG_FILE) of one route, `/api/*` to the upstream."""
    config = directory / "apisix.yaml"
    config.write_text(
        "routes:\n"
        f"  - {{id: r1, uri: /api/*, upstream: {{nodes: {{'127.0.0.1:{upstream_port}': 1}}}}}}\n"
        "#END\n"
    )
    return config


async def echo(request: web.Request) -> web.Response:
    """Tells what it received: path with query, method, headers (lower case), body."""
    body = await request.read()
    return web.json_response(
        {
            "path": request.path_qs,
            "method": request.method,
            "headers": {k.lower(): v for k, v in request.headers.items()},
            "body": body.decode("utf-8", "replace"),
        }
    )


class Edge:
    """One in-process data plane on a free port: `apply(routes=[...], upstreams=[...])` swaps in
    a snapshot, `call(...)` sends a request with aiohttp and returns (status, body, headers)
    where body is the JSON value when it parses, else bytes."""

    def __init__(self, plane: DataPlane, port: int) -> None:
        self.plane, self.port = plane, port
        self.url = f"http://127.0.0.1:{port}"
        self.revision = 1

    def apply(self, **resources: Any) -> None:
        self.revision += 1
        self.plane.apply(edge_snapshot(self.revision, **resources))

    async def call(self, path: str, method: str = "GET", **kwargs: Any) -> tuple[int, Any, Any]:
        async with (
            aiohttp.ClientSession() as http,
            http.request(method, self.url + path, allow_redirects=False, **kwargs) as resp,
        ):
            body = await resp.read()
            try:
                data: Any = json.loads(body)
            except ValueError:
                data = body
            return resp.status, data, resp.headers


def route(rid: str, uri: str, port: int, **extra: Any) -> dict[str, Any]:
    """A route to 127.0.0.1:`port`; `extra` adds fields (`plugins={...}`, `methods=[...]`)."""
    return {"id": rid, "uri": uri, "upstream": {"nodes": {f"127.0.0.1:{port}": 1}}, **extra}


@asynccontextmanager
async def serve_edge(
    env: PluginEnv | None = None, config: EdgeConfig | None = None
) -> AsyncIterator[Edge]:
    """A data plane serving on 127.0.0.1:<free port> with `env` (e.g. `env.kv` for plugins
    that use the key-value store) and `config` (default: `env.config`, else EDGE_CONFIG)."""
    env = env or PluginEnv()
    plane = DataPlane(config or env.config or EDGE_CONFIG, env)
    server = await plane.serve("127.0.0.1", 0)
    try:
        yield Edge(plane, server.sockets[0].getsockname()[1])
    finally:
        server.close()
        await plane.close_pools()


def conf_problem(name: str, conf: dict[str, Any]) -> str | None:
    """What the Admin API (and the data plane) says of a plugin configuration: its schema's
    first problem, then the plugin's `check_conf` on it with defaults; None when accepted."""
    cls: type[Plugin] = REGISTRY[name]
    return check(cls.schema, conf) or cls.check_conf(with_defaults(cls.schema, conf))
