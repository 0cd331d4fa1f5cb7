"""ApiKeyService through the control plane's HTTP front door, against the real Valkey, chDB
and dev IdP: every endpoint's status and body, the request → approve/deny and active → revoked
state machine (409 on a second decision, exactly one of two concurrent approvals), tenant
isolation with real IdP tokens, and the real effect: the issued key authenticates at a
running edge (configured by the control plane over xDS) on its routes only, and stops after
revoke."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any

import pytest
from keys_kit import (
    MASTER,
    Platform,
    Tenants,
    call,
    control_plane,
    echo_upstream,
    edge_route,
    eventually,
    unique,
    with_edge,
)
from shared_kit import free_port, keyring_for_tests, user_token

from controlplane import api_keys
from controlplane.edge_config.keys import kind_hash
from runtime.stores.analytics import Analytics

# Store-facing: runs on the session's Valkey cluster (issue 24; tests/conftest.py).
pytestmark = [pytest.mark.timeout(90), pytest.mark.kv_cluster]

REQUEST_FIELDS = {"id", "email", "tenant_id", "name", "routes", "reason", "requested_at", "status"}
KEY_FIELDS = {
    "id",
    "prefix",
    "name",
    "tenant_id",
    "routes",
    "status",
    "created_at",
    "expires_at",
    "request_count",
}


@pytest.fixture
async def tenants(kv: Any, names: set[str]) -> AsyncIterator[Tenants]:
    made = Tenants(kv)
    yield made
    await made.cleanup(names)


@pytest.fixture
async def cp(config_for: Callable[..., Any], stores_for: Callable[..., Any]) -> AsyncIterator[Any]:
    async with control_plane(config_for, stores_for) as platform:
        yield platform


@pytest.fixture
async def platform(
    valkey_url: str, config_for: Callable[..., Any], stores_for: Callable[..., Any]
) -> AsyncIterator[Platform]:
    """The control plane and a running edge (xDS), on an emptied edge configuration."""
    async with with_edge(valkey_url, config_for, stores_for) as both:
        yield both


def key_request(name: str, tenant: str, routes: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "tenant_id": tenant,
        "routes": routes,
        "reason": "integration tests",
        "email": "dev@example.com",
        **extra,
    }


async def file(platform: Platform, body: dict[str, Any], token: str = MASTER) -> tuple[int, Any]:
    return await platform.api("POST", "/api/keys/request", body=body, token=token)


async def notifications(kv: Any, platform: Platform, tenant: str) -> list[dict[str, Any]]:
    """The tenant's notifications, through GET /api/notifications."""
    status, body = await platform.api("GET", f"/api/notifications?tenant_id={tenant}")
    assert status == 200, body
    return list(body["notifications"])


async def stored_consumer(kv: Any, name: str) -> dict[str, Any] | None:
    raw = await kv.hget(kind_hash("consumers"), name)
    return json.loads(raw)["value"] if raw else None


# --- the workflow ----------------------------------------------------------------------------


