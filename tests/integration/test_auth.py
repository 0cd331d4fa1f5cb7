"""Bearer JWT verification against a JWKS over HTTP: RS256 and ES256, cached keys refreshed
on an unknown `kid`, and every forged, expired or foreign token refused.

Tokens are signed with joserfc, an independent JOSE library, and the key set is served by a
real HTTP server on loopback, so only the verifier under test is ours.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import jwt as pyjwt
import pytest
from aiohttp import web
from joserfc import jwt as jose_jwt
from joserfc.jwk import ECKey, KeySet, OctKey, RSAKey
from shared_kit import MASTER_KEY, free_port, service_token, user_token

from gateways.agent.config import AgentGatewayConfig
from gateways.agent.hop_identity import HopVerifier
from gateways.edge.config import EdgeConfig
from gateways.edge.dataplane.process import plugin_env
from runtime.auth import JWKS_FETCH_TIMEOUT_SECS, Authenticator, JwksCache, authenticator_for
from runtime.errors import Unauthenticated
from runtime.stores import Stores

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


# --- issue 19: algorithm confusion, audience, token type, required claims, strict form ------


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def segment(value: Any) -> str:
    return b64(json.dumps(value, separators=(",", ":")).encode())


def claims(**changes: Any) -> dict[str, Any]:
    now = int(time.time())
    base = {"iss": ISSUER, "aud": "strata", "sub": "user-1", "tenant_id": "acme",
            "iat": now, "exp": now + 60}  # fmt: skip
    base.update(changes)
    return {name: value for name, value in base.items() if value is not None}


async def refused(url: str, token: str, **options: Any) -> None:
    """The token is refused with the spec's 401 body — not with any other exception."""
    auth = Authenticator(JwksCache(url, min_refresh_secs=0), MASTER_KEY, issuer=ISSUER, **options)
    with pytest.raises(Unauthenticated) as info:
        await auth.authenticate({"authorization": f"Bearer {token}"})
    assert info.value.body() == {"error": "unauthorized", "message": "Invalid or expired token"}


async def accepted(url: str, token: str, **options: Any) -> Any:
    auth = Authenticator(JwksCache(url, min_refresh_secs=0), MASTER_KEY, issuer=ISSUER, **options)
    return await auth.authenticate({"authorization": f"Bearer {token}"})


@pytest.fixture
async def idp_keys(jwks) -> tuple[str, Any, Any]:
    """A key set of one RSA and one EC key, as the identity provider's."""
    server, url = jwks
    rsa = server.add(RSAKey.generate_key(2048, parameters={"kid": "rsa-key", "alg": "RS256"}))
    ec = server.add(ECKey.generate_key("P-256", parameters={"kid": "ec-key", "alg": "ES256"}))
    return url, rsa, ec


@pytest.mark.parametrize(
    ("alg", "kid", "signature_bytes"),
    [("ES256", "rsa-key", 64), ("RS256", "ec-key", 256), ("ES256", "rsa-key", 256)],
)
async def test_a_header_naming_another_key_types_algorithm_is_a_401(
    idp_keys, alg, kid, signature_bytes
) -> None:
    url, _, _ = idp_keys
    signing_input = f"{segment({'alg': alg, 'kid': kid, 'typ': 'JWT'})}.{segment(claims())}"
    await refused(url, f"{signing_input}.{b64(os.urandom(signature_bytes))}")


async def test_a_valid_signature_under_the_other_keys_kid_is_refused(idp_keys) -> None:
    url, _, ec = idp_keys
    token = jose_jwt.encode({"alg": "ES256", "kid": "rsa-key"}, claims(), ec)
    await refused(url, token)
    assert await accepted(url, jose_jwt.encode({"alg": "ES256", "kid": "ec-key"}, claims(), ec))


@pytest.mark.parametrize(
    "aud",
    [None, "account", "strata-portal", ["account", "other"], "", 7, {"strata": 1}],
    ids=["missing", "another", "a-client", "list-without", "empty", "number", "object"],
)
async def test_the_audience_must_be_one_this_service_accepts(idp_keys, aud) -> None:
    url, rsa, _ = idp_keys
    await refused(url, sign(rsa, "RS256", aud=aud) if aud is not None else _no_aud(rsa))


def _no_aud(key: Any) -> str:
    return jose_jwt.encode({"alg": "RS256", "kid": key.kid}, claims(aud=None), key)


async def test_audiences_are_configured_per_service(idp_keys) -> None:
    url, rsa, _ = idp_keys
    both = sign(rsa, "RS256", aud=["account", "strata"])
    assert (await accepted(url, both)).subject == "user-1"
    api = sign(rsa, "RS256", aud="https://api.example")
    await refused(url, api)
    principal = await accepted(url, api, audiences=("strata", "https://api.example"))
    assert principal.tenant_id == "acme"
    await refused(url, sign(rsa, "RS256"), audiences=("https://api.example",))


