"""The MCP registry over HTTP (spec: agent gateway table, Errors table): registration with
fingerprint, discovery, tenant scoping, collisions (atomic across two gateway instances),
deletion, the outbound guard and a store that is down."""

from __future__ import annotations

import asyncio
import hashlib
import json

import pytest
from agent_kit import call, server_body
from shared_kit import free_port

from gateways.agent.app import build
from gateways.agent.config import AgentGatewayConfig
from runtime.testing import serving

# Store-facing: runs on the session's Valkey cluster (issue 24; tests/conftest.py).
pytestmark = pytest.mark.kv_cluster

ECHO = {
    "name": "echo",
    "description": "Echo the text back",
    "inputSchema": {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
}


def expected_fingerprint(tools: list[dict]) -> str:
    canonical = json.dumps(
        sorted(tools, key=lambda t: t["name"]), sort_keys=True, separators=(",", ":")
    )
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


async def test_register_with_tools_then_get_list_and_tools(gateway, alice, upstream):
    up = upstream()
    async with gateway() as svc:
        status, body = await call(
            svc, "POST", "/v1/mcp/servers", alice, server_body(up, id="srv-1", tools=[ECHO])
        )
        assert (status, body) == (201, {"id": "srv-1", "tools_registered": 1})

        status, server = await call(svc, "GET", "/v1/mcp/servers/srv-1", alice)
        assert status == 200
        assert server["status"] == "active"
        assert server["tenant_id"] == "acme"
        assert server["tools"] == [ECHO]
        assert server["fingerprint"] == expected_fingerprint([ECHO])
        assert server["registered_at"].endswith("Z") and "T" in server["registered_at"]

        status, listing = await call(svc, "GET", "/v1/mcp/servers", alice)
        assert status == 200 and listing["total"] == 1
        assert listing["servers"][0]["id"] == "srv-1"

        status, tools = await call(svc, "GET", "/v1/mcp/servers/srv-1/tools", alice)
        assert (status, tools) == (200, {"tools": [ECHO]})

        status, everything = await call(svc, "GET", "/v1/mcp/tools", alice)
        assert status == 200
        assert everything == {
            "tools": [{"tool": ECHO, "server_id": "srv-1", "server_name": up.name}],
            "total": 1,
        }


async def test_server_without_tools_has_them_discovered(gateway, alice, upstream):
    up = upstream()
    async with gateway() as svc:
        status, body = await call(svc, "POST", "/v1/mcp/servers", alice, server_body(up))
        assert status == 201 and body["tools_registered"] == 3
        assert body["id"].startswith("mcp-")
        _, server = await call(svc, "GET", f"/v1/mcp/servers/{body['id']}", alice)
        assert [t["name"] for t in server["tools"]] == ["add", "echo", "explode"]
        assert server["fingerprint"] == expected_fingerprint(server["tools"])
        assert up.count("tools/list") == 1


async def test_tenants_see_only_their_servers(gateway, alice, bob, admin, upstream):
    up = upstream()
    async with gateway() as svc:
        await call(svc, "POST", "/v1/mcp/servers", alice, server_body(up, id="acme-1"))
        body = server_body(up, id="globex-1", tenant_id="globex")
        assert (await call(svc, "POST", "/v1/mcp/servers", bob, body))[0] == 201

        _, mine = await call(svc, "GET", "/v1/mcp/servers", alice)
        assert [s["id"] for s in mine["servers"]] == ["acme-1"]
        status, missing = await call(svc, "GET", "/v1/mcp/servers/globex-1", alice)
        assert (status, missing) == (404, {"error": "Server not found"})
        status, _ = await call(svc, "DELETE", "/v1/mcp/servers/globex-1", alice)
        assert status == 404
        # A token of acme naming globex is refused.
        status, _ = await call(svc, "POST", "/v1/mcp/servers", alice, body)
        assert status == 403

        _, everything = await call(svc, "GET", "/v1/mcp/servers", admin)
        assert {s["id"] for s in everything["servers"]} == {"acme-1", "globex-1"}
        _, filtered = await call(svc, "GET", "/v1/mcp/servers", {**admin, "x-tenant-id": "globex"})
        assert [s["id"] for s in filtered["servers"]] == ["globex-1"]
        _, tools = await call(svc, "GET", "/v1/mcp/tools", {**admin, "x-tenant-id": "acme"})
        assert tools["total"] == 3 and {t["server_id"] for t in tools["tools"]} == {"acme-1"}


async def test_tool_name_served_by_another_server_is_a_collision(gateway, alice, bob, upstream):
    up = upstream()
    async with gateway() as svc:
        await call(svc, "POST", "/v1/mcp/servers", alice, server_body(up, id="first"))
        status, body = await call(
            svc, "POST", "/v1/mcp/servers", alice, server_body(up, id="second", tools=[ECHO])
        )
        assert status == 409
        assert body["error"] == "tool_naming_collision"
        assert body["collisions"] == ["echo"]
        assert body["servers"] == {"echo": "first"}
        assert "'first'" in body["message"] and "'second'" in body["message"]
        assert (await call(svc, "GET", "/v1/mcp/servers/second", alice))[0] == 404

        # Another tenant may use the same names; the same server may register again.
        other = server_body(up, id="theirs", tenant_id="globex", tools=[ECHO])
        assert (await call(svc, "POST", "/v1/mcp/servers", bob, other))[0] == 201
        again = server_body(up, id="first", tools=[ECHO])
        assert (await call(svc, "POST", "/v1/mcp/servers", alice, again))[0] == 201

        # Deleting the owner frees the names.
        status, body = await call(svc, "DELETE", "/v1/mcp/servers/first", alice)
        assert (status, body) == (200, {"removed": "first"})
        status, _ = await call(
            svc, "POST", "/v1/mcp/servers", alice, server_body(up, id="second", tools=[ECHO])
        )
        assert status == 201


async def test_two_gateways_share_the_registry_and_race_for_a_name(gateway, alice, upstream):
    up = upstream()
    async with gateway() as one, gateway() as two:
        attempts = [
            call(svc, "POST", "/v1/mcp/servers", alice, server_body(up, id=f"r-{i}", tools=[ECHO]))
            for i, svc in enumerate([one, two] * 4)
        ]
        outcomes = await asyncio.gather(*attempts)
        statuses = sorted(status for status, _ in outcomes)
        assert statuses == [201] + [409] * 7
        winner = next(body["id"] for status, body in outcomes if status == 201)
        for svc in (one, two):
            _, listing = await call(svc, "GET", "/v1/mcp/servers", alice)
            assert [s["id"] for s in listing["servers"]] == [winner]
            _, tools = await call(svc, "GET", "/v1/mcp/tools", alice)
            assert tools["total"] == 1


async def test_bad_registrations(gateway, alice, upstream):
    up = upstream()
    async with gateway() as svc:
        cases = [
            server_body(up, id="bad id!", tools=[ECHO]),
            server_body(up, name="", tools=[ECHO]),
            server_body(up, tools=[{**ECHO, "name": "spaces are not allowed"}]),
            server_body(up, tools=[ECHO, ECHO]),
            server_body(up, tools=[{**ECHO, "inputSchema": {"type": "no-such-type"}}]),
            server_body(up, url="ftp://example.com/mcp", tools=[ECHO]),
            server_body(up, protocol="1999-01-01", tools=[ECHO]),
        ]
        for body in cases:
            status, answer = await call(svc, "POST", "/v1/mcp/servers", alice, body)
            assert status == 400, (body, answer)
            assert answer["error"] == "invalid_request"
        status, _ = await call(svc, "GET", "/v1/mcp/servers/unknown/tools", alice)
        assert status == 404
        status, body = await call(svc, "GET", "/v1/mcp/servers/unknown/auth", alice)
        assert status == 404 and body["error"] == "server_not_found" and body["message"]


async def test_metadata_address_is_refused(gateway, alice):
    async with gateway() as svc:
        body = {
            "name": "imds",
            "url": "http://169.254.169.254/latest/meta-data/",
            "tenant_id": "acme",
            "tools": [ECHO],
        }
        status, answer = await call(svc, "POST", "/v1/mcp/servers", alice, body)
        assert status == 400
        assert answer["field"] == "url" and "metadata" in answer["message"]


async def test_unreachable_upstream_for_discovery_is_a_502(gateway, alice):
    async with gateway(AGENT_MCP_TIMEOUT_SECS="2") as svc:
        body = {"name": "gone", "url": f"http://127.0.0.1:{free_port()}/mcp", "tenant_id": "acme"}
        status, answer = await call(svc, "POST", "/v1/mcp/servers", alice, body)
        assert status == 502 and answer["error"] == "upstream_error"


async def test_store_down_is_503(config_for, stores_for, alice, upstream):
    up = upstream()
    config = config_for(
        AgentGatewayConfig,
        ENVIRONMENT="development",
        REDIS_URL=f"redis://127.0.0.1:{free_port()}/0",
        AGENT_MCP_RELIST_SECS="0",
    )
    async with serving(build(config, stores_for(config))) as svc:
        for method, path, body in [
            ("GET", "/v1/mcp/servers", None),
            ("POST", "/v1/mcp/servers", server_body(up, tools=[ECHO])),
            ("GET", "/v1/mcp/servers/x", None),
            ("GET", "/v1/mcp/tools", None),
        ]:
            status, answer = await call(svc, method, path, alice, body)
            assert status == 503, (path, answer)
            assert answer["error"] == "store_unavailable"