async def test_request_approve_list_revoke_in_the_spec_shapes(
    cp: Platform, kv: Any, tenants: Tenants, names: set[str]
) -> None:
    tenant, name = await tenants.add(), unique("key")
    names.add(name)
    route = unique("r")
    await tenants.put_routes(route)

    status, created = await file(cp, key_request(name, tenant, [route]))
    assert status == 201, created
    assert set(created) == REQUEST_FIELDS
    assert created["id"].startswith("kr-") and created["status"] == "pending"
    assert created["name"] == name and created["tenant_id"] == tenant
    assert created["routes"] == [route] and created["email"] == "dev@example.com"
    assert datetime.fromisoformat(created["requested_at"].replace("Z", "+00:00")).tzinfo

    status, pending = await cp.api("GET", "/api/keys/requests")
    assert status == 200 and created in pending
    assert all(r["status"] == "pending" for r in pending)

    status, approved = await cp.api("POST", f"/api/keys/requests/{created['id']}/approve")
    assert status == 200, approved
    assert set(approved) == {"status", "key_id", "full_key", "name"}
    assert approved["status"] == "approved" and approved["name"] == name
    assert approved["key_id"].startswith("k-")
    full_key = approved["full_key"]
    assert full_key.startswith("sk-") and len(full_key) >= 40

    status, pending = await cp.api("GET", "/api/keys/requests")
    assert created["id"] not in {r["id"] for r in pending}

    status, keys = await cp.api("GET", f"/api/keys?tenant_id={tenant}")
    assert status == 200 and len(keys) == 1
    key = keys[0]
    assert set(key) == KEY_FIELDS
    assert key["id"] == approved["key_id"] and key["name"] == name
    assert key["tenant_id"] == tenant and key["routes"] == [route]
    assert key["status"] == "active" and key["expires_at"] is None
    assert key["request_count"] == 0
    assert key["prefix"].endswith(full_key[-4:]) and full_key not in key["prefix"]
    assert len(key["prefix"]) < 12
    datetime.fromisoformat(key["created_at"].replace("Z", "+00:00"))

    # Only a hash of the secret is kept by the control plane; the full key is shown once.
    stored = json.loads(await kv.hget(api_keys.KEYS, key["id"]))
    assert stored["key_hash"] == hashlib.sha256(full_key.encode()).hexdigest()
    for hash_name in (api_keys.KEYS, api_keys.REQUESTS, api_keys.NAMES):
        assert full_key not in json.dumps(await kv.hgetall(hash_name))
    # The edge consumer: the request's name, in the tenant's group, key-auth, its routes only.
    # It holds the key's keyed digest, never the key (issue 19, defect 2).
    consumer = await stored_consumer(kv, name)
    assert consumer is not None and consumer["group_id"] == tenant
    assert consumer["plugins"]["key-auth"] == {"key": keyring_for_tests().digest(full_key)}
    assert full_key not in json.dumps(consumer) and full_key[3:] not in json.dumps(consumer)
    restriction = consumer["plugins"]["serverless-pre-function"]
    assert restriction["functions"] == ["strata.allow_routes"]
    assert restriction["routes"] == [route] and restriction["tenant_id"] == tenant
    assert await kv.hexists(kind_hash("consumer_groups"), tenant)

    raised = await notifications(kv, cp, tenant)
    approved_note = [n for n in raised if n["notification_type"] == "key_approved"]
    assert len(approved_note) == 1
    note = approved_note[0]
    fields = {"id", "tenant_id", "notification_type", "title", "message", "read", "created_at"}
    assert fields <= set(note)
    assert note["tenant_id"] == tenant and note["read"] is False and name in note["message"]
    assert full_key not in json.dumps(raised)

    # A decided request is decided once.
    for decision in ("approve", "deny"):
        status, body = await cp.api("POST", f"/api/keys/requests/{created['id']}/{decision}")
        assert status == 409 and body == {"error": "Key request already approved"}

    status, body = await cp.api("DELETE", f"/api/keys/{key['id']}")
    assert status == 200 and body == {"status": "revoked"}
    status, keys = await cp.api("GET", f"/api/keys?tenant_id={tenant}")
    assert [k["status"] for k in keys] == ["revoked"]
    assert await stored_consumer(kv, name) is None  # the edge consumer is gone
    status, body = await cp.api("DELETE", f"/api/keys/{key['id']}")
    assert status == 409 and body == {"error": "API key already revoked"}

    # The name is free again once its key is revoked.
    status, again = await file(cp, key_request(name, tenant, [route]))
    assert status == 201 and again["id"] != created["id"]


async def test_deny(cp: Platform, kv: Any, tenants: Tenants, names: set[str]) -> None:
    tenant, name, route = await tenants.add(), unique("key"), unique("r")
    names.add(name)
    await tenants.put_routes(route)
    _, created = await cp.api("POST", "/api/keys/request", body=key_request(name, tenant, [route]))

    status, body = await cp.api("POST", f"/api/keys/requests/{created['id']}/deny")
    assert status == 200 and body == {"status": "denied"}
    assert json.loads(await kv.hget(api_keys.REQUESTS, created["id"]))["status"] == "denied"
    _, pending = await cp.api("GET", "/api/keys/requests")
    assert created["id"] not in {r["id"] for r in pending}
    for decision in ("approve", "deny"):
        status, body = await cp.api("POST", f"/api/keys/requests/{created['id']}/{decision}")
        assert status == 409 and body == {"error": "Key request already denied"}
    _, keys = await cp.api("GET", f"/api/keys?tenant_id={tenant}")
    assert keys == []
    assert await stored_consumer(kv, name) is None
    raised = await notifications(kv, cp, tenant)
    assert [n["notification_type"] for n in raised] == ["key_denied"]
    # A denied request frees its name.
    status, _ = await cp.api("POST", "/api/keys/request", body=key_request(name, tenant, [route]))
    assert status == 201


