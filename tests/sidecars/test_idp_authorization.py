"""The dev IdP's browser login: the authorization-code flow with PKCE, its login page, dynamic
client registration (RFC 7591), and the refresh grant; tokens verified with joserfc."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from sidecar_kit import (
    ADMIN,
    ADMIN_HEADERS,
    AUTH_PATH,
    IDP_ISSUER,
    REDIRECT_URI,
    REGISTRATION_PATH,
    authorization_query,
    get_token,
    idp_app,
    keyset,
    log_in,
    password_form,
    pkce_pair,
    redirect_params,
    register_client,
    verify,
)

from sidecars.jsonlog import JsonFormatter


def code_form(client_id: str, code: str, verifier: str, **extra: str) -> dict[str, str]:
    return {
        "grant_type": "authorization_code",
        "client_id": client_id,
        "code": code,
        "redirect_uri": REDIRECT_URI,
        "code_verifier": verifier,
        **extra,
    }


async def a_code(http, idp, client_id: str, **extra: str) -> tuple[str, str]:
    """Log alice in for `client_id`: (code, verifier)."""
    verifier, challenge = pkce_pair()
    answer = await log_in(http, idp, authorization_query(client_id, challenge, **extra))
    assert answer.status == 302
    return redirect_params(answer)["code"], verifier


async def test_discovery_advertises_the_code_flow_at_both_well_known_places(http, idp):
    async with http.get(idp.make_url("/realms/strata/.well-known/openid-configuration")) as resp:
        oidc = await resp.json()
    async with http.get(
        idp.make_url("/.well-known/oauth-authorization-server/realms/strata")
    ) as resp:
        assert resp.status == 200
        assert await resp.json() == oidc  # RFC 8414 at the host root: the same metadata
    assert oidc["authorization_endpoint"] == f"{IDP_ISSUER}/protocol/openid-connect/auth"
    assert oidc["registration_endpoint"] == f"{IDP_ISSUER}/clients-registrations/openid-connect"
    assert oidc["code_challenge_methods_supported"] == ["S256"]
    assert oidc["response_types_supported"] == ["code"]
    assert oidc["authorization_response_iss_parameter_supported"] is True
    assert {"authorization_code", "refresh_token"} <= set(oidc["grant_types_supported"])
    assert "none" in oidc["token_endpoint_auth_methods_supported"]


async def test_code_flow_gives_the_password_grants_claims_then_refreshes(http, idp):
    client_id = await register_client(http, idp)
    verifier, challenge = pkce_pair()
    answer = await log_in(http, idp, authorization_query(client_id, challenge, nonce="n-42"))
    assert answer.status == 302
    params = redirect_params(answer)
    assert params["state"] == "st-123" and params["iss"] == IDP_ISSUER  # RFC 9207

    status, body, resp = await get_token(http, idp, code_form(client_id, params["code"], verifier))
    assert status == 200, body
    assert resp.headers["Cache-Control"] == "no-store"
    assert body["scope"] == "openid profile email tenant"
    keys = await keyset(http, idp)
    claims = verify(body["access_token"], keys, "RS256").claims
    _, by_password, _ = await get_token(http, idp, password_form("alice", "alice"))
    expected = verify(by_password["access_token"], keys, "RS256").claims
    varying = {"iat", "exp", "jti", "azp"}
    assert {k: v for k, v in claims.items() if k not in varying} == {
        k: v for k, v in expected.items() if k not in varying
    }
    assert claims["tenant_id"] == "acme" and claims["azp"] == client_id
    ident = verify(body["id_token"], keys, "RS256", aud=client_id).claims
    assert ident["nonce"] == "n-42" and ident["sub"] == claims["sub"]

    refresh = {"grant_type": "refresh_token", "client_id": client_id}
    status, renewed, _ = await get_token(
        http, idp, {**refresh, "refresh_token": body["refresh_token"]}
    )
    assert status == 200, renewed
    assert verify(renewed["access_token"], keys, "RS256").claims["tenant_id"] == "acme"
    assert renewed["refresh_token"] != body["refresh_token"]
    # Rotation: the first refresh token is spent.
    status, again, _ = await get_token(
        http, idp, {**refresh, "refresh_token": body["refresh_token"]}
    )
    assert (status, again["error"]) == (400, "invalid_grant")


@pytest.mark.parametrize(
    ("change", "description"),
    [
        ({"code_verifier": "x" * 43}, "PKCE verification failed"),
        ({"code_verifier": ""}, "PKCE code verifier not specified"),
        ({"redirect_uri": "http://127.0.0.1:33418/other"}, "Incorrect redirect_uri"),
        ({"client_id": "strata-portal"}, "another client"),
    ],
)
async def test_a_bad_code_exchange_is_invalid_grant_and_spends_the_code(
    http, idp, change, description
):
    client_id = await register_client(http, idp)
    code, verifier = await a_code(http, idp, client_id)
    status, body, _ = await get_token(http, idp, {**code_form(client_id, code, verifier), **change})
    assert (status, body["error"]) == (400, "invalid_grant")
    assert description in body["error_description"]
    # The attempt used the code up: the right exchange now fails too.
    status, body, _ = await get_token(http, idp, code_form(client_id, code, verifier))
    assert (status, body["error"]) == (400, "invalid_grant")


async def test_a_code_works_once(http, idp):
    client_id = await register_client(http, idp)
    code, verifier = await a_code(http, idp, client_id)
    assert (await get_token(http, idp, code_form(client_id, code, verifier)))[0] == 200
    status, body, _ = await get_token(http, idp, code_form(client_id, code, verifier))
    assert (status, body["error"]) == (400, "invalid_grant")


async def test_the_resource_must_stay_the_authorizations(http, idp):
    client_id = await register_client(http, idp)
    resource = {"resource": "http://127.0.0.1:5001/mcp"}
    code, verifier = await a_code(http, idp, client_id, **resource)
    other = {"resource": "http://127.0.0.1:4000/v1"}
    status, body, _ = await get_token(http, idp, code_form(client_id, code, verifier, **other))
    assert (status, body["error"]) == (400, "invalid_target")
    code, verifier = await a_code(http, idp, client_id, **resource)
    status, body, _ = await get_token(http, idp, code_form(client_id, code, verifier, **resource))
    assert status == 200, body


async def test_an_expired_code_is_invalid_grant(http, running, tmp_path: Path):
    async with running(idp_app(tmp_path, code_ttl=0)) as idp:
        client_id = await register_client(http, idp)
        code, verifier = await a_code(http, idp, client_id)
        status, body, _ = await get_token(http, idp, code_form(client_id, code, verifier))
    assert (status, body["error"]) == (400, "invalid_grant")


async def test_clients_and_codes_survive_a_restart(http, running, tmp_path: Path):
    async with running(idp_app(tmp_path)) as first:
        client_id = await register_client(http, first)
        code, verifier = await a_code(http, first, client_id)
    state = (tmp_path / "idp-state.json").read_text()
    assert code not in state  # only its hash is kept

    async with running(idp_app(tmp_path)) as second:
        async with http.get(second.make_url(f"{ADMIN}/clients"), headers=ADMIN_HEADERS) as resp:
            clients = {c["client_id"]: c for c in await resp.json()}
        assert clients[client_id]["publicClient"] is True
        assert clients[client_id]["redirect_uris"] == [REDIRECT_URI]
        status, body, _ = await get_token(http, second, code_form(client_id, code, verifier))
    assert status == 200, body


async def test_a_wrong_password_shows_the_page_again_with_the_error(http, idp):
    client_id = await register_client(http, idp)
    _, challenge = pkce_pair()
    answer = await log_in(http, idp, authorization_query(client_id, challenge), password="nope")
    assert answer.status == 200 and "Location" not in answer.headers
    page = await answer.text()
    assert "Invalid username or password." in page
    assert 'value="alice"' in page  # the username is kept
    assert "frame-ancestors 'none'" in answer.headers["Content-Security-Policy"]


async def test_the_login_page_is_self_contained(http, idp):
    client_id = await register_client(http, idp)
    _, challenge = pkce_pair()
    async with http.get(
        idp.make_url(AUTH_PATH), params=authorization_query(client_id, challenge)
    ) as resp:
        page = await resp.text()
        assert resp.headers["Content-Type"].startswith("text/html")
    assert "Test MCP client" in page  # the client's name
    assert "<script" not in page and "src=" not in page and "<link" not in page


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"client_id": "nobody"}, "Client not found"),
        ({"redirect_uri": "http://evil.example/cb"}, "redirect_uri"),
        ({"redirect_uri": ""}, "Missing parameter: redirect_uri"),
    ],
)
async def test_requests_that_cannot_go_back_to_the_client_show_an_error_page(
    http, idp, change, message
):
    client_id = await register_client(http, idp, [REDIRECT_URI, "http://127.0.0.1:1/second"])
    _, challenge = pkce_pair()
    query = {**authorization_query(client_id, challenge), **change}
    async with http.get(idp.make_url(AUTH_PATH), params=query, allow_redirects=False) as resp:
        assert resp.status == 400 and "Location" not in resp.headers
        assert message in await resp.text()


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"code_challenge": ""}, "invalid_request"),
        ({"code_challenge_method": "plain"}, "invalid_request"),
        ({"code_challenge": "short"}, "invalid_request"),
        ({"response_type": "token"}, "unsupported_response_type"),
        ({"scope": "openid everything"}, "invalid_scope"),
        ({"resource": "not-a-uri"}, "invalid_target"),
    ],
)
async def test_request_errors_go_back_to_the_client(http, idp, change, error):
    client_id = await register_client(http, idp)
    _, challenge = pkce_pair()
    query = {**authorization_query(client_id, challenge), **change}
    async with http.get(idp.make_url(AUTH_PATH), params=query, allow_redirects=False) as resp:
        assert resp.status == 302
        params = redirect_params(resp)
    assert params["error"] == error and params["error_description"]
    assert params["state"] == "st-123" and params["iss"] == IDP_ISSUER


async def test_a_loopback_redirect_may_name_another_port(http, idp):
    """RFC 8252 §7.3: a native app listens on whichever loopback port is free."""
    client_id = await register_client(http, idp)
    _, challenge = pkce_pair()
    moved = "http://127.0.0.1:40123/callback"
    query = authorization_query(client_id, challenge, redirect_uri=moved)
    async with http.get(idp.make_url(AUTH_PATH), params=query) as resp:
        assert resp.status == 200
    query["redirect_uri"] = "http://127.0.0.1:40123/elsewhere"
    async with http.get(idp.make_url(AUTH_PATH), params=query) as resp:
        assert resp.status == 400


async def test_registration_answers_rfc7591(http, idp):
    body = {
        "redirect_uris": [REDIRECT_URI],
        "client_name": "Inspector",
        "grant_types": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_method": "client_secret_post",
    }
    async with http.post(idp.make_url(REGISTRATION_PATH), json=body) as resp:
        assert resp.status == 201
        assert resp.headers["Cache-Control"] == "no-store"
        info = await resp.json()
    assert info["redirect_uris"] == [REDIRECT_URI] and info["client_name"] == "Inspector"
    assert info["grant_types"] == ["authorization_code", "refresh_token"]
    assert info["token_endpoint_auth_method"] == "none"  # public clients only
    assert "client_secret" not in info and info["client_id_issued_at"] > 0


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({}, "invalid_redirect_uri"),
        ({"redirect_uris": []}, "invalid_redirect_uri"),
        ({"redirect_uris": ["/relative"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["http://127.0.0.1/cb#frag"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["javascript:alert(1)"]}, "invalid_redirect_uri"),
        ({"redirect_uris": [REDIRECT_URI], "grant_types": ["password"]}, "invalid_client_metadata"),
        ({"redirect_uris": [REDIRECT_URI], "response_types": ["token"]}, "invalid_client_metadata"),
        (["not", "an", "object"], "invalid_client_metadata"),
    ],
)
async def test_bad_registrations_are_400(http, idp, body, error):
    async with http.post(idp.make_url(REGISTRATION_PATH), json=body) as resp:
        assert resp.status == 400
        assert (await resp.json())["error"] == error


async def test_admin_clients_may_carry_redirect_uris(http, idp):
    body = {"client_id": "portal-x", "redirectUris": [REDIRECT_URI], "name": "Portal X"}
    async with http.post(idp.make_url(f"{ADMIN}/clients"), headers=ADMIN_HEADERS, json=body) as r:
        assert r.status == 201
    code, verifier = await a_code(http, idp, "portal-x")
    status, body, _ = await get_token(http, idp, code_form("portal-x", code, verifier))
    assert status == 200, body


async def test_the_code_flow_logs_no_secret(http, idp, caplog):
    caplog.set_level(logging.DEBUG)
    client_id = await register_client(http, idp)
    _, challenge = pkce_pair()
    await log_in(http, idp, authorization_query(client_id, challenge), password="pw-WRONG-1234")
    code, verifier = await a_code(http, idp, client_id)
    _, body, _ = await get_token(http, idp, code_form(client_id, code, verifier))
    text = "\n".join(JsonFormatter().format(record) for record in caplog.records)
    assert '"msg": "login"' in text
    for secret in ("pw-WRONG-1234", code, verifier, body["refresh_token"], body["access_token"]):
        assert secret not in text
