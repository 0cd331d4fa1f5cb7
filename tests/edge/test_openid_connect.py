"""openid-connect bearer-only against the real dev IdP's tokens and key set."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import time
from typing import Any

import aiohttp
import jwt as pyjwt
import pytest
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from edge_kit import make_plugin, request, route, serve_edge, upstream
from shared_kit import service_token, user_token

from gateways.edge.plugin import PluginEnv
from gateways.edge.plugins import openid_connect
from runtime.auth import JwksCache


def oidc_env(idp: str) -> PluginEnv:
    env = PluginEnv()
    env.jwks = JwksCache(f"{idp}/protocol/openid-connect/certs")
    return env


def conf(idp: str, **extra: object) -> dict:
    return {
        "client_id": "strata-edge",
        "discovery": f"{idp}/.well-known/openid-configuration",
        "bearer_only": True,
        "use_jwks": True,
        **extra,
    }


async def test_valid_token_sets_claims_tenant_and_upstream_headers(idp: str) -> None:
    plugin = make_plugin("openid-connect", conf(idp), oidc_env(idp))
    token = await user_token(idp)
    ctx = request(headers={"Authorization": f"Bearer {token}"})
    assert await plugin.rewrite(ctx) is None
    assert ctx.jwt_claims is not None
    assert ctx.jwt_claims["preferred_username"] == "alice"
    assert ctx.tenant_id and ctx.tenant_id == ctx.jwt_claims["tenant_id"]
    assert ctx.upstream_headers["x-access-token"] == token
    x_userinfo = ctx.upstream_headers["x-userinfo"]
    assert x_userinfo is not None
    userinfo = json.loads(base64.b64decode(x_userinfo))
    assert userinfo["sub"] == ctx.jwt_claims["sub"]


def count_verifications(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tokens openid-connect verifies (signature and claims), in order."""
    verified: list[str] = []
    real = openid_connect.verify

    async def counted(token: str, *args: Any) -> dict[str, Any]:
        verified.append(token)
        return await real(token, *args)

    monkeypatch.setattr(openid_connect, "verify", counted)
    return verified


async def test_repeated_token_is_a_cache_hit(idp: str, monkeypatch: pytest.MonkeyPatch) -> None:
    verified = count_verifications(monkeypatch)
    plugin = make_plugin("openid-connect", conf(idp), oidc_env(idp))
    token, other = await user_token(idp), await user_token(idp, "bob", "bob")
    for _ in range(3):
        ctx = request(headers={"authorization": f"Bearer {token}"})
        assert await plugin.rewrite(ctx) is None
        assert ctx.jwt_claims and ctx.jwt_claims["preferred_username"] == "alice"
        assert ctx.upstream_headers["x-userinfo"]
    assert verified == [token]
    ctx = request(headers={"authorization": f"Bearer {other}"})
    assert await plugin.rewrite(ctx) is None  # another token: its own entry, its own claims
    assert ctx.jwt_claims and ctx.jwt_claims["preferred_username"] == "bob"
    assert verified == [token, other]
    assert all(len(key) == 32 for key in plugin._cache)  # SHA-256 digests, not the tokens


