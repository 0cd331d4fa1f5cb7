"""key-auth and jwt-auth with real RequestContexts; jwt-auth tokens signed by joserfc, an
independent JOSE library."""

from __future__ import annotations

import asyncio
import base64
import time

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from edge_kit import make_plugin, request
from joserfc import jwt as jose_jwt
from joserfc.jwk import ECKey, OctKey
from shared_kit import edge_snapshot, keyring_for_tests

from gateways.edge.dataplane.compile import _consumers
from gateways.edge.model.schema import check
from gateways.edge.plugin import PluginEnv
from gateways.edge.plugins import REGISTRY


def env_with(plugin: str, consumers: dict[str, dict]) -> PluginEnv:
    """The plugin's environment as the data plane builds it from these consumers (key-auth's
    keys indexed by their digests)."""
    env = PluginEnv()
    env.keyring = keyring_for_tests()
    snapshot = edge_snapshot(
        consumers=[{"username": n, "plugins": {plugin: c}} for n, c in consumers.items()]
    )
    env.consumers, env.credentials = _consumers(snapshot, env.keyring)
    return env


# ---- key-auth ------------------------------------------------------------------------------


async def test_key_auth_header_query_and_failures() -> None:
    env = env_with("key-auth", {"jack": {"key": "auth-one"}})
    plugin = make_plugin("key-auth", {}, env)

    ctx = request(headers={"apikey": "auth-one"})
    assert await plugin.rewrite(ctx) is None
    assert ctx.consumer is not None
    assert ctx.consumer_name == "jack" and ctx.consumer["username"] == "jack"
    assert ctx.upstream_headers["x-consumer-username"] == "jack"

    ctx = request(query="apikey=auth-one&x=1")
    assert await plugin.rewrite(ctx) is None and ctx.consumer_name == "jack"

    missing = await plugin.rewrite(request())
    assert (missing.status, missing.body) == (401, {"message": "Missing API key in request"})
    assert missing.headers["WWW-Authenticate"] == 'apikey realm="key"'
    wrong = await plugin.rewrite(request(headers={"apikey": "nope"}))
    assert (wrong.status, wrong.body) == (401, {"message": "Invalid API key in request"})


async def test_key_auth_hide_credentials_and_custom_names() -> None:
    env = env_with("key-auth", {"jack": {"key": "auth-one"}})
    plugin = make_plugin(
        "key-auth", {"header": "X-Key", "query": "k", "hide_credentials": True}, env
    )
    ctx = request(headers={"x-key": "auth-one"})
    assert await plugin.rewrite(ctx) is None
    assert ctx.upstream_headers["x-key"] is None
    ctx = request(query="a=1&k=auth-one")
    assert await plugin.rewrite(ctx) is None
    assert ctx.upstream_uri == "/api/things?a=1"


def test_key_auth_schemas() -> None:
    cls = REGISTRY["key-auth"]
    assert cls.consumer_schema is not None
    assert check(cls.consumer_schema, {}) == 'property "key" is required'
    assert cls.credential_field == "key"
    assert check(cls.schema, {"header": 1}).startswith('property "header" validation failed')  # type: ignore[union-attr]


# ---- jwt-auth ------------------------------------------------------------------------------


def hs_token(claims: dict, secret: bytes, alg: str = "HS256") -> str:
    return jose_jwt.encode({"alg": alg}, claims, OctKey.import_key(secret), algorithms=[alg])


async def test_jwt_auth_hs256_from_header_query_cookie() -> None:
    env = env_with(
        "jwt-auth", {"jack": {"key": "user-key", "secret": "my-secret-key-of-32-bytes-long!!"}}
    )
    plugin = make_plugin("jwt-auth", {}, env)
    token = hs_token(
        {"key": "user-key", "exp": int(time.time()) + 60}, b"my-secret-key-of-32-bytes-long!!"
    )
    for ctx in (
        request(headers={"Authorization": f"Bearer {token}"}),
        request(headers={"Authorization": token}),
        request(query=f"jwt={token}"),
        request(headers={"Cookie": f"a=b; jwt={token}"}),
    ):
        assert await plugin.rewrite(ctx) is None, ctx.headers
        assert ctx.jwt_claims is not None
        assert ctx.consumer_name == "jack" and ctx.jwt_claims["key"] == "user-key"