@pytest.mark.parametrize(
    ("header_typ", "claim_typ", "ok"),
    [
        (None, None, True),
        ("JWT", "Bearer", True),
        ("at+jwt", None, True),  # RFC 9068
        ("application/at+JWT", None, True),
        ("JWT", "ID", False),  # Keycloak's ID token
        ("JWT", "Refresh", False),
        ("dpop+jwt", None, False),
        ("logout+jwt", None, False),
    ],
)
async def test_only_access_tokens_are_accepted(idp_keys, header_typ, claim_typ, ok) -> None:
    url, rsa, _ = idp_keys
    header = {"alg": "RS256", "kid": rsa.kid}
    if header_typ:
        header["typ"] = header_typ
    token = jose_jwt.encode(header, claims(typ=claim_typ), rsa)
    if ok:
        assert (await accepted(url, token)).subject == "user-1"
    else:
        await refused(url, token)


async def test_the_dev_idps_id_token_is_refused_and_its_access_token_accepted(idp: str) -> None:
    form = {"grant_type": "password", "client_id": "strata-portal", "username": "alice",
            "password": "alice", "scope": "openid tenant"}  # fmt: skip
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{idp}/protocol/openid-connect/token", data=form) as resp,
    ):
        answer = await resp.json()
    auth = Authenticator(JwksCache(f"{idp}/protocol/openid-connect/certs"), MASTER_KEY, issuer=idp)
    user = await auth.authenticate({"authorization": f"Bearer {answer['access_token']}"})
    assert user.tenant_id == "acme"
    with pytest.raises(Unauthenticated):
        await auth.authenticate({"authorization": f"Bearer {answer['id_token']}"})


@pytest.mark.parametrize(
    "changes",
    [
        {"sub": None}, {"sub": ""}, {"sub": 42}, {"exp": None}, {"iat": None},
        {"iat": "yesterday"}, {"iat": int(time.time()) + 3600}, {"tenant_id": ["acme"]},
    ],
    ids=["no-sub", "empty-sub", "number-sub", "no-exp", "no-iat", "text-iat", "future-iat",
         "list-tenant"],
)  # fmt: skip
async def test_sub_exp_and_iat_are_required(idp_keys, changes) -> None:
    url, rsa, _ = idp_keys
    await refused(url, jose_jwt.encode({"alg": "RS256", "kid": rsa.kid}, claims(**changes), rsa))


