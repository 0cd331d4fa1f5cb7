"""Per-server auth (spec: "Per-server auth config", Authentication table): the secret is
write-only and sealed at rest; OAuth2 client credentials against a real local token
endpoint, the token cached; strict refuses without a token, permissive calls without one,
optional sends none."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from agent_kit import call, registry_of, server_body
from aiohttp import web
from shared_kit import free_port

from gateways.agent.mcp import keys
from gateways.agent.mcp.errors import UpstreamAuthFailed

SECRET = "s3cr3t-value-never-shown"


@dataclass
class TokenEndpoint:
    """An OAuth2 token endpoint (client credentials, client_secret_basic)."""

    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    fail: bool = False
    issued: int = 0

    async def token(self, request: web.Request) -> web.Response:
        form = dict(await request.post())
        scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
        client = base64.b64decode(credentials).decode() if scheme == "Basic" else ""
        self.requests.append({**form, "client": client})
        if self.fail or client != f"mcp-client:{SECRET}":
            return web.json_response({"error": "invalid_client"}, status=401)
        self.issued += 1
        return web.json_response(
            {"access_token": f"tok-{self.issued}", "token_type": "Bearer", "expires_in": 3600}
        )


@pytest.fixture
async def token_endpoint() -> AsyncIterator[TokenEndpoint]:
    endpoint = TokenEndpoint()
    app = web.Application()
    app.router.add_post("/oauth/token", endpoint.token)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    endpoint.url = f"http://127.0.0.1:{port}/oauth/token"
    yield endpoint
    await runner.cleanup()


def auth_body(mode: str, token_url: str, secret: str = SECRET) -> dict:
    return {
        "mode": mode,
        "client_id": "mcp-client",
        "client_secret": secret,
        "required_scopes": ["tools:read", "tools:call"],
        "token_endpoint": token_url,
    }


async def test_secret_is_write_only_and_sealed(gateway, alice, upstream, token_endpoint, kv):
    up = upstream()
    async with gateway() as svc:
        await call(svc, "POST", "/v1/mcp/servers", alice, server_body(up, id="authd"))
        status, body = await call(svc, "GET", "/v1/mcp/servers/authd/auth", alice)
        assert status == 200 and body["auth_config"]["client_secret"] == "***REDACTED***"

        put = auth_body("strict", token_endpoint.url)
        status, body = await call(svc, "PUT", "/v1/mcp/servers/authd/auth", alice, put)
        assert (status, body) == (200, {"status": "ok", "server_id": "authd", "mode": "strict"})
        status, body = await call(svc, "GET", "/v1/mcp/servers/authd/auth", alice)
        assert status == 200
        assert body == {
            "server_id": "authd",
            "auth_config": {
                "mode": "strict",
                "oauth_url": None,
                "client_id": "mcp-client",
                "client_secret": "***REDACTED***",
                "required_scopes": ["tools:read", "tools:call"],
                "token_endpoint": token_endpoint.url,
            },
        }
        stored = await kv.get(keys.auth_config("authd"))
        assert SECRET not in stored and "client_secret_sealed" in stored
        # Sending the redacted text back keeps the stored secret.
        again = auth_body("strict", token_endpoint.url, secret="***REDACTED***")
        assert (await call(svc, "PUT", "/v1/mcp/servers/authd/auth", alice, again))[0] == 200
        server = await registry_of(svc).store.get("authd")
        assert server is not None
        await registry_of(svc).forwarder.call_tool(server, "echo", {"text": "x"}, timeout=10)
        assert token_endpoint.issued == 1

        status, body = await call(svc, "PUT", "/v1/mcp/servers/nope/auth", alice, put)
        assert status == 404 and body["error"] == "server_not_found"
        bad = {**put, "mode": "sometimes"}
        assert (await call(svc, "PUT", "/v1/mcp/servers/authd/auth", alice, bad))[0] == 400
        imds = {**put, "token_endpoint": "http://169.254.169.254/token"}
        status, body = await call(svc, "PUT", "/v1/mcp/servers/authd/auth", alice, imds)
        assert status == 400 and body["field"] == "token_endpoint"


async def test_urls_on_names_that_do_not_resolve_here_are_accepted(gateway, alice, upstream):
    """Issue 22.1: a server URL or an `oauth_url` on a cluster-only name is stored; the
    connection made later checks the address the name then resolves to."""
    up = upstream()
    offline = "http://mcp-tools.agents.svc.cluster.local:8080/mcp"
    tools = [{"name": "echo", "description": "echo", "inputSchema": {"type": "object"}}]
    async with gateway() as svc:
        body = {**server_body(up, id="offline"), "url": offline, "tools": tools}
        status, answer = await call(svc, "POST", "/v1/mcp/servers", alice, body)
        assert status == 201, answer
        put = {
            **auth_body("strict", "https://sso.strata-test.invalid/token"),
            "oauth_url": "https://sso.strata-test.invalid/authorize",
        }
        status, answer = await call(svc, "PUT", "/v1/mcp/servers/offline/auth", alice, put)
        assert status == 200, answer
        status, answer = await call(svc, "GET", "/v1/mcp/servers/offline/auth", alice)
        assert answer["auth_config"]["oauth_url"] == "https://sso.strata-test.invalid/authorize"


async def test_strict_sends_a_cached_client_credentials_token(
    gateway, alice, upstream, token_endpoint
):
    up = upstream()
    async with gateway() as svc, gateway() as other:
        await call(svc, "POST", "/v1/mcp/servers", alice, server_body(up, id="strict"))
        put = auth_body("strict", token_endpoint.url)
        await call(svc, "PUT", "/v1/mcp/servers/strict/auth", alice, put)
        for replica in (svc, other, svc):
            registry = registry_of(replica)
            server = await registry.store.get("strict")
            assert server is not None
            result = await registry.forwarder.call_tool(server, "echo", {"text": "x"}, timeout=10)
            assert not result.is_error
        # One token for every call on both replicas, asked with the required scopes.
        assert token_endpoint.issued == 1
        assert token_endpoint.requests[0]["grant_type"] == "client_credentials"
        assert token_endpoint.requests[0]["scope"] == "tools:read tools:call"
        calls = [s for s in up.seen if s.rpc_method == "tools/call"]
        assert {s.headers.get("authorization") for s in calls} == {"Bearer tok-1"}


async def test_strict_refuses_without_a_token(gateway, alice, upstream, token_endpoint):
    up = upstream()
    token_endpoint.fail = True
    async with gateway() as svc:
        await call(svc, "POST", "/v1/mcp/servers", alice, server_body(up, id="refused"))
        put = auth_body("strict", token_endpoint.url)
        await call(svc, "PUT", "/v1/mcp/servers/refused/auth", alice, put)
        registry = registry_of(svc)
        server = await registry.store.get("refused")
        assert server is not None
        before = up.count("tools/call")
        with pytest.raises(UpstreamAuthFailed) as caught:
            await registry.forwarder.call_tool(server, "echo", {"text": "x"}, timeout=10)
        assert caught.value.http_status == 502 and caught.value.error == "upstream_auth_failed"
        assert SECRET not in caught.value.message
        assert up.count("tools/call") == before  # nothing reached the upstream


async def test_permissive_calls_without_auth_and_optional_sends_none(
    gateway, alice, upstream, token_endpoint
):
    up = upstream()
    token_endpoint.fail = True
    async with gateway() as svc:
        await call(svc, "POST", "/v1/mcp/servers", alice, server_body(up, id="lenient"))
        registry = registry_of(svc)
        for mode in ("permissive", "optional"):
            put = auth_body(mode, token_endpoint.url)
            await call(svc, "PUT", "/v1/mcp/servers/lenient/auth", alice, put)
            asked = len(token_endpoint.requests)
            server = await registry.store.get("lenient")
            assert server is not None
            result = await registry.forwarder.call_tool(server, "echo", {"text": mode}, timeout=10)
            assert result.result["content"][0]["text"] == mode
            last = [s for s in up.seen if s.rpc_method == "tools/call"][-1]
            assert "authorization" not in last.headers
            assert len(token_endpoint.requests) == asked + (1 if mode == "permissive" else 0)


@pytest.mark.parametrize("mode", ["strict", "permissive", "optional"])
async def test_a_server_without_client_or_endpoint_uses_the_platform_settings(
    gateway, alice, upstream, token_endpoint, mode
):
    """Issue 22.2: the per-server config overrides the platform identity provider's settings,
    so `{mode, client_secret, required_scopes}` alone is accepted for every mode; the token
    then comes from the platform's endpoint with the platform's client."""
    up = upstream()
    platform = {"AGENT_MCP_CLIENT_ID": "mcp-client", "AGENT_MCP_TOKEN_ENDPOINT": token_endpoint.url}
    async with gateway(**platform) as svc:
        await call(svc, "POST", "/v1/mcp/servers", alice, server_body(up, id=f"global-{mode}"))
        put = {"mode": mode, "client_secret": SECRET, "required_scopes": ["tools:call"]}
        status, body = await call(svc, "PUT", f"/v1/mcp/servers/global-{mode}/auth", alice, put)
        assert (status, body) == (
            200,
            {"status": "ok", "server_id": f"global-{mode}", "mode": mode},
        )
        _, body = await call(svc, "GET", f"/v1/mcp/servers/global-{mode}/auth", alice)
        view = body["auth_config"]
        assert (view["client_id"], view["token_endpoint"], view["oauth_url"]) == (None, None, None)
        registry = registry_of(svc)
        server = await registry.store.get(f"global-{mode}")
        assert server is not None
        result = await registry.forwarder.call_tool(server, "echo", {"text": "x"}, timeout=10)
        assert not result.is_error
        last = [s for s in up.seen if s.rpc_method == "tools/call"][-1]
        if mode == "optional":
            assert "authorization" not in last.headers and token_endpoint.issued == 0
        else:
            assert last.headers.get("authorization") == "Bearer tok-1"
            assert token_endpoint.requests[-1]["client"] == f"mcp-client:{SECRET}"
            assert token_endpoint.requests[-1]["scope"] == "tools:call"


async def test_without_platform_settings_strict_names_the_missing_client(gateway, alice, upstream):
    up = upstream()
    async with gateway() as svc:
        await call(svc, "POST", "/v1/mcp/servers", alice, server_body(up, id="noclient"))
        for mode in ("strict", "permissive"):
            put: dict[str, Any] = {"mode": mode, "client_secret": SECRET, "required_scopes": []}
            status, body = await call(svc, "PUT", "/v1/mcp/servers/noclient/auth", alice, put)
            assert status == 400 and body["field"] == "client_id", body
            assert "AGENT_MCP_CLIENT_ID" in body["message"]
        put = {"mode": "optional", "client_secret": "", "required_scopes": []}
        assert (await call(svc, "PUT", "/v1/mcp/servers/noclient/auth", alice, put))[0] == 200


def legacy_sealed(secret: str, server_id: str, key_material: str) -> str:
    """A client secret as the gateway sealed it before the platform keyring (`v1:`)."""
    import os

    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    key = HKDF(
        algorithm=hashes.SHA256(), length=32, salt=b"strata-agent-gateway",
        info=b"mcp client_secret v1",
    ).derive(key_material.encode())  # fmt: skip
    nonce = os.urandom(12)
    sealed = AESGCM(key).encrypt(nonce, secret.encode(), server_id.encode())
    return "v1:" + base64.urlsafe_b64encode(nonce + sealed).decode()


async def test_legacy_and_rotated_secrets_are_resealed_at_start_and_tokens_sealed(
    gateway, alice, upstream, token_endpoint, kv
):
    """A client secret sealed before the keyring (`v1:`, under MASTER_KEY) still works and is
    re-sealed under the newest data key at start; after a rotation (a new key first) the next
    start re-seals again, the old key still opening it meanwhile; the cached access token is
    sealed too."""
    import json

    from shared_kit import MASTER_KEY

    from runtime.keyring import kid_of, new_key

    up = upstream()
    k1, k2 = new_key("k1"), new_key("k2")
    async with gateway(STRATA_DATA_KEYS=k1) as svc:
        await call(svc, "POST", "/v1/mcp/servers", alice, server_body(up, id="legacy"))
    stored = {
        "mode": "strict", "oauth_url": None, "client_id": "mcp-client",
        "client_secret_sealed": legacy_sealed(SECRET, "legacy", MASTER_KEY),
        "required_scopes": [], "token_endpoint": token_endpoint.url,
    }  # fmt: skip
    await kv.set(keys.auth_config("legacy"), json.dumps(stored))

    async with gateway(STRATA_DATA_KEYS=k1) as svc:
        sealed = json.loads(await kv.get(keys.auth_config("legacy")))["client_secret_sealed"]
        assert kid_of(sealed) == "k1" and SECRET not in sealed
        server = await registry_of(svc).store.get("legacy")
        assert server is not None
        await registry_of(svc).forwarder.call_tool(server, "echo", {"text": "x"}, timeout=10)
        assert token_endpoint.issued == 1 and token_endpoint.requests[-1]["client"].endswith(SECRET)
        cached = await kv.get(keys.oauth_token("legacy"))
        assert "tok-1" not in cached and kid_of(cached) == "k1"

    async with gateway(STRATA_DATA_KEYS=f"{k2},{k1}") as svc:
        sealed = json.loads(await kv.get(keys.auth_config("legacy")))["client_secret_sealed"]
        assert kid_of(sealed) == "k2"
        server = await registry_of(svc).store.get("legacy")
        assert server is not None
        await registry_of(svc).forwarder.call_tool(server, "echo", {"text": "y"}, timeout=10)
        assert token_endpoint.issued == 1  # the token cached under k1 still opens
