"""The dev IdP's OIDC surface: discovery, JWKS and the token endpoint, verified with joserfc."""

from __future__ import annotations

import base64
import hashlib

import aiohttp
from sidecar_kit import (
    ADMIN,
    ADMIN_HEADERS,
    CERTS_PATH,
    IDP_ISSUER,
    TOKEN_PATH,
    get_token,
    keyset,
    password_form,
    verify,
)


async def test_discovery_names_the_issuer_endpoints_and_algs(http, idp):
    url = idp.make_url("/realms/strata/.well-known/openid-configuration")
    async with http.get(url) as resp:
        assert resp.status == 200
        doc = await resp.json()
    assert doc["issuer"] == IDP_ISSUER
    assert doc["jwks_uri"] == f"{IDP_ISSUER}/protocol/openid-connect/certs"
    assert doc["token_endpoint"] == f"{IDP_ISSUER}/protocol/openid-connect/token"
    assert doc["grant_types_supported"] == [
        "password",
        "client_credentials",
        "authorization_code",
        "refresh_token",
    ]
    assert doc["id_token_signing_alg_values_supported"] == ["RS256", "ES256"]


async def test_jwks_serves_one_rsa_and_one_ec_signing_key(http, idp):
    async with http.get(idp.make_url(CERTS_PATH)) as resp:
        keys = (await resp.json())["keys"]
    by_alg = {key["alg"]: key for key in keys}
    assert sorted(by_alg) == ["ES256", "RS256"]
    assert by_alg["RS256"]["kty"] == "RSA"
    assert by_alg["ES256"]["kty"] == "EC"
    assert by_alg["ES256"]["crv"] == "P-256"
    assert all(key["use"] == "sig" and key["kid"] for key in keys)
    assert by_alg["RS256"]["kid"] != by_alg["ES256"]["kid"]
    assert all("d" not in key for key in keys)  # public halves only


async def test_password_grant_rs256_access_and_id_token(http, idp):
    status, body, resp = await get_token(http, idp, password_form("alice", "alice"))
    assert status == 200
    assert (resp.headers["Cache-Control"], resp.headers["Pragma"]) == ("no-store", "no-cache")
    assert body["token_type"] == "Bearer"
    assert body["expires_in"] == 300
    assert body["scope"] == "openid profile email tenant"
    keys = await keyset(http, idp)

    access = verify(body["access_token"], keys, "RS256")
    rsa_kid = next(k.kid for k in keys.keys if k.key_type == "RSA")
    assert access.header["kid"] == rsa_kid
    claims = access.claims
    assert claims["azp"] == "strata-portal"
    assert claims["typ"] == "Bearer"
    assert claims["preferred_username"] == "alice"
    assert claims["email"] == "alice@acme.example"
    assert claims["tenant_id"] == "acme"
    assert claims["realm_access"] == {"roles": ["tenant-user"]}
    assert claims["scope"] == "openid profile email tenant"
    assert claims["exp"] - claims["iat"] == 300
    assert claims["jti"]

    ident = verify(body["id_token"], keys, "RS256", aud="strata-portal")
    assert ident.claims["sub"] == claims["sub"]
    assert ident.claims["typ"] == "ID"
    assert ident.claims["tenant_id"] == "acme"
    digest = hashlib.sha256(body["access_token"].encode()).digest()[:16]
    assert ident.claims["at_hash"] == base64.urlsafe_b64encode(digest).rstrip(b"=").decode()

    # `sub` is stable: a second login yields the same subject and a fresh jti.
    _, again, _ = await get_token(http, idp, password_form("alice", "alice"))
    second = verify(again["access_token"], keys, "RS256").claims
    assert second["sub"] == claims["sub"]
    assert second["jti"] != claims["jti"]


async def test_platform_admin_carries_role_and_platform_tenant(http, idp):
    _, body, _ = await get_token(http, idp, password_form("admin", "admin"))
    claims = verify(body["access_token"], await keyset(http, idp), "RS256").claims
    assert claims["realm_access"] == {"roles": ["platform-admin"]}
    assert claims["tenant_id"] == "platform"


async def test_tenant_claim_and_id_token_follow_the_scope(http, idp):
    status, body, _ = await get_token(http, idp, password_form("bob", "bob", scope=""))
    assert status == 200
    assert body["scope"] == "profile email"
    assert "id_token" not in body
    claims = verify(body["access_token"], await keyset(http, idp), "RS256").claims
    assert "tenant_id" not in claims
    assert claims["preferred_username"] == "bob"