async def test_unknown_and_malformed_ids(cp: Platform) -> None:
    for decision in ("approve", "deny"):
        status, body = await cp.api("POST", f"/api/keys/requests/kr-missing/{decision}")
        assert status == 404 and body == {"error": "Key request not found"}
        status, body = await cp.api("POST", f"/api/keys/requests/bad%20id/{decision}")
        assert status == 400 and body["field"] == "id"
    status, body = await cp.api("DELETE", "/api/keys/k-missing")
    assert status == 404 and body == {"error": "API key not found"}
    status, body = await cp.api("DELETE", "/api/keys/bad%24id")
    assert status == 400 and body["field"] == "id"


# --- bad input -------------------------------------------------------------------------------


async def test_bad_requests_name_the_field_and_change_nothing(
    cp: Platform, kv: Any, tenants: Tenants, names: set[str]
) -> None:
    tenant, route = await tenants.add(), unique("r")
    await tenants.put_routes(route)
    good = key_request(unique("key"), tenant, [route])
    names.add(good["name"])
    before = await kv.hlen(api_keys.REQUESTS)
    cases: list[tuple[dict[str, Any], str]] = [
        *(({k: v for k, v in good.items() if k != missing}, missing) for missing in good),
        ({**good, "name": ""}, "name"),
        ({**good, "name": "has space"}, "name"),
        ({**good, "name": "dots.not.allowed"}, "name"),
        ({**good, "name": "x" * 129}, "name"),
        ({**good, "name": 5}, "name"),
        ({**good, "routes": "r1"}, "routes"),
        ({**good, "routes": []}, "routes"),
        ({**good, "routes": [7]}, "routes"),
        ({**good, "routes": ["no/slash"]}, "routes"),
        ({**good, "routes": [unique("absent")]}, "routes"),
        ({**good, "email": "not-an-email"}, "email"),
        ({**good, "reason": "   "}, "reason"),
        ({**good, "tenant_id": "bad tenant"}, "tenant"),
        ({**good, "extra": 1}, "extra"),
    ]
    for body, field_name in cases:
        status, answer = await cp.api("POST", "/api/keys/request", body=body)
        assert status == 400, (body, answer)
        shown = answer.get("field", "") + answer.get("message", "")
        assert field_name in shown, (body, answer)
    status, answer = await cp.api("POST", "/api/keys/request", raw="{not json")
    assert status == 400
    status, answer = await file(cp, {**good, "tenant_id": unique("nope")})
    assert status == 404 and answer == {"error": "Tenant not found"}
    assert await kv.hlen(api_keys.REQUESTS) == before  # nothing was written
    assert not await kv.hexists(api_keys.NAMES, good["name"])


async def test_names_are_unique_among_keys_requests_and_consumers(
    cp: Platform, kv: Any, tenants: Tenants, names: set[str]
) -> None:
    tenant, other, route = await tenants.add(), await tenants.add(), unique("r")
    name = unique("key")
    names.add(name)
    await tenants.put_routes(route)
    status, _ = await cp.api("POST", "/api/keys/request", body=key_request(name, tenant, [route]))
    assert status == 201
    for owner in (tenant, other):  # pending: the name is held, whatever the tenant
        status, body = await cp.api(
            "POST", "/api/keys/request", body=key_request(name, owner, [route])
        )
        assert status == 409 and name in body["error"]
    # A consumer created through the Admin API holds its name too.
    from controlplane.edge_config.servicer import EdgeConfigServicer
    from controlplane.edge_config.store import EdgeConfigStore

    consumer = unique("consumer")
    await EdgeConfigServicer(EdgeConfigStore(kv), keyring_for_tests()).write(
        lambda state: ([("consumers", consumer, {"plugins": {}})], None)
    )
    names.add(consumer)  # removed afterwards
    status, body = await file(cp, key_request(consumer, tenant, [route]))
    assert status == 409


