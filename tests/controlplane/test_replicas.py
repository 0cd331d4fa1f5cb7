"""Two control plane processes against the same key-value store behave as one: all state is
in the stores. Each process has its own chDB directory (one process may own one), so this
shows the key-value state — tenants, key requests and their decisions, notifications —
shared; the analytics store is shared the same way in a cluster (ClickHouse)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from shared_kit import ADMIN_API_KEY, MASTER_KEY, free_port, keyring_for_tests, service_process

from controlplane.edge_config.servicer import EdgeConfigServicer
from controlplane.edge_config.store import EdgeConfigStore
from gateways.ai.app import build as build_ai
from gateways.ai.config import AiGatewayConfig
from runtime.stores.kv import connect_kv
from runtime.testing import serving

pytestmark = pytest.mark.timeout(90)
ADMIN = {"Authorization": f"Bearer {MASTER_KEY}"}


async def start_control_plane(env: dict[str, str]) -> asyncio.subprocess.Process:
    """`python -m controlplane`, returned once its `/health` answers."""
    return await service_process("controlplane", env, int(env["HTTP_PORT"]))


@pytest.fixture
async def replicas(
    config_for: Any, stores_for: Any, valkey_url: str, idp: str, tmp_path: Path
) -> AsyncIterator[list[str]]:
    """Two control plane processes (their HTTP URLs) and an in-process AI gateway."""
    ai_config = config_for(AiGatewayConfig)
    async with serving(build_ai(ai_config, stores_for(ai_config))) as ai:
        processes, urls = [], []
        try:
            for name in ("a", "b"):
                port = free_port()
                env = {
                    "PATH": "/usr/bin:/bin",
                    "MASTER_KEY": MASTER_KEY,
                    "ADMIN_API_KEY": ADMIN_API_KEY,
                    "REDIS_URL": valkey_url,
                    "CLICKHOUSE_URL": f"chdb://{tmp_path / name}",
                    "IDP_JWKS_URL": f"{idp}/protocol/openid-connect/certs",
                    "IDP_ISSUER": idp,
                    "HTTP_PORT": str(port),
                    "GRPC_PORT": str(free_port()),
                    "AI_GATEWAY_GRPC": ai.grpc_target,
                    "HEALTH_PROBE_INTERVAL_SECS": "0",
                    "NOTIFY_DELIVERY": "off",
                    "LOG_LEVEL": "warning",
                }
                processes.append(await start_control_plane(env))
                urls.append(f"http://127.0.0.1:{port}")
            yield urls
        finally:
            for process in processes:
                process.terminate()
            for process in processes:
                await process.wait()


async def call(url: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as http,
        http.request(method, url + path, headers=ADMIN, json=body) as resp,
    ):
        return resp.status, await resp.json(content_type=None)


async def test_two_processes_share_tenants_keys_and_notifications(
    replicas: list[str], valkey_url: str
) -> None:
    a, b = replicas
    tenant = f"rep-{uuid.uuid4().hex[:8]}"
    kv = connect_kv(valkey_url)
    edge = EdgeConfigServicer(EdgeConfigStore(kv), keyring_for_tests())
    route = {"uri": f"/{tenant}/*", "upstream": {"nodes": {"127.0.0.1:9": 1}}}
    await edge.write(lambda state: ([("routes", tenant, route)], None))
    # a tenant made by one process is the other's; a second create on either is 409
    status, made = await call(a, "POST", "/api/tenants", {"name": "Replica", "plan": "pro",
                                                          "id": tenant})  # fmt: skip
    assert status == 201
    assert await call(b, "GET", f"/api/tenants/{tenant}") == (200, made)
    again = {"name": "x", "plan": "free", "id": tenant}
    assert (await call(b, "POST", "/api/tenants", again))[0] == 409
    # a key request filed on one, decided on the other, decided again on the first: 409
    request = {"name": f"{tenant}-app", "tenant_id": tenant, "routes": [tenant], "reason": "r",
               "email": "ops@replica.example"}  # fmt: skip
    status, filed = await call(a, "POST", "/api/keys/request", request)
    assert status == 201, filed
    status, approved = await call(b, "POST", f"/api/keys/requests/{filed['id']}/approve")
    assert (status, approved["status"]) == (200, "approved")
    assert (await call(a, "POST", f"/api/keys/requests/{filed['id']}/approve"))[0] == 409
    _, keys = await call(a, "GET", f"/api/keys?tenant_id={tenant}")
    assert [k["id"] for k in keys] == [approved["key_id"]]
    # the approval's notification, raised by one, read on the other and marked read there
    _, listed = await call(a, "GET", f"/api/notifications?tenant_id={tenant}")
    (notification,) = listed["notifications"]
    assert notification["notification_type"] == "key_approved"
    assert await call(b, "POST", f"/api/notifications/{notification['id']}/read") == (
        200,
        {"id": notification["id"], "read": True},
    )
    _, unread = await call(a, "GET", f"/api/notifications?tenant_id={tenant}&unread_only=true")
    assert unread["notifications"] == []
    # deleted through one: gone for both
    assert await call(b, "DELETE", f"/api/tenants/{tenant}") == (200, {"status": "deleted"})
    assert (await call(a, "GET", f"/api/tenants/{tenant}"))[0] == 404
    await edge.write(lambda state: ([("routes", tenant, None)], None))
    await kv.aclose()
