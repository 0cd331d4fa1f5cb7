"""openid-connect bearer-only against the real dev IdP's tokens and key set."""

from __future__ import annotations

import base64
import json
import logging
import os
import time

import aiohttp
import jwt as pyjwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from edge_kit import make_plugin, request, route, serve_edge, upstream
from shared_kit import service_token, user_token

from gateways.edge.plugin import PluginEnv
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


async def test_repeated_token_is_a_cache_hit(idp: str) -> None:
    plugin = make_plugin("openid-connect", conf(idp), oidc_env(idp))
    token = await user_token(idp)
    assert await plugin.rewrite(request(headers={"authorization": f"Bearer {token}"})) is None
    started = time.perf_counter()
    for _ in range(1000):
        await plugin.rewrite(request(headers={"authorization": f"Bearer {token}"}))
    per_call = (time.perf_counter() - started) / 1000
    assert per_call < 50e-6, per_call  # a signature check alone costs more than this


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