async def test_approve_never_replaces_a_foreign_consumer_but_retries_its_own(
    cp: Platform, kv: Any, tenants: Tenants, names: set[str]
) -> None:
    """A consumer of the key's name made meanwhile through the Admin API blocks the approval
    (409, the request stays pending); one left by an interrupted approval of this very request
    (labelled with it) is replaced."""
    from controlplane.edge_config.servicer import EdgeConfigServicer
    from controlplane.edge_config.store import EdgeConfigStore

    edge = EdgeConfigServicer(EdgeConfigStore(kv), keyring_for_tests())
    tenant, route, name = await tenants.add(), unique("r"), unique("key")
    names.add(name)
    await tenants.put_routes(route)
    _, created = await cp.api("POST", "/api/keys/request", body=key_request(name, tenant, [route]))
    await edge.write(lambda state: ([("consumers", name, {"plugins": {}})], None))
    status, body = await cp.api("POST", f"/api/keys/requests/{created['id']}/approve")
    assert status == 409 and name in body["error"]
    assert json.loads(await kv.hget(api_keys.REQUESTS, created["id"]))["status"] == "pending"
    foreign = await stored_consumer(kv, name)
    assert foreign is not None and foreign["plugins"] == {}  # untouched

    leftover = {"plugins": {}, "labels": {"strata.key_request": created["id"]}}
    await edge.write(lambda state: ([("consumers", name, leftover)], None))
    status, body = await cp.api("POST", f"/api/keys/requests/{created['id']}/approve")
    assert status == 200
    consumer = await stored_consumer(kv, name)
    assert consumer is not None and consumer["plugins"]["key-auth"] == {
        "key": keyring_for_tests().digest(body["full_key"])
    }


# --- concurrency -------------------------------------------------------------------------------


async def test_concurrent_decisions_give_exactly_one_success(
    cp: Platform, kv: Any, tenants: Tenants, names: set[str]
) -> None:
    tenant, route = await tenants.add(), unique("r")
    await tenants.put_routes(route)
    issued_ids: list[str] = []
    for decisions in (("approve",) * 4, ("approve", "deny", "approve", "deny")):
        name = unique("key")
        names.add(name)
        _, created = await cp.api(
            "POST", "/api/keys/request", body=key_request(name, tenant, [route])
        )
        answers = await asyncio.gather(
            *(cp.api("POST", f"/api/keys/requests/{created['id']}/{d}") for d in decisions)
        )
        statuses = sorted(status for status, _ in answers)
        assert statuses == [200, 409, 409, 409], answers
        winner = next(body for status, body in answers if status == 200)
        _, keys = await cp.api("GET", f"/api/keys?tenant_id={tenant}")
        issued = [k for k in keys if k["name"] == name]
        stored = json.loads(await kv.hget(api_keys.REQUESTS, created["id"]))
        if winner["status"] == "approved":
            assert len(issued) == 1 and issued[0]["id"] == winner["key_id"]
            issued_ids.append(winner["key_id"])
            assert stored["status"] == "approved"
            consumer = await stored_consumer(kv, name)
            assert consumer is not None
            assert consumer["plugins"]["key-auth"]["key"] == keyring_for_tests().digest(
                winner["full_key"]
            )
        else:
            assert issued == [] and stored["status"] == "denied"
            assert await stored_consumer(kv, name) is None
    # Revocations race too: one succeeds, the others find the key revoked.
    key_id = issued_ids[0]  # the first round only approves
    answers = await asyncio.gather(*(cp.api("DELETE", f"/api/keys/{key_id}") for _ in range(3)))
    assert sorted(status for status, _ in answers) == [200, 409, 409], answers


# --- who may do what ---------------------------------------------------------------------------


