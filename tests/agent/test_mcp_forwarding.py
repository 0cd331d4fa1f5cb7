"""McpForwarder against real MCP servers (the SDK's MCPServer over streamable HTTP): both
protocol eras, JSON and SSE answers, one session reused across calls, a forgotten session
reopened, tool errors passed through, an unreachable upstream as a 502."""

from __future__ import annotations

import asyncio

import pytest
from agent_kit import call, registry_of, server_body
from shared_kit import free_port

from gateways.agent.mcp.errors import McpUpstreamError


@pytest.mark.parametrize("json_response", [False, True], ids=["sse", "json"])
async def test_handshake_era_reuses_one_session(gateway, alice, upstream, json_response):
    up = upstream(json_response=json_response)
    async with gateway() as svc:
        body = server_body(up, id="legacy", protocol="2025-11-25")
        assert (await call(svc, "POST", "/v1/mcp/servers", alice, body))[0] == 201
        registry = registry_of(svc)
        server = await registry.store.get("legacy")
        assert server is not None
        results = await asyncio.gather(
            *(
                registry.forwarder.call_tool(server, "add", {"a": i, "b": 1}, timeout=10)
                for i in range(8)
            )
        )
        assert [r.result["structuredContent"] for r in results] == [
            {"result": i + 1} for i in range(8)
        ]
        assert all(not r.is_error and r.result["isError"] is False for r in results)
        # One handshake for the listing at registration and every call after it.
        assert up.count("initialize") == 1
        assert up.count("tools/call") == 8
        calls = [s for s in up.seen if s.rpc_method == "tools/call"]
        assert {s.headers.get("mcp-protocol-version") for s in calls} == {"2025-11-25"}
        assert len({s.headers.get("mcp-session-id") for s in calls}) == 1


async def test_stateless_era_sends_no_handshake(gateway, alice, upstream):
    up = upstream(json_response=True)
    async with gateway() as svc:
        body = server_body(up, id="modern", protocol="2026-07-28")
        assert (await call(svc, "POST", "/v1/mcp/servers", alice, body))[0] == 201
        registry = registry_of(svc)
        server = await registry.store.get("modern")
        assert server is not None
        result = await registry.forwarder.call_tool(server, "echo", {"text": "hi"}, timeout=10)
        assert result.result["content"] == [{"type": "text", "text": "hi"}]
        assert up.count("initialize") == 0
        call_seen = next(s for s in up.seen if s.rpc_method == "tools/call")
        assert call_seen.headers["mcp-protocol-version"] == "2026-07-28"
        assert call_seen.headers["mcp-method"] == "tools/call"
        assert call_seen.headers["mcp-name"] == "echo"
        assert "mcp-session-id" not in call_seen.headers


async def test_auto_negotiates_per_server(gateway, alice, upstream):
    up = upstream()
    async with gateway() as svc:
        status, _ = await call(svc, "POST", "/v1/mcp/servers", alice, server_body(up, id="a"))
        assert status == 201
        registry = registry_of(svc)
        server = await registry.store.get("a")
        assert server is not None
        assert server["protocol"] == "auto"
        await registry.forwarder.call_tool(server, "echo", {"text": "x"}, timeout=10)
        # The SDK's probe found a 2026-07-28 server: no initialize, one discover.
        assert up.count("server/discover") == 1 and up.count("initialize") == 0


async def test_forgotten_session_is_reopened_once(gateway, alice, upstream):
    up = upstream()
    async with gateway() as svc:
        body = server_body(up, id="restarts", protocol="2025-11-25")
        await call(svc, "POST", "/v1/mcp/servers", alice, body)
        registry = registry_of(svc)
        server = await registry.store.get("restarts")
        assert server is not None
        await registry.forwarder.call_tool(server, "echo", {"text": "one"}, timeout=10)
        old_session = up.seen[-1].headers["mcp-session-id"]
        up.restart()  # the new process knows no session: 404 on the old Mcp-Session-Id
        result = await registry.forwarder.call_tool(server, "echo", {"text": "two"}, timeout=10)
        assert result.result["content"][0]["text"] == "two"
        assert up.count("initialize") == 2  # the first session, then its replacement
        last = [s for s in up.seen if s.rpc_method == "tools/call"][-1]
        assert last.headers["mcp-session-id"] != old_session


async def test_tool_error_is_a_result_not_an_exception(gateway, alice, upstream):
    up = upstream()
    async with gateway() as svc:
        await call(svc, "POST", "/v1/mcp/servers", alice, server_body(up, id="errs"))
        registry = registry_of(svc)
        server = await registry.store.get("errs")
        assert server is not None
        result = await registry.forwarder.call_tool(server, "explode", {"reason": "x"}, timeout=10)
        assert result.is_error and result.result["isError"] is True
        assert result.result["content"][0]["type"] == "text"
        # Arguments the tool rejects are a tool error too (MCP 2025-11-25).
        result = await registry.forwarder.call_tool(server, "add", {"a": "NaN"}, timeout=10)
        assert result.is_error


async def test_unreachable_upstream_raises_upstream_error(gateway, alice, upstream):
    up = upstream()
    async with gateway(AGENT_MCP_TIMEOUT_SECS="2") as svc:
        await call(svc, "POST", "/v1/mcp/servers", alice, server_body(up, id="down"))
        registry = registry_of(svc)
        server = await registry.store.get("down")
        assert server is not None
        up.stop()
        with pytest.raises(McpUpstreamError) as caught:
            await registry.forwarder.call_tool(server, "echo", {"text": "x"}, timeout=2)
        assert caught.value.http_status == 502 and caught.value.error == "upstream_error"
        gone = {**server, "url": f"http://127.0.0.1:{free_port()}/mcp"}
        with pytest.raises(McpUpstreamError):
            await registry.forwarder.list_tools(gone)
