"""The gateway's own MCP endpoint (`/mcp`) through the `mcp` SDK's client, both eras: the
tenant's tools listed, calls forwarded to the upstream, refusals as tool errors; its MCP
sessions (2025-11-25) looked up, bound, ended, and 404 once gone."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import httpx2
import pytest
from agent_kit import call, server_body
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import TextContent

from gateways.agent.keys import policy_key


def client_for(svc, headers: dict[str, str], mode: str) -> Client:
    http = httpx2.AsyncClient(headers=headers)
    transport = streamable_http_client(f"{svc.http_url}/mcp", http_client=http)
    return Client(transport, mode=mode, cache=None)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28", "auto"])
async def test_sdk_client_lists_and_calls_tenant_tools(gateway, alice, bob, upstream, mode):
    up = upstream()
    theirs = upstream(name="theirs", extra_tools=True)
    async with gateway() as svc:
        await call(svc, "POST", "/v1/mcp/servers", alice, server_body(up, id="mine"))
        body = server_body(theirs, id="theirs", tenant_id="globex")
        assert (await call(svc, "POST", "/v1/mcp/servers", bob, body))[0] == 201

        async with client_for(svc, alice, mode) as client:
            expected = "2025-11-25" if mode == "legacy" else "2026-07-28"
            assert client.protocol_version == expected
            listing = await client.list_tools()
            assert sorted(t.name for t in listing.tools) == ["add", "echo", "explode"]
            result = await client.call_tool("add", {"a": 2, "b": 3})
            assert not result.is_error and result.structured_content == {"result": 5}
            failed = await client.call_tool("explode", {"reason": "x"})
            assert failed.is_error
            with pytest.raises(MCPError):  # another tenant's tool is unknown here
                await client.call_tool("exfiltrate", {"path": "/"})
        assert up.count("tools/call") == 2


async def test_quarantined_server_is_hidden_and_refused(gateway, alice, upstream):
    up = upstream()
    async with gateway() as svc:
        await call(svc, "POST", "/v1/mcp/servers", alice, server_body(up, id="rug"))
        up.echo_description = "changed"
        up.restart()
        await call(svc, "GET", "/v1/mcp/servers/rug/tools?refresh=true", alice)
        async with client_for(svc, alice, "legacy") as client:
            assert (await client.list_tools()).tools == []
            refused = await client.call_tool("echo", {"text": "x"})
            assert isinstance(refused.content[0], TextContent)
            assert refused.is_error and "tool_set_quarantined" in refused.content[0].text


async def test_endpoint_needs_credentials(gateway):
    async with gateway() as svc:
        status, _ = await call(svc, "POST", "/mcp", {}, {"jsonrpc": "2.0", "id": 1})
        assert status == 401


async def test_a_message_not_sent_as_json_is_415(gateway, alice):
    """Issue 22.7: MCP's transport posts JSON; another Content-Type is 415 naming the type to
    send (a JSON-RPC error, as the official SDK's server answers), not a parse error."""
    message = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    async with gateway() as svc, aiohttp.ClientSession() as http:
        for content_type in ("text/plain", "application/x-www-form-urlencoded"):
            headers = {**alice, "Content-Type": content_type, "Accept": "application/json"}
            async with http.post(f"{svc.http_url}/mcp", data=message, headers=headers) as r:
                assert r.status == 415
                error = (await r.json())["error"]
            assert content_type in error["message"] and "application/json" in error["message"]


async def test_a_client_bound_to_a_session_sees_and_calls_its_tools_only(
    gateway, alice, upstream, kv
):
    """Through the SDK: the session's allowlist is what `tools/list` shows; calls run in the
    session (counted); a HITL tool answers a tool error naming the approval."""
    up = upstream()
    await kv.set(policy_key("acme"), '{"tenant_id": "acme", "hitl_required_tools": ["echo"]}')
    try:
        async with gateway() as svc:
            await call(svc, "POST", "/v1/mcp/servers", alice, server_body(up, id="bound"))
            body = {"tenant_id": "acme", "agent_id": "agent:mcp", "token_budget": 1000,
                    "tool_allowlist": ["add", "echo"]}  # fmt: skip
            _, made = await call(svc, "POST", "/v1/sessions", alice, body)
            bound = {**alice, "X-Strata-Session-Id": made["id"]}
            async with client_for(svc, bound, "legacy") as client:
                listing = await client.list_tools()
                assert sorted(t.name for t in listing.tools) == ["add", "echo"]
                assert not (await client.call_tool("add", {"a": 1, "b": 1})).is_error
                refused = await client.call_tool("explode", {"reason": "x"})
                assert isinstance(refused.content[0], TextContent)
                assert refused.is_error and "tool_not_allowed" in refused.content[0].text
                held = await client.call_tool("echo", {"text": "hi"})
                assert isinstance(held.content[0], TextContent)
                assert held.is_error and "approval hitl-" in held.content[0].text
            _, session = await call(svc, "GET", f"/v1/sessions/{made['id']}", alice)
    finally:
        await kv.delete(policy_key("acme"))
    assert session["tool_calls"] == 1
    assert up.count("tools/call") == 1


async def rpc(
    svc, headers: dict[str, str], method: str, params: dict | None = None, *, http_method="POST"
) -> tuple[int, dict, Any]:
    """One raw JSON-RPC request to `/mcp`: (status, response headers, JSON body or None)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
    sent = {"Accept": "application/json, text/event-stream", **headers}
    async with (
        aiohttp.ClientSession() as http,
        http.request(http_method, f"{svc.http_url}/mcp", json=body, headers=sent) as resp,
    ):
        text = await resp.text()
        return resp.status, dict(resp.headers), json.loads(text) if text else None


async def test_the_mcp_session_id_is_looked_up_and_ended(gateway, alice, bob, upstream, kv):
    """2025-11-25 sessions: the id `initialize` gave is served (and keeps the Strata session
    binding it was opened with); an unknown id, another tenant's or an ended one is 404 with a
    JSON-RPC error; DELETE ends it; GET offers no stream (405, as the spec allows)."""
    up = upstream()
    async with gateway() as svc:
        await call(svc, "POST", "/v1/mcp/servers", alice, server_body(up, id="sess"))
        body = {"tenant_id": "acme", "agent_id": "agent:mcp", "token_budget": 1000,
                "tool_allowlist": ["echo"]}  # fmt: skip
        _, made = await call(svc, "POST", "/v1/sessions", alice, body)
        bound = {**alice, "X-Strata-Session-Id": made["id"]}
        params = {"protocolVersion": "2025-11-25", "capabilities": {},
                  "clientInfo": {"name": "raw", "version": "1"}}  # fmt: skip
        status, headers, answer = await rpc(svc, bound, "initialize", params)
        assert status == 200 and answer["result"]["protocolVersion"] == "2025-11-25"
        mcp_session = headers["Mcp-Session-Id"]
        # Later requests need only the MCP session: its Strata session binding holds.
        status, _, listing = await rpc(svc, {**alice, "Mcp-Session-Id": mcp_session}, "tools/list")
        assert status == 200
        assert [t["name"] for t in listing["result"]["tools"]] == ["echo"]

        for who, sid in ((alice, "0" * 32), (bob, mcp_session), (alice, "not/an id")):
            status, _, error = await rpc(svc, {**who, "Mcp-Session-Id": sid}, "tools/list")
            assert status == 404, (who, sid)
            assert error["error"]["message"] == "Session not found" and error["id"] is None

        async with aiohttp.ClientSession() as http:
            async with http.get(f"{svc.http_url}/mcp", headers=alice) as resp:
                assert resp.status == 405 and "GET" not in resp.headers["Allow"]
            ending = {**alice, "Mcp-Session-Id": mcp_session}
            async with http.delete(f"{svc.http_url}/mcp", headers=ending) as resp:
                assert resp.status == 204
            async with http.delete(f"{svc.http_url}/mcp", headers=ending) as resp:
                assert resp.status == 404
        status, _, _ = await rpc(svc, {**alice, "Mcp-Session-Id": mcp_session}, "tools/list")
        assert status == 404
        # A client without a session id is still served (stateless clients).
        assert (await rpc(svc, alice, "tools/list"))[0] == 200
