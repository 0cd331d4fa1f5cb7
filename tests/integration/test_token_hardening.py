"""Issue 19, defects 3a and 4, at each service's door: a JWT whose header names the algorithm of
the identity provider's *other* key type (ES256 with the RSA key's kid, RS256 with the EC
key's) used to raise a TypeError in the JWT library — a 500 and a traceback at the control
plane, the STS (subject and actor tokens), the AI gateway, the agent gateway and the edge admin
API. Each answers 401 in its own envelope now, with nothing logged at error level; and the dev
IdP's ID token, a token for another audience and a token without `sub` are refused too.

The forgeries are built from the dev IdP's real key set (its RSA and EC `kid`s); valid tokens
come from its token endpoint. (The forged-token matrix over every variant is
tests/reliability/'s; these are the regression tests of the two defects.)
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from identity_kit import GRANT, Sts, controlplane, identity_stack
from shared_kit import ConfigFor, service_token, user_token

from gateways.agent.app import build as build_agent
from gateways.agent.config import AgentGatewayConfig
from gateways.ai.app import build as build_ai
from gateways.ai.config import AiGatewayConfig
from gateways.edge.app import build as build_edge
from gateways.edge.config import EdgeConfig
from runtime.config import ServiceConfig
from runtime.stores import Stores
from runtime.testing import Serving, serving

__all__ = ["controlplane"]  # fixtures

INVALID = "Invalid or expired token"


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def segment(value: Any) -> str:
    return b64(json.dumps(value, separators=(",", ":")).encode())


async def idp_kids(idp: str) -> dict[str, str]:
    """The dev IdP's key ids by algorithm (`RS256`: its RSA key, `ES256`: its EC key)."""
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{idp}/protocol/openid-connect/certs") as resp,
    ):
        keys = (await resp.json())["keys"]
    return {key["alg"]: key["kid"] for key in keys}


async def confused(idp: str) -> list[str]:
    """ES256 naming the RSA key, RS256 naming the EC key; claims a real token would carry,
    any signature."""
    kids = await idp_kids(idp)
    now = int(time.time())
    claims = {"iss": idp, "aud": "strata", "sub": "intruder", "tenant_id": "acme",
              "iat": now, "exp": now + 300, "agent_id": "agent:intruder"}  # fmt: skip
    return [
        f"{segment({'alg': alg, 'kid': kids[other], 'typ': 'JWT'})}.{segment(claims)}."
        f"{b64(os.urandom(size))}"
        for alg, other, size in (("ES256", "RS256", 64), ("RS256", "ES256", 256))
    ]


async def id_token(idp: str) -> str:
    form = {"grant_type": "password", "client_id": "strata-portal", "username": "alice",
            "password": "alice", "scope": "openid tenant"}  # fmt: skip
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{idp}/protocol/openid-connect/token", data=form) as resp,
    ):
        return str((await resp.json())["id_token"])


async def send(url: str, method: str, token: str, body: Any = None) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as http,
        http.request(method, url, json=body, headers={"Authorization": f"Bearer {token}"}) as r,
    ):
        return r.status, await r.json()


def no_errors_logged(caplog: pytest.LogCaptureFixture) -> None:
    # (A control plane's start re-seals what earlier tests of the session left sealed under a
    # key they have since dropped, and says so at error level: not a token's doing.)
    errors = [
        r
        for r in caplog.records
        if r.levelno >= logging.ERROR and "no longer lists" not in r.getMessage()
    ]
    assert errors == [], [r.getMessage() for r in errors]


@pytest.fixture
def start(config_for: ConfigFor, stores_for: Callable[[ServiceConfig], Stores]):
    def make(config_class: type[ServiceConfig], build: Callable[..., Any], **env: str):
        config = config_for(config_class, **env)
        return serving(build(config, stores_for(config)))

    return make


@pytest.fixture
async def gateways(start) -> AsyncIterator[dict[str, Serving]]:
    async with (
        start(AiGatewayConfig, build_ai) as ai,
        start(AgentGatewayConfig, build_agent) as agent,
        start(EdgeConfig, build_edge) as edge,
    ):
        yield {"ai": ai, "agent": agent, "edge": edge}