async def test_tenants_see_and_change_only_their_own_keys(
    cp: Platform, kv: Any, idp: str, tenants: Tenants, names: set[str]
) -> None:
    acme, globex = await tenants.add("acme"), await tenants.add("globex")
    route = unique("r")
    await tenants.put_routes(route)
    alice = await user_token(idp, "alice", "alice")  # tenant acme
    bob = await user_token(idp, "bob", "bob")  # tenant globex
    admin = await user_token(idp, "admin", "admin")  # platform-admin
    tenantless = await user_token(idp, "alice", "alice", scope="openid")
    ours, theirs = unique("acme-key"), unique("globex-key")
    names.update({ours, theirs})

    status, mine = await cp.api(
        "POST", "/api/keys/request", token=alice, body=key_request(ours, acme, [route])
    )
    assert status == 201
    status, body = await cp.api(
        "POST", "/api/keys/request", token=alice, body=key_request(unique("x"), globex, [route])
    )
    assert status == 403
    status, body = await cp.api(
        "POST",
        "/api/keys/request",
        token=tenantless,
        body=key_request(unique("x"), acme, [route]),
    )
    assert status == 403  # naming a tenant is not enough to act for it
    status, _ = await cp.api(
        "POST", "/api/keys/request", token=bob, body=key_request(theirs, globex, [route])
    )
    assert status == 201

    # Pending requests: each tenant sees its own; the administrator sees all, or one tenant's.
    _, seen = await cp.api("GET", "/api/keys/requests", token=alice)
    assert {r["tenant_id"] for r in seen} == {acme} and mine in seen
    status, _ = await cp.api("GET", "/api/keys/requests?tenant_id=globex", token=alice)
    assert status == 403
    status, _ = await cp.api("GET", "/api/keys/requests", token=tenantless)
    assert status == 403
    status, _ = await cp.api(
        "GET", "/api/keys/requests", headers={"X-Tenant-ID": "globex"}, token=alice
    )
    assert status == 403
    _, seen = await cp.api("GET", "/api/keys/requests", token=admin)
    assert {ours, theirs} <= {r["name"] for r in seen}
    _, seen = await cp.api("GET", "/api/keys/requests?tenant_id=globex", token=admin)
    assert {r["tenant_id"] for r in seen} == {globex}
    _, seen = await cp.api("GET", "/api/keys/requests", token=admin, headers={"X-Tenant-ID": acme})
    assert {r["tenant_id"] for r in seen} == {acme}

    # Only platform administrators decide.
    status, _ = await cp.api("POST", f"/api/keys/requests/{mine['id']}/approve", token=alice)
    assert status == 403
    status, approved = await cp.api("POST", f"/api/keys/requests/{mine['id']}/approve", token=admin)
    assert status == 200
    _, theirs_pending = await cp.api("GET", "/api/keys/requests", token=bob)
    status, _ = await cp.api(
        "POST", f"/api/keys/requests/{theirs_pending[0]['id']}/approve", token=MASTER
    )
    assert status == 200

    _, listed = await cp.api("GET", "/api/keys", token=alice)
    assert {k["tenant_id"] for k in listed} == {acme} and ours in {k["name"] for k in listed}
    _, listed = await cp.api("GET", "/api/keys", token=bob)
    assert {k["tenant_id"] for k in listed} == {globex}
    status, _ = await cp.api("GET", "/api/keys?tenant_id=acme", token=bob)
    assert status == 403
    _, listed = await cp.api("GET", "/api/keys", token=admin)
    assert {ours, theirs} <= {k["name"] for k in listed}

    # Another tenant's key is not found (its existence does not leak) and stays active.
    status, body = await cp.api("DELETE", f"/api/keys/{approved['key_id']}", token=bob)
    assert status == 404 and body == {"error": "API key not found"}
    assert json.loads(await kv.hget(api_keys.KEYS, approved["key_id"]))["status"] == "active"
    status, body = await cp.api("DELETE", f"/api/keys/{approved['key_id']}", token=alice)
    assert status == 200 and body == {"status": "revoked"}


# --- request counts ----------------------------------------------------------------------------


async def test_request_count_comes_from_the_request_log(
    cp: Platform, kv: Any, analytics: Analytics, tenants: Tenants, names: set[str]
) -> None:
    tenant, route, name = await tenants.add(), unique("r"), unique("key")
    names.add(name)
    await tenants.put_routes(route)
    _, created = await cp.api("POST", "/api/keys/request", body=key_request(name, tenant, [route]))
    _, approved = await cp.api("POST", f"/api/keys/requests/{created['id']}/approve")
    now = time.time()
    row = {
        "tenant_id": tenant,
        "route_id": route,
        "method": "GET",
        "status_code": 200,
        "latency_ms": 1.0,
        "trace_id": unique("trace"),
        "path": f"/{route}/x",
        "request_size": 1,
        "response_size": 1,
        "client_ip": "127.0.0.1",
        "user_agent": "test",
        "consumer_name": name,
    }
    await analytics.insert(
        "request_log",
        [
            *({**row, "timestamp": now} for _ in range(3)),
            {**row, "timestamp": now - 3600},  # before the key existed: another key's
            {**row, "timestamp": now, "consumer_name": unique("other")},
        ],
    )
    _, keys = await cp.api("GET", f"/api/keys?tenant_id={tenant}")
    assert [k["request_count"] for k in keys] == [3]
    assert approved["key_id"] == keys[0]["id"]


