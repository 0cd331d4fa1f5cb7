"""Sessions (spec: Session, the sessions endpoints, States and transitions): create with the
counters at 0, list by tenant, read, terminate with a `session_terminate` audit row, the tools
a session may call, and `max_concurrent_sessions` held exactly across two gateway instances."""

from __future__ import annotations

import asyncio
import json

import pytest
from shared_kit import user_token
from state_kit import (
    api,
    audit_rows,
    dead_store_env,
    gateway,
    kv,
    session_body,
    tenant,
)

from gateways.agent.keys import policy_key
from gateways.agent.mcp import keys as mcp_keys

# Store-facing: runs on the session's Valkey cluster (issue 24; tests/conftest.py).
pytestmark = pytest.mark.kv_cluster

__all__ = ["gateway", "kv"]  # fixtures


async def test_create_read_list_and_terminate(gateway, analytics) -> None:
    t = tenant()
    async with gateway() as svc, api(svc, t) as client:
        status, created = await client.post(
            "/v1/sessions", session_body(t, metadata={"purpose": "triage", "n": 2})
        )
        assert status == 201, created
        assert created["tokens_used"] == 0 and created["tool_calls"] == 0
        assert created["status"] == "active"
        assert created["tenant_id"] == t and created["agent_id"] == "agent-1"
        assert created["tool_allowlist"] == ["search", "send_email"]
        assert created["token_budget"] == 1000
        assert created["metadata"] == {"purpose": "triage", "n": 2}
        assert created["created_at"].endswith("Z")
        sid = created["id"]

        assert await client.get(f"/v1/sessions/{sid}") == (200, created)
        status, listed = await client.get("/v1/sessions")
        assert status == 200 and listed["total"] == 1
        summary = ("id", "tenant_id", "agent_id", "tool_allowlist", "status", "created_at")
        assert listed["sessions"] == [{k: created[k] for k in summary}]

        status, ended = await client.delete(f"/v1/sessions/{sid}")
        assert (status, ended) == (200, {"id": sid, "status": "terminated", "tenant_id": t})
        assert (await client.get(f"/v1/sessions/{sid}"))[1]["status"] == "terminated"
        # Terminating again answers the same and writes no second row.
        assert await client.delete(f"/v1/sessions/{sid}") == (200, ended)
    rows = await audit_rows(analytics, "session_id = {s:String}", s=sid)
    assert [(r["action"], r["status"], r["tenant_id"]) for r in rows] == [
        ("session_terminate", "terminated", t)
    ]


async def test_metadata_is_null_when_not_given(gateway) -> None:
    t = tenant()
    async with gateway() as svc, api(svc, t) as client:
        status, created = await client.post("/v1/sessions", session_body(t))
    assert status == 201 and created["metadata"] is None


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"tool_allowlist": None}, "tool_allowlist"),  # left out: 400 (a `[]` is explicit)
        ({"tool_allowlist": ["has space"]}, "tool_allowlist"),
        ({"token_budget": 0}, "token_budget"),
        ({"token_budget": -5}, "token_budget"),
        ({"agent_id": ""}, "agent_id"),
        ({"agent_id": "no/slash"}, "agent_id"),
    ],
)
async def test_bad_bodies_are_400_naming_the_field(gateway, overrides, field) -> None:
    t = tenant()
    body = {k: v for k, v in session_body(t, **overrides).items() if v is not None}
    async with gateway() as svc, api(svc, t) as client:
        status, error = await client.post("/v1/sessions", body)
    assert status == 400, error
    assert error["field"] == field


async def test_unknown_session_is_404_with_the_spec_body(gateway) -> None:
    async with gateway() as svc, api(svc, tenant()) as client:
        for method, path in (
            ("GET", "/v1/sessions/nope"),
            ("DELETE", "/v1/sessions/nope"),
            ("GET", "/v1/sessions/nope/tools"),
        ):
            assert await client.call(method, path) == (404, {"error": "Session not found"})


