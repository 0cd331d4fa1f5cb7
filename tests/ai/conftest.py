"""Fixtures of the AI gateway tests: the gateway served in-process as `__main__` builds it
(`gateway(**env)`, any number of instances against the session's Valkey), the echo LLM sidecar
in-process, a clean provider table, and the control plane (`control_plane`), which stores
providers as an operator (or the launcher) does, through `POST /api/providers`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest
from ai_kit import PROVIDERS, Scripted, provider, set_providers
from redis.asyncio import Redis
from shared_kit import ConfigFor, running

from controlplane.app import build as build_controlplane
from controlplane.config import ControlPlaneConfig
from gateways.ai.app import build
from gateways.ai.config import AiGatewayConfig
from gateways.ai.providers import keys as providers_keys
from runtime.config import ServiceConfig
from runtime.stores import Stores
from runtime.stores.kv import connect_kv, ready_kv
from runtime.testing import Serving, serving
from sidecars.echo_llm.app import build_app as build_echo

Starter = Callable[..., AbstractAsyncContextManager[Serving]]  # `async with starter(**env) as svc:`


@pytest.fixture
async def kv(valkey_url: str) -> AsyncIterator[Redis]:
    client = connect_kv(valkey_url)
    await ready_kv(client)
    yield client
    await client.delete(PROVIDERS, providers_keys.SECRETS)
    await client.aclose()


@pytest.fixture
def gateway(config_for: ConfigFor, stores_for: Callable[[ServiceConfig], Stores]) -> Starter:
    """`async with gateway(**env) as svc:` an AI gateway instance (call it twice for two
    replicas sharing the store)."""

    @asynccontextmanager
    async def start(**env: str) -> AsyncIterator[Serving]:
        config = config_for(AiGatewayConfig, **env)
        async with serving(build(config, stores_for(config))) as svc:
            yield svc

    return start


@pytest.fixture
def control_plane_with(
    kv: Redis,
    config_for: ConfigFor,
    stores_for: Callable[[ServiceConfig], Stores],
) -> Starter:
    """`async with control_plane_with(**env) as cp:` a control plane on the session's stores,
    with no provider stored yet (the built-ins apply until the first write copies them in).
    Its provider test asks the AI gateway named by AI_GATEWAY_GRPC."""

    @asynccontextmanager
    async def start(**env: str) -> AsyncIterator[Serving]:
        await kv.delete(PROVIDERS, providers_keys.SECRETS)
        config = config_for(
            ControlPlaneConfig, HEALTH_PROBE_INTERVAL_SECS="0", NOTIFY_DELIVERY="off", **env
        )
        async with serving(build_controlplane(config, stores_for(config))) as svc:
            yield svc

    return start


@pytest.fixture
async def control_plane(control_plane_with: Starter) -> AsyncIterator[Serving]:
    """A control plane on the session's stores, with no provider stored yet."""
    async with control_plane_with() as svc:
        yield svc


@pytest.fixture
async def echo() -> AsyncIterator[str]:
    """The echo LLM sidecar on a free port; yields its base URL."""
    async with running(build_echo()) as url:
        yield url


def env(**values: Any) -> dict[str, str]:
    return {k: str(v) for k, v in values.items()}


@pytest.fixture
async def scripted(kv: Redis) -> AsyncIterator[Scripted]:
    """A scripted provider `flaky` serving the model `m-1`; it records every attempt."""
    upstream = Scripted()
    async with running(upstream.app()) as url:
        await set_providers(kv, provider("flaky", url, models=["m-1"]))
        upstream.url = url  # type: ignore[attr-defined]
        yield upstream
