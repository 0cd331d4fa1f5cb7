"""Security policies (spec: Security policy, the policies endpoints): the defaults a tenant has
until it stores one, PUT replacing it with `updated_at`, 400 naming the bad field, tenant
isolation, and the store unreachable → 503."""

from __future__ import annotations

import pytest
from shared_kit import user_token
from state_kit import api, dead_store_env, gateway, tenant

from gateways.agent.policies import (
    DEFAULT_MAX_CONCURRENT_SESSIONS,
    DEFAULT_MAX_TOOL_CALLS_PER_SESSION,
)

# Store-facing: runs on the session's Valkey cluster (issue 24; tests/conftest.py).
pytestmark = pytest.mark.kv_cluster

__all__ = ["gateway"]  # fixtures


async def test_defaults_then_put_then_get(gateway) -> None:
    t = tenant()
    async with gateway() as svc, api(svc, t) as client:
        assert await client.get(f"/v1/policies/{t}") == (
            200,
            {
                "tenant_id": t,
                "hitl_required_tools": [],
                "max_concurrent_sessions": DEFAULT_MAX_CONCURRENT_SESSIONS,
                "max_tool_calls_per_session": DEFAULT_MAX_TOOL_CALLS_PER_SESSION,
                "allowed_network_hosts": [],
                "updated_at": None,
            },
        )
        body = {
            "hitl_required_tools": ["send_email", "delete_repo"],
            "max_concurrent_sessions": 0,
            "max_tool_calls_per_session": 25,
            "allowed_network_hosts": ["api.example.com", "*.internal.example:8443"],
        }
        status, stored = await client.put(f"/v1/policies/{t}", body)
        assert status == 200, stored
        assert stored == {**body, "tenant_id": t, "updated_at": stored["updated_at"]}
        assert stored["updated_at"].endswith("Z")
        assert await client.get(f"/v1/policies/{t}") == (200, stored)
        # PUT replaces the whole policy; an absent limit is its default again.
        status, replaced = await client.put(f"/v1/policies/{t}", {"hitl_required_tools": []})
        assert replaced["max_concurrent_sessions"] == DEFAULT_MAX_CONCURRENT_SESSIONS
        assert replaced["allowed_network_hosts"] == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"max_concurrent_sessions": -1}, "max_concurrent_sessions"),
        ({"max_tool_calls_per_session": -3}, "max_tool_calls_per_session"),
        ({"max_tool_calls_per_session": 10**12}, "max_tool_calls_per_session"),
        ({"hitl_required_tools": ["two words"]}, "hitl_required_tools"),
        ({"allowed_network_hosts": ["http://x/"]}, "allowed_network_hosts"),
    ],
)
async def test_invalid_policy_is_400_naming_the_field(gateway, body, field) -> None:
    t = tenant()
    async with gateway() as svc, api(svc, t) as client:
        status, error = await client.put(f"/v1/policies/{t}", body)
        assert status == 400, error
        assert error["field"] == field
        assert (await client.get(f"/v1/policies/{t}"))[1]["updated_at"] is None


async def test_wrong_types_are_400(gateway) -> None:
    t = tenant()
    async with gateway() as svc, api(svc, t) as client:
        status, _ = await client.put(f"/v1/policies/{t}", {"max_concurrent_sessions": "many"})
        assert status == 400
        status, _ = await client.put(f"/v1/policies/{t}", {"unknown": 1})
        assert status == 400


async def test_a_tenant_cannot_read_or_change_another_tenants_policy(gateway, idp) -> None:
    alice = await user_token(idp, "alice", "alice")  # tenant acme
    async with gateway() as svc, api(svc, token=alice) as client:
        assert (await client.get("/v1/policies/globex"))[0] == 403
        assert (await client.put("/v1/policies/globex", {"hitl_required_tools": []}))[0] == 403
        assert (await client.get("/v1/policies/acme"))[0] == 200


async def test_store_down_is_503(gateway) -> None:
    t = tenant()
    async with gateway(**dead_store_env()) as svc, api(svc, t) as client:
        status, error = await client.get(f"/v1/policies/{t}")
        assert (status, error["error"]) == (503, "store_unavailable")
        assert (await client.put(f"/v1/policies/{t}", {}))[0] == 503