def respelled(part: str) -> str:
    """The same bytes in a non-canonical spelling: the unused low bits of the last character
    set (a part whose length is 0 mod 4 has none: it gets padding instead)."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    if len(part) % 4 == 0:
        return part + "=="
    unused = {2: 0b1111, 3: 0b11}[len(part) % 4]
    return part[:-1] + alphabet[alphabet.index(part[-1]) | unused]


@pytest.mark.parametrize(
    "mangle",
    [
        lambda h, p, s: f"{h}.{p}.{s}==",
        lambda h, p, s: f"{h}.{p}.{s}=",
        lambda h, p, s: f"{h}.{p}.{respelled(s)}",
        lambda h, p, s: f"{respelled(h)}.{p}.{s}",
        lambda h, p, s: f"{h}.{respelled(p)}.{s}",
        lambda h, p, s: f"{h}.{p}.{s.replace('-', '+').replace('_', '/')}",
        lambda h, p, s: f"{h}.{p}.{s}.",
        lambda h, p, s: f"{h}..{p}.{s}",
        lambda h, p, s: f" {h}.{p}.{s}\t",
    ],
    ids=["pad2", "pad1", "sig-bits", "header-bits", "payload-bits", "std-alphabet",
         "four-parts", "empty-part", "whitespace"],
)  # fmt: skip
async def test_only_the_canonical_encoding_verifies(idp_keys, mangle) -> None:
    url, rsa, _ = idp_keys
    token = sign(rsa, "RS256")
    assert (await accepted(url, token)).subject == "user-1"
    mangled = mangle(*token.split("."))
    if mangled.strip() != token:  # surrounding whitespace is the header's, stripped
        await refused(url, mangled)


def signed_as_is(header: dict[str, Any], payload: dict[str, Any], key: Any) -> str:
    """RS256 over exactly this header (a JOSE library would refuse to write some of them)."""
    signing_input = f"{segment(header)}.{segment(payload)}"
    rs256 = pyjwt.get_algorithm_by_name("RS256")
    return f"{signing_input}.{b64(rs256.sign(signing_input.encode(), key.get_op_key('sign')))}"


@pytest.mark.parametrize(
    "header",
    [
        {"alg": "RS256", "kid": "rsa-key", "crit": ["exp"], "exp": 1},
        {"alg": "RS256", "kid": "rsa-key", "b64": True},
        {"alg": "RS256", "kid": ["rsa-key"]},
        {"alg": "RS256", "kid": {"id": "rsa-key"}},
        {"alg": "RS256", "kid": "rsa-key", "typ": 1},
        {"alg": "RS256", "kid": "rsa-key", "typ": "JWS"},
    ],
)
async def test_headers_out_of_bounds_are_refused(idp_keys, header) -> None:
    url, rsa, _ = idp_keys
    assert await accepted(url, signed_as_is({"alg": "RS256", "kid": "rsa-key"}, claims(), rsa))
    await refused(url, signed_as_is(header, claims(), rsa))


async def test_deep_or_huge_tokens_are_a_401(idp_keys) -> None:
    url, _, _ = idp_keys
    deep = b64(b'{"alg":"RS256","x":' + b"[" * 2000 + b"]" * 2000 + b"}")
    await refused(url, f"{deep}.{segment(claims())}.{b64(os.urandom(256))}")
    deep_payload = b64(b'{"sub":' + b"[" * 2000 + b"]" * 2000 + b"}")
    await refused(url, f"{segment({'alg': 'RS256', 'kid': 'rsa-key'})}.{deep_payload}.AAAA")
    huge = segment(claims(pad="x" * 40_000))
    await refused(url, f"{segment({'alg': 'RS256', 'kid': 'rsa-key'})}.{huge}.AAAA")


async def test_a_signed_token_with_odd_role_claims_has_no_roles(idp_keys) -> None:
    url, rsa, _ = idp_keys
    for odd in ("platform-admin", {"roles": "platform-admin"}, {"roles": [["platform-admin"]]}):
        principal = await accepted(url, sign(rsa, "RS256", realm_access=odd))
        assert principal.roles == frozenset() and not principal.is_platform_admin


# --- issue 19, defect 8: the key set's server hung ------------------------------------------


class HungServer:
    """A TCP server that accepts every connection and never answers: an identity provider
    that hangs. Records each connection and whether the client gave up on it (closed it)."""

    def __init__(self) -> None:
        self.accepted = 0
        self.abandoned = asyncio.Event()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        while await reader.read(4096):  # the request arrives; no answer is ever sent
            pass
        self.abandoned.set()  # EOF: the client closed the connection
        writer.close()


@pytest.fixture
async def hung() -> AsyncIterator[tuple[HungServer, str]]:
    server = HungServer()
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    yield server, f"http://127.0.0.1:{port}/certs"
    listener.close()


async def test_with_the_idp_hung_an_unknown_kid_waits_for_one_bounded_fetch(hung) -> None:
    server, url = hung
    auth = Authenticator(JwksCache(url), MASTER_KEY, issuer=ISSUER)
    stranger = RSAKey.generate_key(2048, parameters={"kid": "rotated-1"})
    bearer = {"authorization": f"Bearer {sign(stranger, 'RS256')}"}
    # Concurrent callers share the one fetch, which the cache gives up on: every one is a 401.
    outcomes = await asyncio.gather(*(auth.authenticate(bearer) for _ in range(5)),
                                    return_exceptions=True)  # fmt: skip
    assert all(isinstance(o, Unauthenticated) for o in outcomes), outcomes
    await asyncio.wait_for(server.abandoned.wait(), 30)  # the cache gave up on it
    assert server.accepted == 1
    # Another unknown kid, within the refresh interval, does not wait on the hung server again.
    other = RSAKey.generate_key(2048, parameters={"kid": "rotated-2"})
    with pytest.raises(Unauthenticated):
        await auth.authenticate({"authorization": f"Bearer {sign(other, 'RS256')}"})
    assert server.accepted == 1


def test_every_service_bounds_its_key_set_fetch_to_a_second(config_for) -> None:
    config = config_for(EdgeConfig)
    unused: Any = None  # building a key cache reads no store
    caches = [
        authenticator_for(config).jwks,
        plugin_env(config, Stores(kv=unused, sink=unused)).jwks,
    ]
    agent = config_for(AgentGatewayConfig, SVC_AGENT_IDENTITY="on",
                       STS_JWKS_URL="http://127.0.0.1:9/sts/jwks")  # fmt: skip
    caches.append(HopVerifier(agent, unused).jwks)
    assert [cache.fetch_timeout for cache in caches] == [JWKS_FETCH_TIMEOUT_SECS] * 3
    assert JWKS_FETCH_TIMEOUT_SECS <= 1.0


@pytest.mark.parametrize(
    "document", [[], {"keys": "x"}, {"keys": [1, "a", None]}, {"keys": [{"kty": "RSA"}]}, "x"]
)
async def test_a_key_set_of_the_wrong_shape_is_no_key_and_a_401(document) -> None:
    async def certs(_: web.Request) -> web.Response:
        return web.json_response(document)

    app = web.Application()
    app.router.add_get("/certs", certs)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        key = RSAKey.generate_key(2048, parameters={"kid": "k1"})
        await refused(f"http://127.0.0.1:{port}/certs", sign(key, "RS256"))
    finally:
        await runner.cleanup()
