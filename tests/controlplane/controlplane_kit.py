"""Helpers of the branding, settings, routes and health-alert tests: the control plane served
in-process as `__main__` builds it, JSON calls through its front door, IdP tokens. A test
module imports the fixtures it uses (`start_fixture`, `tokens_fixture`) and names them
`start` and `tokens` in its parameters."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import aiohttp
import pytest
from shared_kit import MASTER_KEY, ConfigFor, service_token, user_token

from controlplane.app import build
from controlplane.config import ControlPlaneConfig
from controlplane.tenancy import MARKER_VALUE, TENANTS, tenant_marker
from runtime.config import ServiceConfig
from runtime.stores import Stores
from runtime.testing import Serving, serving

MASTER = {"Authorization": f"Bearer {MASTER_KEY}"}

Start = Callable[..., AbstractAsyncContextManager[Serving]]


async def put_tenant(kv: Any, tenant: str, record: dict[str, Any] | None = None) -> bool:
    """A tenant as the tenants service leaves a finished create: its record (when absent;
    returns whether it was written) and its marker."""
    record = record or {"id": tenant, "name": tenant}
    written = bool(await kv.hsetnx(TENANTS, tenant, json.dumps(record)))
    await kv.set(tenant_marker(tenant), MARKER_VALUE)
    return written


async def drop_tenant(kv: Any, tenant: str) -> None:
    """The tenant's record and marker gone (not the rest of what it owns)."""
    await kv.delete(tenant_marker(tenant))
    await kv.hdel(TENANTS, tenant)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(name="start")
def start_fixture(config_for: ConfigFor, stores_for: Callable[[ServiceConfig], Stores]) -> Start:
    """`async with start(**env) as cp`: a control plane on free ports and the session's stores."""

    def make(**env: str) -> AbstractAsyncContextManager[Serving]:
        config = config_for(ControlPlaneConfig, **env)
        return serving(build(config, stores_for(config)))

    return make


class Tokens:
    """Real IdP tokens: alice (tenant acme), bob (globex), admin (platform-admin), alice
    without the `tenant` scope (no tenant_id claim), the acme planner agent."""

    alice: dict[str, str]
    bob: dict[str, str]
    admin: dict[str, str]
    no_tenant: dict[str, str]
    agent: dict[str, str]


@pytest.fixture(name="tokens")
async def tokens_fixture(idp: str) -> Tokens:
    found = Tokens()
    found.alice = bearer(await user_token(idp, "alice", "alice"))
    found.bob = bearer(await user_token(idp, "bob", "bob"))
    found.admin = bearer(await user_token(idp, "admin", "admin"))
    found.no_tenant = bearer(await user_token(idp, "alice", "alice", scope="openid"))
    found.agent = bearer(await service_token(idp))
    return found


async def call(
    svc: Serving,
    method: str,
    path: str,
    headers: dict[str, str] | None = None,
    body: Any = None,
    *,
    raw: str | None = None,
) -> tuple[int, Any]:
    """One JSON request through the front door; returns the status and the decoded body."""
    data = raw if raw is not None else (None if body is None else json.dumps(body))
    sent = dict(headers or {})
    if data is not None:
        sent["Content-Type"] = "application/json"
    async with (
        aiohttp.ClientSession(svc.http_url) as http,
        http.request(method, path, headers=sent, data=data) as resp,
    ):
        text = await resp.text()
        return resp.status, json.loads(text) if text else None
