"""The dev IdP's run-time admin API: auth, create, list, delete, validation."""

from __future__ import annotations

import aiohttp
import pytest
from sidecar_kit import (
    ADMIN,
    ADMIN_HEADERS,
    IDP_ADMIN_TOKEN,
    get_token,
    keyset,
    password_form,
    verify,
)


async def test_admin_api_requires_the_admin_token(http, idp):
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": IDP_ADMIN_TOKEN}):
        async with http.get(idp.make_url(f"{ADMIN}/users"), headers=headers) as resp:
            assert resp.status == 401
            assert (await resp.json())["error"] == "unauthorized"
    async with http.post(
        idp.make_url(f"{ADMIN}/users"),
        json={"username": "mallory", "password": "x", "tenant_id": "acme"},
    ) as resp:
        assert resp.status == 401
    status, _, _ = await get_token(http, idp, password_form("mallory", "x"))
    assert status == 400


async def test_added_user_can_log_in_then_is_deleted(http, idp):
    new_user = {
        "username": "carol",
        "password": "carol-pw",
        "email": "carol@acme.example",
        "tenant_id": "acme",
        "roles": ["tenant-admin"],
    }
    async with http.post(
        idp.make_url(f"{ADMIN}/users"), headers=ADMIN_HEADERS, json=new_user
    ) as resp:
        assert resp.status == 201
        created = await resp.json()
        assert resp.headers["Location"].endswith(f"{ADMIN}/users/{created['id']}")
    assert created["username"] == "carol"
    assert created["tenant_id"] == "acme"
    assert created["attributes"] == {"tenant_id": ["acme"]}
    assert "password" not in created and "password_hash" not in created

    status, body, _ = await get_token(http, idp, password_form("carol", "carol-pw"))
    assert status == 200
    claims = verify(body["access_token"], await keyset(http, idp), "RS256").claims
    assert claims["sub"] == created["id"]
    assert claims["tenant_id"] == "acme"
    assert claims["realm_access"] == {"roles": ["tenant-admin"]}

    async with http.get(idp.make_url(f"{ADMIN}/users"), headers=ADMIN_HEADERS) as resp:
        names = sorted(user["username"] for user in await resp.json())
    assert names == ["admin", "alice", "bob", "carol"]

    url = idp.make_url(f"{ADMIN}/users/{created['id']}")
    async with http.delete(url, headers=ADMIN_HEADERS) as resp:
        assert resp.status == 204
    async with http.delete(url, headers=ADMIN_HEADERS) as resp:
        assert resp.status == 404
        assert (await resp.json())["error"] == "not_found"
    status, body, _ = await get_token(http, idp, password_form("carol", "carol-pw"))
    assert (status, body["error"]) == (400, "invalid_grant")


async def test_keycloak_user_representation_is_accepted(http, idp):
    kc_user = {
        "username": "kc-dave",
        "enabled": True,
        "realmRoles": ["tenant-user"],
        "attributes": {"tenant_id": ["globex"]},
        "credentials": [{"type": "password", "value": "dave-pw", "temporary": False}],
    }
    async with http.post(
        idp.make_url(f"{ADMIN}/users"), headers=ADMIN_HEADERS, json=kc_user
    ) as resp:
        assert resp.status == 201
    status, body, _ = await get_token(http, idp, password_form("kc-dave", "dave-pw"))
    assert status == 200
    claims = verify(body["access_token"], await keyset(http, idp), "RS256").claims
    assert (claims["tenant_id"], claims["realm_access"]["roles"]) == ("globex", ["tenant-user"])


@pytest.mark.parametrize(
    ("kind", "body", "field"),
    [
        ("users", {"username": "x1", "tenant_id": "acme"}, "'password'"),
        ("users", {"username": "x2", "password": "p"}, "'tenant_id'"),
        ("users", {"username": "bad name", "password": "p", "tenant_id": "acme"}, "'username'"),
        (
            "users",
            {"username": "x3", "password": "p", "tenant_id": "acme", "alg": "HS256"},
            "'alg'",
        ),
        (
            "users",
            {"username": "x4", "password": "p", "tenant_id": "acme", "roles": "admin"},
            "'roles'",
        ),
        ("clients", {"client_id": "c1", "client_secret": "s"}, "'tenant_id'"),
        ("clients", {"client_id": "c2", "agent_id": "agent:x"}, "'agent_id'"),
        ("organizations", {"name": "No Id"}, "'id'"),
    ],
)
async def test_bad_admin_input_is_400_naming_the_field(http, idp, kind, body, field):
    async with http.post(idp.make_url(f"{ADMIN}/{kind}"), headers=ADMIN_HEADERS, json=body) as resp:
        assert resp.status == 400
        error = await resp.json()
    assert error["error"] == "invalid_request"
    assert field in error["error_description"]


async def test_malformed_json_and_duplicates(http, idp):
    async with http.post(
        idp.make_url(f"{ADMIN}/users"),
        headers=ADMIN_HEADERS,
        data=b"{not json",
    ) as resp:
        assert resp.status == 400
        assert (await resp.json())["error"] == "invalid_request"
    async with http.post(
        idp.make_url(f"{ADMIN}/users"), headers=ADMIN_HEADERS, json=["not", "an", "object"]
    ) as resp:
        assert resp.status == 400
    for kind, body in (
        ("users", {"username": "alice", "password": "p", "tenant_id": "acme"}),
        ("clients", {"client_id": "agent-planner", "client_secret": "s", "tenant_id": "acme"}),
        ("organizations", {"id": "acme"}),
    ):
        async with http.post(
            idp.make_url(f"{ADMIN}/{kind}"), headers=ADMIN_HEADERS, json=body
        ) as resp:
            assert resp.status == 409, kind
            assert (await resp.json())["error"] == "conflict"


async def test_organizations_and_clients_crud(http, idp):
    async with http.post(
        idp.make_url(f"{ADMIN}/organizations"),
        headers=ADMIN_HEADERS,
        json={"id": "initech", "name": "Initech"},
    ) as resp:
        assert resp.status == 201
        assert await resp.json() == {"id": "initech", "name": "Initech", "tenant_id": "initech"}
    async with http.get(idp.make_url(f"{ADMIN}/organizations"), headers=ADMIN_HEADERS) as resp:
        assert sorted(o["id"] for o in await resp.json()) == [
            "acme",
            "globex",
            "initech",
            "platform",
        ]
    async with http.get(idp.make_url(f"{ADMIN}/clients"), headers=ADMIN_HEADERS) as resp:
        clients = {c["client_id"]: c for c in await resp.json()}
    assert sorted(clients) == ["agent-planner", "agent-researcher", "strata-portal"]
    assert clients["strata-portal"]["publicClient"] is True
    assert clients["agent-planner"]["agent_id"] == "agent:planner"
    assert all("secret" not in key.lower() for c in clients.values() for key in c)

    async with http.delete(
        idp.make_url(f"{ADMIN}/clients/agent-researcher"), headers=ADMIN_HEADERS
    ) as resp:
        assert resp.status == 204
    status, body, _ = await get_token(
        http,
        idp,
        {"grant_type": "client_credentials"},
        auth=aiohttp.BasicAuth("agent-researcher", "researcher-secret"),
    )
    assert (status, body["error"]) == (401, "invalid_client")
    async with http.delete(
        idp.make_url(f"{ADMIN}/organizations/initech"), headers=ADMIN_HEADERS
    ) as resp:
        assert resp.status == 204
