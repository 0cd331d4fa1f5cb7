"""Fixtures and helpers of the agent gateway's state tests (sessions, policies, approvals,
elicitation, A2A, admission): gateway instances served in-process exactly as `__main__` builds
them, any number against the session's one Valkey, and a small JSON client. Test modules
import the fixtures they use from here."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import aiohttp
import pytest
from redis.asyncio import Redis
from shared_kit import MASTER_KEY, ConfigFor, free_port

from gateways.agent.app import build
from gateways.agent.config import AgentGatewayConfig
from runtime.config import ServiceConfig
from runtime.stores import Stores
from runtime.stores.analytics import Analytics
from runtime.stores.kv import connect_kv
from runtime.testing import Serving, serving

Gateway = Callable[..., AbstractAsyncContextManager[Serving]]


def tenant() -> str:
    """A fresh tenant id, so tests never share limits, policies or lists."""
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def kv(valkey_url: str) -> AsyncIterator[Redis]:
    client = connect_kv(valkey_url)
    yield client
    await client.aclose()


@pytest.fixture
def gateway(config_for: ConfigFor, stores_for: Callable[[ServiceConfig], Stores]) -> Gateway:
    """`async with gateway(**env) as svc:` one agent gateway instance; enter it twice for two
    replicas sharing the store."""

    @asynccontextmanager
    async def start(**env: str) -> AsyncIterator[Serving]:
        config = config_for(AgentGatewayConfig, **env)
        async with serving(build(config, stores_for(config))) as svc:
            yield svc

    return start


def dead_store_env() -> dict[str, str]:
    """A gateway whose key-value store does not answer (nothing listens on the port)."""
    return {"REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"}


class Api:
    """JSON calls to one gateway: `await api.get(path)` → (status, body). Credentials: the
    master key acting for `tenant` (x-tenant-id), or a bearer `token`."""

    def __init__(self, http: aiohttp.ClientSession, base: str, headers: dict[str, str]) -> None:
        self.http = http
        self.base = base
        self.headers = headers

    async def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        kwargs: dict[str, Any] = {"headers": self.headers}
        if body is not None:
            kwargs["json"] = body
        async with self.http.request(method, self.base + path, **kwargs) as resp:
            return resp.status, await resp.json(content_type=None)

    async def get(self, path: str) -> tuple[int, Any]:
        return await self.call("GET", path)

    async def post(self, path: str, body: Any = None) -> tuple[int, Any]:
        return await self.call("POST", path, body)

    async def put(self, path: str, body: Any) -> tuple[int, Any]:
        return await self.call("PUT", path, body)

    async def delete(self, path: str) -> tuple[int, Any]:
        return await self.call("DELETE", path)


@asynccontextmanager
async def api(
    svc: Serving, tenant_id: str | None = None, token: str = MASTER_KEY
) -> AsyncIterator[Api]:
    headers = {"Authorization": f"Bearer {token}"}
    if tenant_id is not None:
        headers["x-tenant-id"] = tenant_id
    async with aiohttp.ClientSession() as http:
        yield Api(http, svc.http_url, headers)


def session_body(tenant_id: str, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "tenant_id": tenant_id,
        "agent_id": "agent-1",
        "tool_allowlist": ["search", "send_email"],
        "token_budget": 1000,
    }
    return {**body, **overrides}


async def audit_rows(analytics: Analytics, where: str, **params: Any) -> list[dict[str, Any]]:
    """The `agent_audit_log` rows matching `where`, waiting for the writer's next batch."""
    sql = f"SELECT * FROM gateway.agent_audit_log WHERE {where} ORDER BY timestamp"
    rows: list[dict[str, Any]] = []
    for _ in range(100):
        rows = await analytics.query(sql, params)
        if rows:
            break
        await asyncio.sleep(0.05)
    return rows