async def test_jwt_auth_failures_use_apisix_bodies() -> None:
    secret = b"my-secret-key-of-32-bytes-long!!"
    env = env_with("jwt-auth", {"jack": {"key": "user-key", "secret": secret.decode()}})
    plugin = make_plugin("jwt-auth", {}, env)

    async def reject(headers: dict) -> tuple:
        reply = await plugin.rewrite(request(headers=headers))
        assert reply.headers["WWW-Authenticate"] == 'Bearer realm="jwt"'
        return reply.status, reply.body["message"]

    now = int(time.time())
    assert await reject({}) == (401, "Missing JWT token in request")
    assert await reject({"authorization": "Bearer abc"}) == (401, "JWT token invalid")
    no_key = hs_token({"exp": now + 60}, secret)
    assert await reject({"authorization": no_key}) == (401, "missing user key in JWT token")
    other = hs_token({"key": "who", "exp": now + 60}, secret)
    assert await reject({"authorization": other}) == (401, "Invalid user key in JWT token")
    bad_sig = hs_token({"key": "user-key", "exp": now + 60}, b"x" * 32)
    assert await reject({"authorization": bad_sig}) == (401, "failed to verify jwt")
    expired = hs_token({"key": "user-key", "exp": now - 10}, secret)
    assert await reject({"authorization": expired}) == (401, "failed to verify jwt")
    wrong_alg = hs_token({"key": "user-key", "exp": now + 60}, secret, "HS512")
    assert await reject({"authorization": wrong_alg}) == (401, "failed to verify jwt")


async def test_jwt_auth_remembers_a_verified_token_until_exp_or_a_new_consumer_conf() -> None:
    secret = b"my-secret-key-of-32-bytes-long!!"
    env = env_with("jwt-auth", {"jack": {"key": "user-key", "secret": secret.decode()}})
    plugin = make_plugin("jwt-auth", {}, env)
    token = hs_token({"key": "user-key", "exp": int(time.time()) + 60}, secret)
    for _ in range(2):  # verified, then remembered
        ctx = request(headers={"authorization": token})
        assert await plugin.rewrite(ctx) is None and ctx.consumer_name == "jack"
    # a new configuration changes jack's secret: the remembered token is verified again
    changed_env = env_with("jwt-auth", {"jack": {"key": "user-key", "secret": "x" * 32}})
    env.consumers = changed_env.consumers
    changed = await plugin.rewrite(request(headers={"authorization": token}))
    assert changed.body == {"message": "failed to verify jwt"}
    # a remembered token is not accepted past its exp
    exp = int(time.time()) + 1
    short = hs_token({"key": "user-key", "exp": exp}, b"x" * 32)
    assert await plugin.rewrite(request(headers={"authorization": short})) is None
    await asyncio.sleep(exp - time.time() + 0.05)
    expired = await plugin.rewrite(request(headers={"authorization": short}))
    assert expired.body == {"message": "failed to verify jwt"}


async def test_jwt_auth_es256_hs512_base64_and_hide() -> None:
    private = ec.generate_private_key(ec.SECP256R1())
    public_pem = (
        private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    secret = b"\x01\x02" * 40
    env = env_with("jwt-auth", {
        "ec": {"key": "ec-key", "algorithm": "ES256", "public_key": public_pem},
        "hs": {"key": "hs-key", "algorithm": "HS512", "secret": base64.b64encode(secret).decode(),
               "base64_secret": True},
    })  # fmt: skip
    plugin = make_plugin("jwt-auth", {"hide_credentials": True}, env)
    ec_key = ECKey.import_key(private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ))  # fmt: skip
    exp = int(time.time()) + 60
    es = jose_jwt.encode(
        {"alg": "ES256"}, {"key": "ec-key", "exp": exp}, ec_key, algorithms=["ES256"]
    )
    ctx = request(headers={"authorization": f"Bearer {es}"})
    assert await plugin.rewrite(ctx) is None and ctx.consumer_name == "ec"
    assert ctx.upstream_headers["authorization"] is None
    hs = hs_token({"key": "hs-key", "exp": exp}, secret, "HS512")
    ctx = request(query=f"jwt={hs}&q=1")
    assert await plugin.rewrite(ctx) is None and ctx.consumer_name == "hs"
    assert ctx.upstream_uri == "/api/things?q=1"


def test_jwt_auth_consumer_schema() -> None:
    schema = REGISTRY["jwt-auth"].consumer_schema
    assert schema is not None
    assert check(schema, {"key": "k", "secret": "s"}) is None
    assert check(schema, {"key": "k", "algorithm": "RS256"}) == 'property "public_key" is required'
    assert check(schema, {"key": "k", "algorithm": "HS999", "secret": "s"}) is not None
