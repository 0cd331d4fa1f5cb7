"""openid-connect bearer-only against the real dev IdP's tokens and key set."""

from __future__ import annotations

import base64
import json
import time

from helpers import make_plugin, request
from support import service_token, user_token

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
    assert ctx.jwt_claims["preferred_username"] == "alice"
    assert ctx.tenant_id and ctx.tenant_id == ctx.jwt_claims["tenant_id"]
    assert ctx.upstream_headers["x-access-token"] == token
    userinfo = json.loads(base64.b64decode(ctx.upstream_headers["x-userinfo"]))
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
