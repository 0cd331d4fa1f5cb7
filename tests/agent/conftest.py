"""Fixtures of the agent gateway's MCP tests: the gateway served as `__main__` builds it
(`gateway(**env)`, any number of instances on the session's Valkey), real MCP servers on
loopback (`upstream(...)`), tokens from the dev IdP, and a clean MCP registry per test."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest
from mcp_servers import UpstreamMcp
from redis.asyncio import Redis
from shared_kit import MASTER_KEY, ConfigFor, user_token

from gateways.agent import changes
from gateways.agent.app import build
from gateways.agent.config import AgentGatewayConfig
from gateways.agent.keys import policy_key
from gateways.agent.mcp import keys as mcp_keys
from runtime.config import ServiceConfig
from runtime.stores import Stores
from runtime.stores.kv import connect_kv, ready_kv
from runtime.testing import Serving, serving

Gateway = Callable[..., AbstractAsyncContextManager[Serving]]
POLICY = policy_key("acme")


@pytest.fixture
async def kv(valkey_url: str) -> AsyncIterator[Redis]:
    """The session's Valkey, with the MCP registry's keys (`{mcp}:*`, `mcp:*`) removed before
    and after the test (other suites count the registry, `/health`'s `mcp_servers`)."""
    client = connect_kv(valkey_url)
    await ready_kv(client)
    await _clear_registry(client)
    yield client
    await _clear_registry(client)
    await client.aclose()


async def _clear_registry(client: Redis) -> None:
    stale = [
        key for match in (f"{mcp_keys.TAG}:*", "mcp:*") async for key in client.scan_iter(match)
    ]
    if stale:
        await client.delete(*stale)


@pytest.fixture
def gateway(
    kv: Redis,
    config_for: ConfigFor,
    stores_for: Callable[[ServiceConfig], Stores],
) -> Gateway:
    """`async with gateway(**env) as svc:` an agent gateway (twice: two replicas)."""

    @asynccontextmanager
    async def start(**env: str) -> AsyncIterator[Serving]:
        settings = {"ENVIRONMENT": "development", "AGENT_MCP_RELIST_SECS": "0", **env}
        config = config_for(AgentGatewayConfig, **settings)
        async with serving(build(config, stores_for(config))) as svc:
            yield svc

    return start


@pytest.fixture
def upstream() -> Iterator[Callable[..., UpstreamMcp]]:
    """`upstream(json_response=..., ...)`: a started MCP server, stopped after the test."""
    started: list[UpstreamMcp] = []

    def start(**options: Any) -> UpstreamMcp:
        server = UpstreamMcp(**options).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
async def policy(kv: Redis) -> AsyncIterator[Any]:
    """`await policy(**fields)` sets tenant acme's policy; removed after the test."""

    async def put(**fields: Any) -> None:  # as the policy servicer writes
        await changes.write(kv, "policy", put={POLICY: json.dumps({"tenant_id": "acme", **fields})})

    await kv.delete(POLICY)
    yield put
    await kv.delete(POLICY)


@pytest.fixture
async def alice(idp: str) -> dict[str, str]:
    """Headers of an `acme` tenant user."""
    return {"Authorization": f"Bearer {await user_token(idp)}"}


@pytest.fixture
async def bob(idp: str) -> dict[str, str]:
    """Headers of a `globex` tenant user."""
    return {"Authorization": f"Bearer {await user_token(idp, 'bob', 'bob')}"}


@pytest.fixture
def admin() -> dict[str, str]:
    """Headers of a platform administrator (the master key)."""
    return {"Authorization": f"Bearer {MASTER_KEY}"}