# --- the store down ----------------------------------------------------------------------------


async def test_key_value_store_down_fails_closed_with_503(
    config_for: Callable[..., Any], stores_for: Callable[..., Any]
) -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"
    async with control_plane(config_for, stores_for, REDIS_URL=dead) as down:
        calls = [
            ("POST", "/api/keys/request", key_request("k1", "acme", ["r1"])),
            ("GET", "/api/keys", None),
            ("GET", "/api/keys/requests", None),
            ("POST", "/api/keys/requests/kr-1/approve", None),
            ("POST", "/api/keys/requests/kr-1/deny", None),
            ("DELETE", "/api/keys/k-1", None),
        ]
        for method, path, body in calls:
            status, answer = await down.api(method, path, body=body)
            assert status == 503, (path, answer)
            assert answer["error"] == "store_unavailable"


# --- the real effect at a running edge ---------------------------------------------------------


async def test_issued_key_works_at_the_edge_on_its_routes_until_revoked(
    platform: Platform, kv: Any, tenants: Tenants, names: set[str]
) -> None:
    tenant, other_tenant, name = await tenants.add(), await tenants.add(), unique("key")
    names.add(name)
    plugins = {"key-auth": {}, "tenant-rate-limit": {"default_count": 1000}}
    async with echo_upstream() as port:
        for route_id in ("keyed-a", "keyed-b"):
            status, body = await platform.admin(
                "PUT", f"/routes/{route_id}", edge_route(f"/{route_id}/*", port, plugins)
            )
            assert status in (200, 201), body

        async def served() -> bool:
            return (await platform.proxy("/keyed-b/x"))[0] == 401  # key-auth answers

        await eventually(served)

        _, created = await platform.api(
            "POST", "/api/keys/request", body=key_request(name, tenant, ["keyed-a"])
        )
        status, approved = await platform.api("POST", f"/api/keys/requests/{created['id']}/approve")
        assert status == 200
        key = {"apikey": approved["full_key"]}

        async def authenticated() -> bool:
            return (await platform.proxy("/keyed-a/hello", key))[0] == 200

        await eventually(authenticated)
        status, echoed, _ = await platform.proxy("/keyed-a/hello", key)
        assert status == 200
        assert echoed["headers"]["x-consumer-username"] == name
        assert echoed["headers"]["x-tenant-id"] == tenant  # counted for the key's tenant
        # Outside its routes, without it, with another key, or for another tenant: refused.
        status, body, _ = await platform.proxy("/keyed-b/hello", key)
        assert status == 403 and body == {"error_msg": "this API key may not call this route"}
        assert (await platform.proxy("/keyed-a/hello"))[0] == 401
        assert (await platform.proxy("/keyed-a/hello", {"apikey": "sk-wrong"}))[0] == 401
        status, _, _ = await platform.proxy("/keyed-a/hello", {**key, "X-Tenant-ID": other_tenant})
        assert status == 403

        status, _ = await platform.api("DELETE", f"/api/keys/{approved['key_id']}")
        assert status == 200

        async def refused() -> bool:
            return (await platform.proxy("/keyed-a/hello", key))[0] == 401

        await eventually(refused)


async def test_the_approval_that_shows_the_key_is_never_cached(
    cp: Platform, tenants: Tenants, names: set[str]
) -> None:
    """Issue 19, defect 7: the one answer carrying `full_key` (RFC 6749 §5.1's rule for
    credentials): `Cache-Control: no-store`, `Pragma: no-cache`."""
    tenant, name = await tenants.add(), unique("key")
    names.add(name)
    route = unique("r")
    await tenants.put_routes(route)
    status, created = await file(cp, key_request(name, tenant, [route]))
    assert status == 201, created
    status, approved, headers = await call(
        cp.cp.http_url, "POST", f"/api/keys/requests/{created['id']}/approve"
    )
    assert status == 200 and approved["full_key"].startswith("sk-")
    assert (headers["Cache-Control"], headers["Pragma"]) == ("no-store", "no-cache")
    status, _, headers = await call(cp.cp.http_url, "GET", "/api/keys/requests")
    assert status == 200 and "Pragma" not in headers  # answers without a secret are as before