async def test_es256_user_gets_es256_tokens(http, idp):
    async with http.post(
        idp.make_url(f"{ADMIN}/users"),
        headers=ADMIN_HEADERS,
        json={"username": "erin", "password": "erin-pw", "tenant_id": "globex", "alg": "ES256"},
    ) as resp:
        assert resp.status == 201
    status, body, _ = await get_token(http, idp, password_form("erin", "erin-pw"))
    assert status == 200
    keys = await keyset(http, idp)
    access = verify(body["access_token"], keys, "ES256")
    ec_kid = next(k.kid for k in keys.keys if k.key_type == "EC")
    assert access.header["kid"] == ec_kid
    assert access.claims["tenant_id"] == "globex"
    assert verify(body["id_token"], keys, "ES256", aud="strata-portal").claims["typ"] == "ID"


async def test_client_credentials_basic_auth_gives_agent_token(http, idp):
    status, body, _ = await get_token(
        http,
        idp,
        {"grant_type": "client_credentials"},
        auth=aiohttp.BasicAuth("agent-planner", "planner-secret"),
    )
    assert status == 200
    assert "id_token" not in body
    claims = verify(body["access_token"], await keyset(http, idp), "RS256").claims
    assert claims["azp"] == "agent-planner"
    assert claims["agent_id"] == "agent:planner"
    assert claims["tenant_id"] == "acme"
    assert claims["preferred_username"] == "service-account-agent-planner"
    assert claims["typ"] == "Bearer"


async def test_client_credentials_secret_in_form_and_es256_client(http, idp):
    status, body, _ = await get_token(
        http,
        idp,
        {
            "grant_type": "client_credentials",
            "client_id": "agent-researcher",
            "client_secret": "researcher-secret",
        },
    )
    assert status == 200
    keys = await keyset(http, idp)
    researcher = verify(body["access_token"], keys, "RS256").claims
    assert researcher["agent_id"] == "agent:researcher"

    async with http.post(
        idp.make_url(f"{ADMIN}/clients"),
        headers=ADMIN_HEADERS,
        json={
            "client_id": "agent-coder",
            "client_secret": "coder-secret",
            "tenant_id": "globex",
            "agent_id": "agent:coder",
            "alg": "ES256",
        },
    ) as resp:
        assert resp.status == 201
    status, body, _ = await get_token(
        http,
        idp,
        {"grant_type": "client_credentials"},
        auth=aiohttp.BasicAuth("agent-coder", "coder-secret"),
    )
    assert status == 200
    coder = verify(body["access_token"], keys, "ES256").claims
    assert (coder["agent_id"], coder["tenant_id"]) == ("agent:coder", "globex")
    assert coder["sub"] != researcher["sub"]


async def test_wrong_password_and_unknown_user_are_invalid_grant(http, idp):
    for form in (password_form("alice", "wrong"), password_form("nobody", "alice")):
        status, body, _ = await get_token(http, idp, form)
        assert status == 400
        assert body == {"error": "invalid_grant", "error_description": "Invalid user credentials"}


async def test_client_authentication_failures_are_401_invalid_client(http, idp):
    for form, auth in (
        ({"grant_type": "client_credentials"}, aiohttp.BasicAuth("agent-planner", "nope")),
        ({"grant_type": "client_credentials", "client_id": "agent-planner"}, None),
        ({"grant_type": "client_credentials", "client_id": "ghost", "client_secret": "x"}, None),
        (password_form("alice", "alice") | {"client_id": "ghost"}, None),
    ):
        status, body, resp = await get_token(http, idp, form, auth=auth)
        assert status == 401, form
        assert body["error"] == "invalid_client"
        assert resp.headers["WWW-Authenticate"].startswith("Basic")


async def test_request_errors(http, idp):
    cases = [
        ({"client_id": "strata-portal"}, 400, "invalid_request"),
        ({"grant_type": "implicit", "client_id": "strata-portal"}, 400, "unsupported_grant_type"),
        (
            {"grant_type": "authorization_code", "client_id": "strata-portal"},
            400,
            "invalid_request",
        ),
        ({"grant_type": "refresh_token", "client_id": "strata-portal"}, 400, "invalid_request"),
        (
            {"grant_type": "client_credentials", "client_id": "strata-portal"},
            400,
            "unauthorized_client",
        ),
        (
            {"grant_type": "password", "client_id": "strata-portal", "username": "alice"},
            400,
            "invalid_request",
        ),
        (password_form("alice", "alice", scope="openid admin"), 400, "invalid_scope"),
    ]
    for form, want_status, want_error in cases:
        status, body, _ = await get_token(http, idp, form)
        assert (status, body["error"]) == (want_status, want_error), form
        assert body["error_description"]
    # OAuth2 token requests are form-encoded; JSON is refused, not guessed at.
    async with http.post(idp.make_url(TOKEN_PATH), json=password_form("alice", "alice")) as resp:
        assert resp.status == 400
        assert (await resp.json())["error"] == "invalid_request"


async def test_unknown_path_is_json_404(http, idp):
    async with http.get(idp.make_url("/realms/strata/nope")) as resp:
        assert resp.status == 404
        assert (await resp.json())["error"] == "not_found"
