"""Calls outside a session skip the store while nothing changed (`admission_cache.py`,
`changes.py`): every change of what they read — the tenant's policy, the registry, a server's
auth — applies to the next call of the replica that made it, and reaches another replica
(another OS process, through the store's change feed) without a restart."""

from __future__ import annotations

import asyncio

import pytest
from agent_kit import agent_processes, call, registered

from gateways.agent.changes import CHANNEL, ChangeWatch
from gateways.agent.mcp.keys import SERVERS

# Store-facing: runs on the session's Valkey cluster (issue 24; tests/conftest.py).
pytestmark = pytest.mark.kv_cluster


def add(server: str, a: int = 1) -> dict:
    return {"server_id": server, "tool_name": "add", "arguments": {"a": a, "b": 1},
            "tenant_id": "acme"}  # fmt: skip


async def scripts_run(kv) -> int:
    """How many Lua scripts the store has run (the admission script is one)."""
    stats = await kv.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{cmd}", {}).get("calls", 0)) for cmd in ("evalsha", "eval"))


async def test_a_change_applies_to_the_next_call_of_this_replica(
    gateway, alice, kv, upstream, policy
) -> None:
    up = upstream()
    async with gateway() as svc:
        server = await registered(svc, alice, up)
        assert (await call(svc, "POST", "/v1/mcp/tools/call", alice, add(server)))[0] == 200
        scripts = await scripts_run(kv)
        for a in range(3):  # nothing changed: served from memory, no store round trip
            assert (await call(svc, "POST", "/v1/mcp/tools/call", alice, add(server, a)))[0] == 200
        assert await scripts_run(kv) == scripts
        hitl = {"hitl_required_tools": ["add"], "max_concurrent_sessions": 10,
                "max_tool_calls_per_session": 10, "allowed_network_hosts": []}  # fmt: skip
        assert (await call(svc, "PUT", "/v1/policies/acme", alice, hitl))[0] == 200
        status, held = await call(svc, "POST", "/v1/mcp/tools/call", alice, add(server))
        assert (status, held["status"]) == (202, "pending_approval")

        await policy()  # back to no approvals (the fixture writes as the servicer does)
        assert (await call(svc, "POST", "/v1/mcp/tools/call", alice, add(server)))[0] == 200
        strict = {"mode": "strict", "client_id": "c", "client_secret": "s",
                  "token_endpoint": "http://127.0.0.1:9/token", "required_scopes": []}  # fmt: skip
        path = f"/v1/mcp/servers/{server}/auth"
        assert (await call(svc, "PUT", path, alice, strict))[0] == 200
        status, refused = await call(svc, "POST", "/v1/mcp/tools/call", alice, add(server))
        assert (status, refused["error"]) == (502, "upstream_auth_failed")

        assert (await call(svc, "DELETE", f"/v1/mcp/servers/{server}", alice))[0] == 200
        status, gone = await call(svc, "POST", "/v1/mcp/tools/call", alice, add(server))
        assert (status, gone["error"]) == (404, "server_not_found")
    assert up.count("tools/call") == 5


async def test_a_change_reaches_another_replica_process(
    upstream, kv, valkey_url, idp, alice, policy
) -> None:
    up = upstream()
    async with agent_processes(2, valkey_url, idp) as (one, two):
        server = await registered(one, alice, up)
        for a in range(3):
            assert (await call(two, "POST", "/v1/mcp/tools/call", alice, add(server, a)))[0] == 200
        hitl = {"hitl_required_tools": ["add"]}
        assert (await call(one, "PUT", "/v1/policies/acme", alice, hitl))[0] == 200
        # The other process hears of it through the store (a few ms at most; bounded here).
        for _ in range(100):
            status, _ = await call(two, "POST", "/v1/mcp/tools/call", alice, add(server, 9))
            if status == 202:
                break
            await asyncio.sleep(0.05)
        assert status == 202
        assert (await call(one, "DELETE", f"/v1/mcp/servers/{server}", alice))[0] == 200
        for _ in range(100):
            status, _ = await call(two, "POST", "/v1/mcp/tools/call", alice, add(server, 9))
            if status == 404:
                break
            await asyncio.sleep(0.05)
        assert status == 404


async def test_the_watch_trusts_copies_only_while_subscribed(kv) -> None:
    """A confirmed subscription makes copies usable; each message drops them (and moves the
    generation a read in flight checks); a write announced by a script is heard too."""
    watch = ChangeWatch(kv)
    dropped: list[int] = []
    watch.on_change(lambda: dropped.append(watch.generation))
    assert not watch.trusted
    await watch.start()
    try:
        for _ in range(200):
            if watch.trusted:
                break
            await asyncio.sleep(0.01)
        assert watch.trusted
        before = watch.generation
        await kv.publish(CHANNEL, "policy")
        for _ in range(200):
            if watch.generation > before:
                break
            await asyncio.sleep(0.01)
        assert watch.generation > before and dropped
    finally:
        await watch.stop()
    assert not watch.trusted
    await kv.delete(SERVERS)
