"""Required body fields (issue 22.3): every field the spec's endpoint table lists as required
is answered 400 naming it when the body leaves it out, even when the caller's token carries
a tenant; a `tenant_id` that differs from the token's is still 403."""

from __future__ import annotations

import pytest
from agent_kit import call, execute, registered, session

TOOLS = [{"name": "add", "description": "add", "inputSchema": {"type": "object"}}]


def bodies(server: str, sid: str) -> dict[str, tuple[str, dict]]:
    """Per endpoint: (path, a complete body)."""
    return {
        "call": ("/v1/mcp/tools/call", {"server_id": server, "tool_name": "add",
                 "arguments": {"a": 1, "b": 2}, "tenant_id": "acme"}),
        "execute": (f"/v1/sessions/{sid}/execute", {"server_id": server, "tool_name": "add",
                    "arguments": {"a": 1, "b": 2}, "tenant_id": "acme"}),
        "elicit": ("/v1/elicit", {"session_id": sid, "tenant_id": "acme", "tool_name": "add",
                   "message": "ok?", "schema": {"type": "object"}}),
        "session": ("/v1/sessions", {"tenant_id": "acme", "agent_id": "agent:a",
                    "tool_allowlist": ["add"], "token_budget": 100}),
        "send": ("/v1/a2a/send", {"from_agent": "agent:a", "to_agent": "agent:b",
                 "message": {"text": "hi"}, "tenant_id": "acme"}),
        "agent": ("/v1/a2a/agents", {"id": "agent:req", "name": "r",
                  "url": "http://127.0.0.1:9/a2a", "tenant_id": "acme",
                  "capabilities": [], "description": "d"}),
        "server": ("/v1/mcp/servers", {"name": "req", "url": "http://127.0.0.1:9/mcp",
                   "tenant_id": "acme", "tools": TOOLS}),
    }  # fmt: skip


CASES = [
    ("call", "server_id"), ("call", "tool_name"), ("call", "arguments"), ("call", "tenant_id"),
    ("execute", "server_id"), ("execute", "tool_name"), ("execute", "arguments"),
    ("execute", "tenant_id"),
    ("elicit", "session_id"), ("elicit", "tenant_id"), ("elicit", "tool_name"),
    ("elicit", "message"), ("elicit", "schema"),
    ("session", "tenant_id"), ("session", "agent_id"), ("session", "tool_allowlist"),
    ("session", "token_budget"),
    ("send", "from_agent"), ("send", "to_agent"), ("send", "message"), ("send", "tenant_id"),
    ("agent", "id"), ("agent", "name"), ("agent", "url"), ("agent", "tenant_id"),
    ("agent", "capabilities"), ("agent", "description"),
    ("server", "name"), ("server", "url"), ("server", "tenant_id"),
]  # fmt: skip


async def test_a_missing_required_field_is_named_whatever_the_token_says(
    gateway, alice, upstream
) -> None:
    up = upstream()
    async with gateway() as svc:
        server = await registered(svc, alice, up)
        sid = await session(svc, alice, ["add"])
        table = bodies(server, sid)
        for endpoint, missing in CASES:
            path, body = table[endpoint]
            for given in ({k: v for k, v in body.items() if k != missing}, {**body, missing: None}):
                status, answer = await call(svc, "POST", path, alice, given)
                assert (status, answer.get("field")) == (400, missing), (endpoint, given, answer)
                assert missing in answer["message"]
        # a named tenant that is not the token's: the token wins
        for endpoint in ("call", "execute", "elicit", "session", "send", "agent", "server"):
            path, body = table[endpoint]
            status, answer = await call(svc, "POST", path, alice, {**body, "tenant_id": "globex"})
            assert status == 403, (endpoint, answer)
        # the complete bodies still work
        status, answer = await call(svc, "POST", table["call"][0], alice, table["call"][1])
        assert status == 200, answer


@pytest.mark.parametrize(
    ("path", "body", "missing"),
    [
        ("/auth", {"client_secret": "", "required_scopes": []}, "mode"),
        ("/auth", {"mode": "optional", "required_scopes": []}, "client_secret"),
        ("/auth", {"mode": "optional", "client_secret": ""}, "required_scopes"),
    ],
)
async def test_the_auth_configuration_names_its_missing_field(
    gateway, alice, upstream, path, body, missing
) -> None:
    up = upstream()
    async with gateway() as svc:
        server = await registered(svc, alice, up)
        status, answer = await call(svc, "PUT", f"/v1/mcp/servers/{server}{path}", alice, body)
        assert (status, answer.get("field")) == (400, missing), answer


async def test_an_empty_allowlist_is_explicit_and_allows_nothing(gateway, alice, upstream) -> None:
    """Issue 22.4: `tool_allowlist: []` is an explicit allowlist (201), under which every
    tool call is 403 `tool_not_allowed`; a body without the field is 400."""
    up = upstream()
    async with gateway() as svc:
        server = await registered(svc, alice, up)
        sid = await session(svc, alice, [])
        status, made = await call(svc, "GET", f"/v1/sessions/{sid}", alice)
        assert status == 200 and made["tool_allowlist"] == [], made
        status, tools = await call(svc, "GET", f"/v1/sessions/{sid}/tools", alice)
        assert status == 200 and tools["tools"] == [], tools
        arguments = {"a": 1, "b": 2}
        status, body = await execute(svc, alice, sid, server, "add", arguments)
        assert (status, body["error"]) == (403, "tool_not_allowed"), body
        call_body = {"server_id": server, "tool_name": "add", "arguments": arguments,
                     "tenant_id": "acme", "session_id": sid}  # fmt: skip
        status, body = await call(svc, "POST", "/v1/mcp/tools/call", alice, call_body)
        assert (status, body["error"]) == (403, "tool_not_allowed"), body
        assert up.count("tools/call") == 0
        without = {"tenant_id": "acme", "agent_id": "agent:a", "token_budget": 10}
        status, body = await call(svc, "POST", "/v1/sessions", alice, without)
        assert (status, body["field"]) == (400, "tool_allowlist"), body
