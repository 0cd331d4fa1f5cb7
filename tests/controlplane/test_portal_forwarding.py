"""The portal's forwarding (`/portal/api/{cp,ai,agent,edge}/…`) against real services: a control
plane, an agent gateway and an edge (its Admin API) in-process, the dev IdP, real stores. A
tenant's user cannot see or act on another tenant's data through the portal; the edge Admin API
is for platform administrators; answers (CSV attachments included) come back unchanged."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass

import pytest
from controlplane_kit import put_tenant
from portal_kit import Browser
from shared_kit import ConfigFor, free_port

from controlplane.app import build as build_cp
from controlplane.branding import branding_key
from controlplane.config import ControlPlaneConfig
from gateways.agent.app import build as build_agent
from gateways.agent.approvals.store import ApprovalQueue
from gateways.agent.config import AgentGatewayConfig
from gateways.edge.app import build as build_edge
from gateways.edge.config import EdgeConfig
from runtime.config import ServiceConfig
from runtime.serve import start
from runtime.stores import Stores
from runtime.stores.kv import connect_kv
from runtime.testing import Serving, serving

pytestmark = pytest.mark.timeout(120)


@dataclass
class Platform:
    cp: Serving
    agent: Serving
    edge: Serving


@pytest.fixture
async def platform(
    valkey_url: str,
    config_for: ConfigFor,
    stores_for: Callable[[ServiceConfig], Stores],
) -> AsyncIterator[Platform]:
    kv = connect_kv(valkey_url)
    for tenant in ("acme", "globex", "platform"):
        await put_tenant(kv, tenant)
        await kv.delete(branding_key(tenant))
    await kv.aclose()
    cp_grpc = free_port()  # the edge forwards its Admin API there; the control plane starts last
    async with AsyncExitStack() as stack:
        agent_config = config_for(AgentGatewayConfig, ENVIRONMENT="development")
        agent = await stack.enter_async_context(
            serving(build_agent(agent_config, stores_for(agent_config)))
        )
        edge_config = config_for(EdgeConfig, CONTROLPLANE_GRPC=f"127.0.0.1:{cp_grpc}")
        edge = await stack.enter_async_context(
            serving(build_edge(edge_config, stores_for(edge_config), proxy_port=0, metrics_port=0))
        )
        cp_config = config_for(
            ControlPlaneConfig,
            AGENT_GATEWAY_URL=agent.http_url,
            AI_GATEWAY_URL=f"http://127.0.0.1:{free_port()}",  # nothing listens: "down"
            EDGE_ADMIN_URL=edge.http_url,  # the edge's front door is its Admin API
            HEALTH_PROBE_INTERVAL_SECS="0",
            NOTIFY_DELIVERY="off",
        )
        running = await start(build_cp(cp_config, stores_for(cp_config)), "127.0.0.1", 0, cp_grpc)
        stack.push_async_callback(running.stop, 0.5)
        cp = Serving(running, None)  # type: ignore[arg-type]  # HTTP only
        yield Platform(cp, agent, edge)


async def test_a_tenant_user_cannot_see_or_change_another_tenants_data(
    platform: Platform,
) -> None:
    async with Browser(platform.cp.http_url) as alice, Browser(platform.cp.http_url) as admin:
        await alice.login("alice", "alice")
        await admin.login("admin", "admin")
        status, body = await alice.call("GET", "/portal/api/cp/api/tenants")
        assert status == 200
        assert [t["id"] for t in body] == ["acme"]
        status, body = await alice.call("GET", "/portal/api/cp/api/tenants/globex/branding")
        assert status == 403, body
        status, body = await alice.call(
            "POST", "/portal/api/cp/api/tenants/globex/branding", {"portal_title": "Owned"}
        )
        assert status == 403, body
        # The platform administrator sees every tenant, and globex's branding unchanged.
        status, body = await admin.call("GET", "/portal/api/cp/api/tenants")
        assert {"acme", "globex", "platform"} <= {t["id"] for t in body}
        status, body = await admin.call("GET", "/portal/api/cp/api/tenants/globex/branding")
        assert (status, body["portal_title"]) == (200, "Developer Portal")


async def test_approvals_through_the_portal_are_the_tenants_own(
    platform: Platform, valkey_url: str
) -> None:
    kv = connect_kv(valkey_url)
    queue = ApprovalQueue(kv, 3600)
    try:
        ours, _ = await queue.open("acme", "s-acme", "pay", {"amount": 5}, "2026-01-01T00:00:00Z")
        theirs, _ = await queue.open(
            "globex", "s-globex", "pay", {"amount": 7}, "2026-01-01T00:00:00Z"
        )
    finally:
        await kv.aclose()
    async with Browser(platform.cp.http_url) as alice, Browser(platform.cp.http_url) as bob:
        await alice.login("alice", "alice")
        await bob.login("bob", "bob")
        status, body = await alice.call("GET", "/portal/api/agent/v1/hitl/pending")
        assert status == 200, body
        listed = {a["id"] for a in body["pending"]}
        assert ours in listed and theirs not in listed
        status, body = await alice.call("POST", f"/portal/api/agent/v1/hitl/{theirs}/approve")
        assert status in (403, 404), body  # another tenant's approval: refused, as in the API
        status, body = await bob.call("GET", "/portal/api/agent/v1/hitl/pending")
        assert theirs in {a["id"] for a in body["pending"]}  # still pending
        status, body = await alice.call("POST", f"/portal/api/agent/v1/hitl/{ours}/approve")
        assert status == 200, body
        status, body = await alice.call("GET", "/portal/api/agent/v1/hitl/pending")
        assert ours not in {a["id"] for a in body["pending"]}


async def test_the_edge_admin_api_is_for_platform_admins_only(platform: Platform) -> None:
    route = {"uri": "/portal-test/*", "upstream": {"type": "roundrobin",
                                                   "nodes": {"127.0.0.1:9": 1}}}  # fmt: skip
    async with Browser(platform.cp.http_url) as alice, Browser(platform.cp.http_url) as admin:
        await alice.login("alice", "alice")
        await admin.login("admin", "admin")
        status, body = await alice.call("GET", "/portal/api/edge/apisix/admin/routes")
        assert (status, body["error"]) == (403, "forbidden")
        status, body = await alice.call("PUT", "/portal/api/edge/apisix/admin/routes/pt", route)
        assert status == 403
        status, body = await admin.call("PUT", "/portal/api/edge/apisix/admin/routes/pt", route)
        assert status in (200, 201), body
        status, body = await admin.call("GET", "/portal/api/edge/apisix/admin/routes/pt")
        assert status == 200 and body["value"]["uri"] == "/portal-test/*"
        # The Admin API's own error comes back as it is (a bad plugin configuration).
        bad = {**route, "plugins": {"limit-count": {"count": -1}}}
        status, body = await admin.call("PUT", "/portal/api/edge/apisix/admin/routes/pt", bad)
        assert status == 400 and "limit-count" in json.dumps(body)
        status, _ = await admin.call("DELETE", "/portal/api/edge/apisix/admin/routes/pt")
        assert status == 200


async def test_csv_answers_come_back_with_their_type_and_file_name(platform: Platform) -> None:
    async with Browser(platform.cp.http_url) as admin:
        await admin.login("admin", "admin")
        async with admin.http.get(
            f"{platform.cp.http_url}/portal/api/cp/api/audit?format=csv&limit=5"
        ) as resp:
            assert resp.status == 200, await resp.text()
            assert resp.headers["Content-Type"].startswith("text/csv")
            assert "attachment" in resp.headers["Content-Disposition"]
            assert resp.headers["Content-Security-Policy"].startswith("default-src 'self'")
            assert (await resp.text()).splitlines()[0].startswith("timestamp")


@pytest.mark.parametrize(
    ("path", "status", "error"),
    [
        ("/portal/api/nope/api/tenants", 404, "unknown_service"),
        ("/portal/api/cp/health", 404, "not_forwarded"),
        ("/portal/api/cp/api/%2e%2e/metrics", 404, "not_forwarded"),
        ("/portal/api/agent/mcp", 404, "not_forwarded"),
        ("/portal/api/edge/v1/models", 404, "not_forwarded"),
    ],
)
async def test_only_the_public_apis_are_forwarded(
    platform: Platform, path: str, status: int, error: str
) -> None:
    async with Browser(platform.cp.http_url) as admin:
        await admin.login("admin", "admin")
        got, body = await admin.call("GET", path)
        assert (got, body["error"]) == (status, error), body


async def test_a_service_that_is_down_is_503_naming_it(platform: Platform) -> None:
    async with Browser(platform.cp.http_url) as alice:
        await alice.login("alice", "alice")
        status, body = await alice.call("GET", "/portal/api/ai/v1/models")
        assert (status, body["error"], body["service"]) == (503, "service_unavailable", "ai")