async def test_tenants_see_only_their_sessions(gateway, idp) -> None:
    alice = await user_token(idp, "alice", "alice")  # tenant acme
    bob = await user_token(idp, "bob", "bob")  # tenant globex
    async with gateway() as svc:
        async with api(svc, token=alice) as as_alice:
            status, created = await as_alice.post("/v1/sessions", session_body("acme"))
            assert status == 201 and created["tenant_id"] == "acme"
            # The token's tenant wins: naming another one is refused.
            assert (await as_alice.post("/v1/sessions", session_body("globex")))[0] == 403
        async with api(svc, token=bob) as as_bob:
            sid = created["id"]
            assert await as_bob.get(f"/v1/sessions/{sid}") == (404, {"error": "Session not found"})
            assert (await as_bob.delete(f"/v1/sessions/{sid}"))[0] == 404
            status, listed = await as_bob.get("/v1/sessions")
            assert sid not in [s["id"] for s in listed["sessions"]]
        async with api(svc, token=alice) as as_alice:
            status, listed = await as_alice.get("/v1/sessions")
            assert sid in [s["id"] for s in listed["sessions"]]
            assert {s["tenant_id"] for s in listed["sessions"]} == {"acme"}


async def test_list_without_a_tenant_shows_the_default_tenant(gateway) -> None:
    async with gateway() as svc:
        async with api(svc, "default") as client:
            status, created = await client.post("/v1/sessions", session_body("default"))
            assert status == 201
        async with api(svc) as no_tenant:  # the master key names no tenant
            status, listed = await no_tenant.get("/v1/sessions")
    assert status == 200
    assert created["id"] in [s["id"] for s in listed["sessions"]]
    assert {s["tenant_id"] for s in listed["sessions"]} == {"default"}


async def test_session_tools_are_filtered_by_allowlist_and_tenant(gateway, kv) -> None:
    t, other = tenant(), tenant()
    tool = {"name": "search", "description": "web search", "inputSchema": {"type": "object"}}
    servers = {
        f"{t}-a": {"id": f"{t}-a", "name": "A", "tenant_id": t, "status": "active",
                   "tools": [tool, {"name": "delete_all", "description": "", "inputSchema": {}}]},
        f"{t}-b": {"id": f"{t}-b", "name": "B", "tenant_id": t, "status": "quarantined",
                   "tools": [{"name": "send_email", "description": "", "inputSchema": {}}]},
        f"{other}-c": {"id": f"{other}-c", "name": "C", "tenant_id": other, "status": "active",
                       "tools": [{"name": "send_email", "description": "", "inputSchema": {}}]},
    }  # fmt: skip
    await kv.hset(mcp_keys.SERVERS, mapping={k: json.dumps(v) for k, v in servers.items()})
    try:
        async with gateway() as svc, api(svc, t) as client:
            _, created = await client.post("/v1/sessions", session_body(t))
            status, tools = await client.get(f"/v1/sessions/{created['id']}/tools")
    finally:
        await kv.hdel(mcp_keys.SERVERS, *servers)
    assert status == 200
    assert tools == {
        "tools": [{"tool": tool, "server_id": f"{t}-a", "server_name": "A"}],
        "total": 1,
    }


async def test_max_concurrent_sessions_is_exact_across_two_instances(gateway, kv) -> None:
    t = tenant()
    await kv.set(policy_key(t), json.dumps({"max_concurrent_sessions": 3}))
    async with gateway() as one, gateway() as two, api(one, t) as a, api(two, t) as b:
        results = await asyncio.gather(
            *(client.post("/v1/sessions", session_body(t)) for client in (a, b) * 8)
        )
        created = [body for status, body in results if status == 201]
        refused = [(status, body["error"]) for status, body in results if status != 201]
        assert len(created) == 3
        assert set(refused) == {(429, "session_limit_exceeded")}
        # A session ended on one instance frees a place on the other.
        assert (await a.delete(f"/v1/sessions/{created[0]['id']}"))[0] == 200
        assert (await b.post("/v1/sessions", session_body(t)))[0] == 201
        assert (await a.post("/v1/sessions", session_body(t)))[0] == 429
        # A session created on one instance is read on the other.
        assert (await b.get(f"/v1/sessions/{created[1]['id']}"))[1]["id"] == created[1]["id"]


async def test_store_down_is_503(gateway) -> None:
    t = tenant()
    async with gateway(**dead_store_env()) as svc, api(svc, t) as client:
        status, error = await client.post("/v1/sessions", session_body(t))
        assert (status, error["error"]) == (503, "store_unavailable")
        assert (await client.get("/v1/sessions/x"))[0] == 503