async def test_a_remembered_token_is_refused_from_its_exp(
    idp: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache holds a token only until its `exp`: then it is verified again (and refused
    as expired), as it would be without the cache."""
    verified = count_verifications(monkeypatch)
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo).decode()
    plugin = make_plugin("openid-connect", conf(idp, public_key=pem), PluginEnv())
    exp = int(time.time()) + 2
    token = pyjwt.encode(_claims(idp, exp=exp), key, algorithm="ES256")
    for _ in range(2):
        assert await plugin.rewrite(request(headers={"authorization": f"Bearer {token}"})) is None
    assert len(verified) == 1  # the second one came from the cache
    await asyncio.sleep(exp - time.time() + 0.05)
    reply = await plugin.rewrite(request(headers={"authorization": f"Bearer {token}"}))
    assert reply is not None and reply.status == 401
    assert 'error_description="token expired"' in reply.headers["WWW-Authenticate"]
    assert len(verified) == 2


async def test_the_cache_is_bounded(idp: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(openid_connect, "CACHE_SIZE", 3)
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo).decode()
    plugin = make_plugin("openid-connect", conf(idp, public_key=pem), PluginEnv())
    tokens = [pyjwt.encode(_claims(idp, sub=f"user-{i}"), key, algorithm="ES256") for i in range(5)]
    for token in tokens:
        assert await plugin.rewrite(request(headers={"authorization": f"Bearer {token}"})) is None
    assert len(plugin._cache) == 3  # the least recently used went first
    verified = count_verifications(monkeypatch)
    for token in tokens[2:]:
        assert await plugin.rewrite(request(headers={"authorization": f"Bearer {token}"})) is None
    assert verified == []
    assert await plugin.rewrite(request(headers={"authorization": f"Bearer {tokens[0]}"})) is None
    assert verified == [tokens[0]]


async def test_a_key_rotated_away_stops_vouching_for_remembered_tokens(
    idp: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key set (a real HTTP server) adds key `b`, then drops key `a`: a key added takes
    nothing back (`a`'s tokens stay remembered), but once the edge's key set sees `a` gone (a
    token naming an unknown key makes it fetch), a token signed by `a` is refused, even one
    verified (and remembered) a moment before."""
    keys = {kid: ec.generate_private_key(ec.SECP256R1()) for kid in "abc"}
    served = ["a"]

    async def certs(_request: web.Request) -> web.Response:
        jwks = []
        for kid in served:
            jwk = json.loads(pyjwt.algorithms.ECAlgorithm.to_jwk(keys[kid].public_key()))
            jwks.append({**jwk, "kid": kid, "alg": "ES256", "use": "sig"})
        return web.json_response({"keys": jwks})

    async def answer(token: str) -> int | None:
        reply = await plugin.rewrite(request(headers={"authorization": f"Bearer {token}"}))
        return reply.status if reply is not None else None

    async with upstream(certs) as port:
        env = PluginEnv()
        env.jwks = JwksCache(f"http://127.0.0.1:{port}/certs", min_refresh_secs=0)
        plugin = make_plugin("openid-connect", conf(idp), env)

        def signed(kid: str) -> str:
            return pyjwt.encode(_claims(idp), keys[kid], algorithm="ES256", headers={"kid": kid})

        old, new, unknown = signed("a"), signed("b"), signed("c")
        assert await answer(old) is None
        verified = count_verifications(monkeypatch)
        served[:] = ["a", "b"]  # the identity provider adds a key
        assert await answer(new) is None  # fetched: a key added
        assert await answer(old) is None
        assert verified == [new]  # `old` still remembered
        served[:] = ["b"]  # ... and retires the old one
        assert await answer(unknown) == 401  # fetched: `a` gone
        assert await answer(old) == 401
        assert verified == [new, unknown, old]  # verified again, not answered from the cache
        assert await answer(new) is None


async def test_missing_and_invalid_tokens(idp: str) -> None:
    plugin = make_plugin("openid-connect", conf(idp), oidc_env(idp))
    missing = await plugin.rewrite(request())
    assert missing.status == 401
    assert missing.headers["WWW-Authenticate"] == 'Bearer realm="apisix"'
    token = await user_token(idp)
    head, _payload, sig = token.split(".")
    forged = base64.urlsafe_b64encode(b'{"sub":"x","tenant_id":"evil","exp":9999999999}')
    tampered = f"{head}.{forged.decode().rstrip('=')}.{sig}"
    for bad in ("not-a-jwt", tampered):
        reply = await plugin.rewrite(request(headers={"authorization": f"Bearer {bad}"}))
        assert reply.status == 401
        assert reply.headers["WWW-Authenticate"].startswith(
            'Bearer realm="apisix", error="invalid_token", error_description="'
        )


async def test_issuer_is_checked(idp: str) -> None:
    plugin = make_plugin(
        "openid-connect",
        conf(idp, claim_validator={"issuer": {"valid_issuers": ["https://elsewhere"]}}),
        oidc_env(idp),
    )
    token = await service_token(idp)
    reply = await plugin.rewrite(request(headers={"authorization": f"Bearer {token}"}))
    assert reply.status == 401


async def test_unauth_action_pass_and_required_scopes(idp: str) -> None:
    plugin = make_plugin("openid-connect", conf(idp, unauth_action="pass"), oidc_env(idp))
    assert await plugin.rewrite(request()) is None
    plugin = make_plugin("openid-connect", conf(idp, required_scopes=["admin:all"]), oidc_env(idp))
    token = await user_token(idp)
    reply = await plugin.rewrite(request(headers={"authorization": f"Bearer {token}"}))
    assert reply.status == 403


# --- issue 19: algorithm confusion, audience, token type, sub, strict form ------------------


# Deeper than the JSON codec's 100 levels, yet short enough to stay under the 8,190-byte
# header limit (a longer one is the edge's 431 before any plugin runs).
DEEP_HEADER = b'{"alg":"RS256","x":' + b"[" * 150 + b"]" * 150 + b"}"


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _segment(value: object) -> str:
    return _b64(json.dumps(value, separators=(",", ":")).encode())


async def _kids(idp: str) -> dict[str, str]:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{idp}/protocol/openid-connect/certs") as resp,
    ):
        return {key["alg"]: key["kid"] for key in (await resp.json())["keys"]}


