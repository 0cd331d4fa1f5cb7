"""What the API key and rate limit tests share: the control plane and an edge (both in-process,
the edge's data plane fed by the control plane over xDS, as in production), HTTP helpers for
the control plane's API, the edge's Admin API and its data plane, and tenants written where
the tenants service keeps them (`cp:tenants`), removed again afterwards."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web
from shared_kit import ADMIN_API_KEY, MASTER_KEY, keyring_for_tests

from controlplane.app import build as build_controlplane
from controlplane.config import ControlPlaneConfig
from controlplane.edge_config.keys import ALL, SEEDED
from controlplane.edge_config.servicer import EdgeConfigServicer
from controlplane.edge_config.store import EdgeConfigStore
from gateways.edge.app import build as build_edge
from gateways.edge.config import EdgeConfig
from gateways.edge.keys import rate_limit_override
from runtime.stores.kv import connect_kv
from runtime.testing import Serving, serving

MASTER = f"Bearer {MASTER_KEY}"
TENANTS = "cp:tenants"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


async def call(
    base: str,
    method: str,
    path: str,
    *,
    token: str | None = MASTER,
    body: Any = None,
    raw: str | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any, Any]:
    """One HTTP request; (status, JSON body or text, headers)."""
    sent = dict(headers or {})
    if token is not None:
        sent["Authorization"] = token if token.startswith("Bearer ") else f"Bearer {token}"
    data = raw if raw is not None else (None if body is None else json.dumps(body))
    if data is not None:
        sent.setdefault("Content-Type", "application/json")
    async with (
        aiohttp.ClientSession() as http,
        http.request(method, base + path, data=data, headers=sent) as resp,
    ):
        text = await resp.text()
        try:
            parsed: Any = json.loads(text)
        except ValueError:
            parsed = text
        return resp.status, parsed, resp.headers


async def eventually(check: Callable[[], Awaitable[bool]], within: float = 5.0) -> None:
    """Poll `check` until it holds (an edge applies a change pushed over xDS)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"not within {within}s")
        await asyncio.sleep(0.02)


async def clear_edge_store(valkey_url: str) -> None:
    """An empty edge configuration, marked seeded so the control plane leaves it empty (other
    tests' resources, possibly of plugins only they register, must not reach this edge)."""
    kv = connect_kv(valkey_url)
    keys = [k async for k in kv.scan_iter(ALL)]
    if keys:
        await kv.delete(*keys)
    await kv.set(SEEDED, "0")
    await kv.aclose()


@dataclass
class Tenants:
    """Tenants written into `cp:tenants` for a test; `acme`/`globex` (the dev IdP users'
    tenants) are added only when absent. Everything made for them is removed at the end."""

    kv: Any
    added: list[str] = field(default_factory=list)
    routes: set[str] = field(default_factory=set)  # edge routes made for the test

    async def put_routes(self, *route_ids: str) -> None:
        """Edge routes the keys may name, written through the edge configuration's own
        write path (as the Admin API does)."""
        self.routes.update(route_ids)
        upstream = {"nodes": {"127.0.0.1:9": 1}}
        await EdgeConfigServicer(EdgeConfigStore(self.kv), keyring_for_tests()).write(
            lambda state: (
                [("routes", r, {"uri": f"/{r}/*", "upstream": upstream}) for r in route_ids],
                None,
            )
        )

    async def add(self, tenant_id: str | None = None) -> str:
        tenant_id = tenant_id or unique("t")
        record = {"id": tenant_id, "name": tenant_id, "plan": "free", "status": "active"}
        if await self.kv.hsetnx(TENANTS, tenant_id, json.dumps(record)):
            self.added.append(tenant_id)
        return tenant_id

    async def cleanup(self, names: set[str]) -> None:
        """Remove the tenants added here and the keys, requests, names and limits the test
        made (key names in `names`)."""
        for tenant in self.added:
            await self.kv.hdel(TENANTS, tenant)
            limits = [k async for k in self.kv.scan_iter(rate_limit_override(tenant) + "*")]
            if limits:
                await self.kv.delete(*limits)
            await self.kv.delete(f"cp:notifications:{tenant}")
        for hash_name in ("cp:key-requests", "cp:api-keys"):
            for id_, raw in (await self.kv.hgetall(hash_name)).items():
                record = json.loads(raw)
                if record["name"] in names:
                    await self.kv.hdel(hash_name, id_)
                    if record.get("key_hash"):  # the gateways' entry of the key
                        await self.kv.hdel("cp:api-key-digests", record["key_hash"])
        if names:
            await self.kv.hdel("cp:key-names", *names)
        # Their edge consumers and the groups made for the tenants, through the edge
        # configuration's own write path (one revision, as the Admin API would).
        added = set(self.added)

        def plan(state: Any) -> tuple[list[Any], None]:
            consumers = [("consumers", n, None) for n in names if n in state.of("consumers")]
            users = {
                str(c.value.get("group_id"))
                for n, c in state.of("consumers").items()
                if n not in names
            }
            groups = [
                ("consumer_groups", g, None)
                for g in state.of("consumer_groups")
                if g in added and g not in users
            ]
            routes = [("routes", r, None) for r in self.routes]
            return [*consumers, *groups, *routes], None

        await EdgeConfigServicer(EdgeConfigStore(self.kv), keyring_for_tests()).write(plan)


@dataclass
class Platform:
    cp: Serving
    edge: Serving | None = None

    async def api(self, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        status, body, _ = await call(self.cp.http_url, method, path, **kwargs)
        return status, body

    async def admin(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """The edge's Admin API (:9180 in production), forwarded to the control plane."""
        assert self.edge is not None
        status, reply, _ = await call(
            self.edge.http_url,
            method,
            "/apisix/admin" + path,
            token=None,
            body=body,
            headers={"X-API-KEY": ADMIN_API_KEY},
        )
        return status, reply

    async def proxy(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, Any, Any]:
        """A request to the edge's data plane."""
        assert self.edge is not None
        return await call(self.edge.extra_url(0), "GET", path, token=None, headers=headers)


@asynccontextmanager
async def control_plane(
    config_for: Callable[..., Any], stores_for: Callable[..., Any], **env: str
) -> AsyncIterator[Platform]:
    config = config_for(ControlPlaneConfig, EDGE_CONFIG_POLL_SECS="0.5", **env)
    async with serving(build_controlplane(config, stores_for(config))) as cp:
        yield Platform(cp)


@asynccontextmanager
async def with_edge(
    valkey_url: str, config_for: Callable[..., Any], stores_for: Callable[..., Any]
) -> AsyncIterator[Platform]:
    """The control plane and an edge whose data plane it configures over xDS."""
    await clear_edge_store(valkey_url)
    async with control_plane(config_for, stores_for) as platform:
        config = config_for(EdgeConfig, CONTROLPLANE_GRPC=platform.cp.grpc_target)
        async with serving(
            build_edge(config, stores_for(config), proxy_port=0, metrics_port=0)
        ) as edge:
            platform.edge = edge
            yield platform


@asynccontextmanager
async def echo_upstream() -> AsyncIterator[int]:
    """An upstream that tells what it received (path and headers); yields its port."""

    async def echo(request: web.Request) -> web.Response:
        return web.json_response(
            {"path": request.path, "headers": {k.lower(): v for k, v in request.headers.items()}}
        )

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", echo)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()


def edge_route(uri: str, upstream: int, plugins: dict[str, Any]) -> dict[str, Any]:
    return {"uri": uri, "upstream": {"nodes": {f"127.0.0.1:{upstream}": 1}}, "plugins": plugins}
