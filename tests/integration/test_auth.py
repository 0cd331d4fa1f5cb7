"""Bearer JWT verification against a JWKS over HTTP: RS256 and ES256, cached keys refreshed
on an unknown `kid`, and every forged, expired or foreign token refused.

Tokens are signed with joserfc, an independent JOSE library, and the key set is served by a
real HTTP server on loopback, so only the verifier under test is ours.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from joserfc import jwt as jose_jwt
from joserfc.jwk import ECKey, KeySet, OctKey, RSAKey
from support import MASTER_KEY, free_port, service_token, user_token

from runtime.auth import Authenticator, JwksCache
from runtime.errors import Unauthenticated

ISSUER = "http://idp.test/realms/strata"


class KeyServer:
    """A JWKS endpoint whose key set a test can rotate, counting fetches."""

    def __init__(self) -> None:
        self.keys: list[Any] = []
        self.fetches = 0

    async def handle(self, request: web.Request) -> web.Response:
        self.fetches += 1
        return web.json_response(KeySet(self.keys).as_dict(private=False))

    def add(self, key: Any) -> Any:
        self.keys.append(key)
        return key


@pytest.fixture
async def jwks() -> AsyncIterator[tuple[KeyServer, str]]:
    server = KeyServer()
    app = web.Application()
    app.router.add_get("/certs", server.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    yield server, f"http://127.0.0.1:{port}/certs"
    await runner.cleanup()


def sign(key: Any, alg: str, **claims: Any) -> str:
    now = int(time.time())
    payload = {
        "iss": ISSUER,
        "aud": "strata",
        "sub": "user-1",
        "tenant_id": "acme",
        "iat": now,
        "exp": now + 60,
        **claims,
    }
    return jose_jwt.encode({"alg": alg, "kid": key.kid}, payload, key)


def authenticator(url: str) -> Authenticator:
    return Authenticator(JwksCache(url, min_refresh_secs=0), MASTER_KEY, issuer=ISSUER)


@pytest.mark.parametrize(
    ("alg", "make_key"),
    [
        ("RS256", lambda: RSAKey.generate_key(2048, parameters={"kid": "rsa-1"})),
        ("ES256", lambda: ECKey.generate_key("P-256", parameters={"kid": "ec-1"})),
    ],
)
async def test_valid_tokens_give_a_principal_with_the_tenant(jwks, alg, make_key) -> None:
    server, url = jwks
    key = server.add(make_key())
    principal = await authenticator(url).authenticate({"authorization": f"Bearer {sign(key, alg)}"})
    assert (principal.kind, principal.subject, principal.tenant_id) == ("user", "user-1", "acme")


async def test_key_set_is_cached_and_refreshed_on_an_unknown_kid(jwks) -> None:
    server, url = jwks
    first = server.add(RSAKey.generate_key(2048, parameters={"kid": "k1"}))
    auth = authenticator(url)
    await auth.authenticate({"authorization": f"Bearer {sign(first, 'RS256')}"})
    await auth.authenticate({"authorization": f"Bearer {sign(first, 'RS256')}"})
    assert server.fetches == 1  # cached
    rotated = server.add(ECKey.generate_key("P-256", parameters={"kid": "k2"}))
    principal = await auth.authenticate({"authorization": f"Bearer {sign(rotated, 'ES256')}"})
    assert principal.subject == "user-1"
    assert server.fetches == 2  # refreshed once for the new kid


async def test_refresh_on_unknown_kid_is_rate_limited(jwks) -> None:
    server, url = jwks
    server.add(RSAKey.generate_key(2048, parameters={"kid": "k1"}))
    stranger = RSAKey.generate_key(2048, parameters={"kid": "nobody"})
    auth = Authenticator(JwksCache(url, min_refresh_secs=60), MASTER_KEY, issuer=ISSUER)
    for _ in range(3):
        with pytest.raises(Unauthenticated):
            await auth.authenticate({"authorization": f"Bearer {sign(stranger, 'RS256')}"})
    assert server.fetches == 1  # forged kids cannot make us hammer the IdP


@pytest.mark.parametrize(
    "case", ["expired", "wrong_issuer", "forged", "hs256", "none", "garbage", "no_sub"]
)
async def test_bad_tokens_are_refused_with_the_spec_message(jwks, case) -> None:
    server, url = jwks
    key = server.add(RSAKey.generate_key(2048, parameters={"kid": "k1"}))
    other = RSAKey.generate_key(2048, parameters={"kid": "k1"})  # same kid, wrong key
    token = {
        "expired": lambda: sign(key, "RS256", exp=int(time.time()) - 120),
        "wrong_issuer": lambda: sign(key, "RS256", iss="http://evil.test"),
        "forged": lambda: sign(other, "RS256"),
        "hs256": lambda: jose_jwt.encode(
            {"alg": "HS256", "kid": "k1"},
            {"sub": "x", "exp": int(time.time()) + 60, "iss": ISSUER},
            OctKey.import_key("s" * 32),
        ),
        "none": lambda: "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.",
        "garbage": lambda: "not-a-jwt",
        "no_sub": lambda: sign(key, "RS256", sub=None),
    }[case]()
    with pytest.raises(Unauthenticated) as info:
        await authenticator(url).authenticate({"authorization": f"Bearer {token}"})
    assert info.value.message == "Invalid or expired token"
    assert info.value.body() == {"error": "unauthorized", "message": "Invalid or expired token"}


async def test_missing_or_non_bearer_credentials_are_refused(jwks) -> None:
    _, url = jwks
    auth = authenticator(url)
    for headers in ({}, {"authorization": "Basic dXNlcjpwYXNz"}, {"authorization": "Bearer "}):
        with pytest.raises(Unauthenticated, match="Missing bearer token"):
            await auth.authenticate(headers)


async def test_master_key_and_admin_key(jwks) -> None:
    _, url = jwks
    auth = Authenticator(JwksCache(url), MASTER_KEY, admin_api_key="edge-admin")
    master = await auth.authenticate({"authorization": f"Bearer {MASTER_KEY}"})
    assert master.kind == "master" and master.is_platform_admin
    admin = await auth.authenticate({"x-api-key": "edge-admin"})
    assert admin.kind == "admin"
    with pytest.raises(Unauthenticated, match="Invalid admin API key"):
        await auth.authenticate({"x-api-key": "wrong", "authorization": f"Bearer {MASTER_KEY}"})


async def test_dev_idp_user_and_service_tokens_verify(idp: str) -> None:
    auth = Authenticator(JwksCache(f"{idp}/protocol/openid-connect/certs"), MASTER_KEY, issuer=idp)
    user = await auth.authenticate({"authorization": f"Bearer {await user_token(idp)}"})
    assert (user.kind, user.tenant_id, user.claims["preferred_username"]) == (
        "user",
        "acme",
        "alice",
    )
    admin = await auth.authenticate(
        {"authorization": f"Bearer {await user_token(idp, 'admin', 'admin')}"}
    )
    assert admin.is_platform_admin
    agent = await auth.authenticate({"authorization": f"Bearer {await service_token(idp)}"})
    assert (agent.kind, agent.tenant_id, agent.claims["agent_id"]) == (
        "service",
        "acme",
        "agent:planner",
    )