async def test_algorithm_confusion_is_a_401_at_every_service(
    controlplane, gateways, idp, caplog
) -> None:
    caplog.set_level(logging.WARNING)
    ai, agent, edge = gateways["ai"], gateways["agent"], gateways["edge"]
    async with identity_stack(controlplane) as (cp, _):
        for token in await confused(idp):
            assert await send(f"{cp.http_url}/api/tenants", "GET", token) == (
                401, {"error": "unauthorized", "message": INVALID})  # fmt: skip
            status, body = await send(f"{ai.http_url}/v1/chat/completions", "POST", token,
                                      {"model": "echo-1", "messages": []})  # fmt: skip
            assert (status, body["error"]["message"]) == (401, INVALID)
            assert await send(f"{agent.http_url}/v1/mcp/servers", "GET", token) == (
                401, {"error": "unauthorized", "message": INVALID})  # fmt: skip
            status, _ = await send(f"{edge.http_url}/apisix/admin/routes", "GET", token)
            assert status == 401
    no_errors_logged(caplog)


async def test_algorithm_confusion_is_a_401_at_the_sts(controlplane, idp, caplog) -> None:
    caplog.set_level(logging.WARNING)
    human, agent = await user_token(idp), await service_token(idp)
    async with identity_stack(controlplane) as (_, sts):
        for token in await confused(idp):
            for subject, actor in ((token, agent), (human, token)):
                assert await exchange(sts, subject, actor) == (401, {
                    "error": "invalid_request", "error_description": INVALID})  # fmt: skip
    no_errors_logged(caplog)


async def exchange(sts: Sts, subject: str, actor: str) -> tuple[int, Any]:
    form = {"grant_type": GRANT, "subject_token": subject, "actor_token": actor,
            "audience": "agent:anyone"}  # fmt: skip
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{sts.url}/sts/token", data=form) as resp,
    ):
        return resp.status, await resp.json()


async def test_id_tokens_and_foreign_audiences_are_refused_access_tokens_accepted(
    controlplane, gateways, idp
) -> None:
    ai, agent = gateways["ai"], gateways["agent"]
    access = await user_token(idp)
    async with identity_stack(controlplane) as (cp, _):
        assert (await send(f"{cp.http_url}/api/notifications", "GET", access))[0] == 200
        assert (await send(f"{agent.http_url}/v1/mcp/servers", "GET", access))[0] == 200
        idt = await id_token(idp)
        for url in (f"{cp.http_url}/api/notifications", f"{agent.http_url}/v1/mcp/servers"):
            assert await send(url, "GET", idt) == (
                401, {"error": "unauthorized", "message": INVALID})  # fmt: skip
        status, body = await send(f"{ai.http_url}/v1/chat/completions", "POST", idt,
                                  {"model": "echo-1", "messages": []})  # fmt: skip
        assert (status, body["error"]["message"]) == (401, INVALID)

    # The same services, configured for another audience, refuse the dev IdP's tokens.
    async with identity_stack(controlplane, IDP_AUDIENCES="https://api.example") as (cp, _):
        assert await send(f"{cp.http_url}/api/notifications", "GET", access) == (
            401, {"error": "unauthorized", "message": INVALID})  # fmt: skip
    async with identity_stack(controlplane, IDP_AUDIENCES="https://api.example,strata") as (
        cp,
        _,
    ):
        assert (await send(f"{cp.http_url}/api/notifications", "GET", access))[0] == 200


async def test_with_the_idp_hung_a_service_answers_401s_after_one_abandoned_fetch(start) -> None:
    """Issue 19, defect 8, at a service's door: the key set's server accepts and never
    answers. The first unknown `kid` waits for one fetch, which the service gives up on; the
    next ones do not reach the hung server at all."""
    connections: list[asyncio.StreamWriter] = []
    abandoned = asyncio.Event()

    async def hang(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        while await reader.read(4096):
            pass
        abandoned.set()

    server = await asyncio.start_server(hang, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    jwks = f"http://127.0.0.1:{port}/realms/strata/protocol/openid-connect/certs"
    try:
        async with start(AgentGatewayConfig, build_agent, IDP_JWKS_URL=jwks) as agent:
            for kid in ("rotated-1", "rotated-2", "rotated-3"):
                now = int(time.time())
                claims = {"sub": "u", "aud": "strata", "iat": now, "exp": now + 60}
                header = segment({"alg": "RS256", "kid": kid})
                token = f"{header}.{segment(claims)}.{b64(b'x' * 256)}"
                assert await send(f"{agent.http_url}/v1/mcp/servers", "GET", token) == (
                    401, {"error": "unauthorized", "message": INVALID})  # fmt: skip
            await asyncio.wait_for(abandoned.wait(), 30)  # the service closed the connection
            assert len(connections) == 1
    finally:
        server.close()