def _claims(idp: str, **changes: object) -> dict:
    now = int(time.time())
    claims = {"iss": idp, "aud": "strata", "sub": "intruder", "tenant_id": "acme",
              "iat": now, "exp": now + 300, **changes}  # fmt: skip
    return {name: value for name, value in claims.items() if value is not None}


async def _forged(idp: str) -> dict[str, str]:
    """Tokens the edge used to answer with a 500 or to accept: the key type confusions (any
    signature), a real token of the dev IdP with its signature padded or its `sub` removed,
    and a header nested thousands of levels deep."""
    kids = await _kids(idp)
    access = await user_token(idp)
    head, payload, signature = access.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    return {
        "ES256 naming the RSA key": f"{_segment({'alg': 'ES256', 'kid': kids['RS256']})}."
        f"{_segment(_claims(idp))}.{_b64(os.urandom(64))}",
        "RS256 naming the EC key": f"{_segment({'alg': 'RS256', 'kid': kids['ES256']})}."
        f"{_segment(_claims(idp))}.{_b64(os.urandom(256))}",
        "signature padded": f"{access}==",
        "no sub": f"{head}.{_segment({k: v for k, v in claims.items() if k != 'sub'})}.{signature}",
        "deep header": f"{_b64(DEEP_HEADER)}.{payload}.{signature}",
    }


async def test_forged_and_confused_tokens_are_401s(idp: str) -> None:
    plugin = make_plugin("openid-connect", conf(idp), oidc_env(idp))
    for name, token in (await _forged(idp)).items():
        reply = await plugin.rewrite(request(headers={"authorization": f"Bearer {token}"}))
        assert reply is not None and reply.status == 401, name
        assert reply.body == {"message": "Invalid access token"}, name


async def test_a_signed_token_without_sub_or_for_another_audience_is_refused(idp: str) -> None:
    """Signed by a key the route trusts (`public_key`), so only the claims can refuse them."""
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo).decode()
    plugin = make_plugin("openid-connect", conf(idp, public_key=pem), PluginEnv())

    async def answer(**changes: object) -> int | None:
        token = pyjwt.encode(_claims(idp, **changes), key, algorithm="ES256")
        reply = await plugin.rewrite(request(headers={"authorization": f"Bearer {token}"}))
        return None if reply is None else reply.status

    assert await answer() is None  # accepted
    assert await answer(sub=None) == 401
    assert await answer(iat=None) == 401
    assert await answer(aud="account") == 401
    assert await answer(aud=None) == 401
    assert await answer(typ="ID") == 401
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    other = pyjwt.encode(_claims(idp), rsa_key, algorithm="RS256")
    reply = await plugin.rewrite(request(headers={"authorization": f"Bearer {other}"}))
    assert reply is not None and reply.status == 401  # RS256 against an EC public_key


async def test_the_edges_audiences_are_its_idp_audiences(idp: str) -> None:
    env = oidc_env(idp)
    env.audiences = ("https://api.example",)
    plugin = make_plugin("openid-connect", conf(idp), env)
    token = await user_token(idp)  # aud: strata
    reply = await plugin.rewrite(request(headers={"authorization": f"Bearer {token}"}))
    assert reply is not None and reply.status == 401
    env.audiences = ("https://api.example", "strata")
    plugin = make_plugin("openid-connect", conf(idp), env)
    assert await plugin.rewrite(request(headers={"authorization": f"Bearer {token}"})) is None


async def test_through_the_data_plane_no_token_is_a_500_nor_an_error_line(idp, caplog) -> None:
    caplog.set_level(logging.WARNING)
    async with upstream() as port, serve_edge(oidc_env(idp)) as edge:
        edge.apply(routes=[route("r1", "/api/*", port,
                                 plugins={"openid-connect": conf(idp)})])  # fmt: skip
        for name, token in (await _forged(idp)).items():
            bearer = {"Authorization": f"Bearer {token}"}
            status, body, _ = await edge.call("/api/x", headers=bearer)
            assert (status, body) == (401, {"message": "Invalid access token"}), name
        status, _, _ = await edge.call(
            "/api/x", headers={"Authorization": f"Bearer {await user_token(idp)}"}
        )
        assert status == 200
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []
