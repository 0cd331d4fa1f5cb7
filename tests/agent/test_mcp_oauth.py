"""How an MCP client learns to log in to `/mcp` (the MCP authorization specification): the
401's `WWW-Authenticate` challenge, the RFC 9728 protected resource metadata, and the whole walk
with the official `mcp` SDK's OAuth client against the dev IdP as its own process: discovery,
dynamic registration, the login page, the code exchange with PKCE, then tools listed and called
with the token the SDK obtained."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import parse_qs, urljoin, urlsplit

import aiohttp
import httpx2
import jwt
import pytest
from agent_kit import call, server_body
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from pydantic import AnyUrl
from shared_kit import idp_process, user_token

# Store-facing: runs on the session's Valkey cluster (issue 24; tests/conftest.py).
pytestmark = pytest.mark.kv_cluster

CALLBACK = "http://127.0.0.1:33418/callback"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}


async def post_mcp(
    url: str, headers: dict[str, str], method: str = "POST"
) -> aiohttp.ClientResponse:
    sent = {"Accept": "application/json, text/event-stream", **headers}
    async with (
        aiohttp.ClientSession() as http,
        http.request(method, f"{url}/mcp", json=INITIALIZE, headers=sent) as resp,
    ):
        await resp.read()
        return resp


@pytest.mark.parametrize("method", ["POST", "DELETE"])
async def test_a_401_names_the_resource_metadata(gateway, method):
    async with gateway() as svc:
        anonymous = await post_mcp(svc.http_url, {}, method)
        forged = await post_mcp(svc.http_url, {"Authorization": "Bearer not-a-token"}, method)
    metadata = f"{svc.http_url}/.well-known/oauth-protected-resource/mcp"
    assert anonymous.status == 401
    # No credentials: no error code (RFC 6750 §3.1), only where to learn how to get some.
    assert anonymous.headers["WWW-Authenticate"] == (
        f'Bearer resource_metadata="{metadata}", scope="openid tenant"'
    )
    assert forged.status == 401
    assert forged.headers["WWW-Authenticate"] == (
        f'Bearer resource_metadata="{metadata}", scope="openid tenant", '
        'error="invalid_token", error_description="Invalid or expired token"'
    )


async def test_the_protected_resource_metadata_names_the_idp(gateway, idp):
    async with gateway() as svc, aiohttp.ClientSession() as http:
        documents = []
        for path in ("/.well-known/oauth-protected-resource/mcp",
                     "/.well-known/oauth-protected-resource"):  # fmt: skip
            async with http.get(svc.http_url + path) as resp:
                assert resp.status == 200
                assert resp.headers["Access-Control-Allow-Origin"] == "*"
                documents.append(await resp.json())
    assert documents[0] == documents[1]
    assert documents[0] == {
        "resource": f"{svc.http_url}/mcp",
        "authorization_servers": [idp],
        "scopes_supported": ["openid", "tenant"],
        "bearer_methods_supported": ["header"],
        "resource_name": "Strata agent gateway (MCP)",
    }


async def test_a_public_url_is_what_the_metadata_and_the_challenge_name(gateway):
    public = "https://agents.example.com"
    async with gateway(AGENT_PUBLIC_URL=public + "/") as svc:
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"{svc.http_url}/.well-known/oauth-protected-resource") as resp,
        ):
            document = await resp.json()
        challenged = await post_mcp(svc.http_url, {})
    assert document["resource"] == f"{public}/mcp"
    metadata = f"{public}/.well-known/oauth-protected-resource/mcp"
    assert f'resource_metadata="{metadata}"' in challenged.headers["WWW-Authenticate"]


class LoginForm(HTMLParser):
    """What a browser reads off the login page: the form's action."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.action: str | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "form" and self.action is None:
            self.action = dict(attrs).get("action")


class Browser:
    """The person at the browser: opens the authorization URL the SDK hands over, signs in as
    alice on the IdP's login page, and keeps where the IdP sent the browser back to."""

    def __init__(self) -> None:
        self.callback: dict[str, list[str]] = {}

    async def open(self, authorization_url: str) -> None:
        async with httpx2.AsyncClient() as browser:
            page = await browser.get(authorization_url)
            assert page.status_code == 200, page.text
            action = LoginForm(page.text).action
            assert action is not None
            answer = await browser.post(
                urljoin(authorization_url, action), data={"username": "alice", "password": "alice"}
            )
        assert answer.status_code == 302, answer.text
        location = answer.headers["Location"]
        assert location.startswith(CALLBACK + "?")
        self.callback = parse_qs(urlsplit(location).query)

    async def came_back(self) -> AuthorizationCodeResult:
        (code,), (state,), (iss,) = (self.callback[k] for k in ("code", "state", "iss"))
        return AuthorizationCodeResult(code=code, state=state, iss=iss)


class MemoryStorage:
    """The SDK's token storage, in memory (a desktop client would keep it on disk)."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


async def test_the_mcp_sdk_logs_alice_in_through_the_idp_and_calls_a_tool(
    gateway, upstream, tmp_path: Path
):
    up = upstream()
    async with idp_process(tmp_path / "idp") as issuer:
        identity = {"IDP_ISSUER": issuer, "IDP_JWKS_URL": f"{issuer}/protocol/openid-connect/certs"}
        async with gateway(**identity) as svc:
            alice = {"Authorization": f"Bearer {await user_token(issuer)}"}
            status, _ = await call(svc, "POST", "/v1/mcp/servers", alice, server_body(up, id="o"))
            assert status == 201

            browser, storage = Browser(), MemoryStorage()
            provider = OAuthClientProvider(
                server_url=f"{svc.http_url}/mcp",
                client_metadata=OAuthClientMetadata(
                    redirect_uris=[AnyUrl(CALLBACK)], client_name="Strata test client"
                ),
                storage=storage,
                redirect_handler=browser.open,
                callback_handler=browser.came_back,
            )
            http = httpx2.AsyncClient(auth=provider)
            transport = streamable_http_client(f"{svc.http_url}/mcp", http_client=http)
            async with Client(transport, mode="legacy", cache=None) as client:
                listing = await client.list_tools()
                assert sorted(t.name for t in listing.tools) == ["add", "echo", "explode"]
                result = await client.call_tool("add", {"a": 2, "b": 3})
                assert not result.is_error and result.structured_content == {"result": 5}
    assert up.count("tools/call") == 1
    # The SDK registered itself (RFC 7591) and holds a token of alice, tenant acme, for it.
    assert storage.client_info is not None and storage.tokens is not None
    assert storage.client_info.token_endpoint_auth_method == "none"
    claims = jwt.decode(storage.tokens.access_token, options={"verify_signature": False})
    assert claims["iss"] == issuer and claims["azp"] == storage.client_info.client_id
    assert claims["preferred_username"] == "alice" and claims["tenant_id"] == "acme"
    assert storage.tokens.refresh_token
