"""Hop-token verification at the agent gateway (spec: Authentication, "Agent identity
verification at the agent gateway", the agent gateway's 403, Limits: replay window): tokens
minted by a real STS (control plane, flag on) for real IdP agents, used on tool calls against a
real MCP server and on A2A sends to real A2A agents; every attack of issue 12 at the gateway,
replay (also at another audience and concurrently), failing closed, and the flag off."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from a2a_agents import a2a_agent
from agent_kit import call, server_body
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from identity_kit import (
    ISSUER,
    MASTER,
    Sts,
    claims_of,
    controlplane,
    der_b64,
    header_of,
    hs256_with,
    new_key,
    recorded_spans,
    registered_agents,
    request,
    signed,
    unsigned,
    with_payload,
)
from shared_kit import free_port, user_token
from state_kit import audit_rows

from controlplane.agent_identity.keys import public_jwk
from gateways.agent.config import AgentGatewayConfig
from gateways.agent.hop_identity import JWKS_MIN_REFRESH_SECS, HopVerifier
from runtime.config import ConfigError
from runtime.errors import Unavailable
from runtime.hop_tokens import jti_key
from runtime.stores.kv import connect_kv
from runtime.testing import Serving

# Store-facing: runs on the session's Valkey cluster (issue 24; tests/conftest.py).
pytestmark = pytest.mark.kv_cluster

__all__ = ["controlplane"]  # fixtures


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@asynccontextmanager
async def stack(
    controlplane, gateway, cp_env: dict[str, str] | None = None, **gw_env: str
) -> AsyncIterator[tuple[Sts, Serving]]:
    """A control plane (its STS) and an agent gateway verifying its tokens."""
    async with controlplane(**(cp_env or {})) as cp:
        env = {"SVC_AGENT_IDENTITY": "on", "STS_ISSUER": ISSUER,
               "STS_JWKS_URL": f"{cp.http_url}/sts/jwks", **gw_env}  # fmt: skip
        async with gateway(**env) as gw:
            yield Sts(cp), gw


async def mcp_server(gw: Serving, idp: str, up: Any) -> str:
    alice = bearer(await user_token(idp))
    status, body = await call(gw, "POST", "/v1/mcp/servers", alice, server_body(up))
    assert status == 201, body
    return str(body["id"])


def tool_call(server_id: str, token: str | None, text: str = "hi") -> dict[str, Any]:
    body: dict[str, Any] = {"server_id": server_id, "tool_name": "echo",
                            "arguments": {"text": text}, "tenant_id": "acme"}  # fmt: skip
    if token is not None:
        body["sts_token"] = token
    return body


def send(from_agent: str, to_agent: str, token: str | None, tenant: str = "acme") -> dict:
    body: dict[str, Any] = {"from_agent": from_agent, "to_agent": to_agent,
                            "message": {"text": "hello"}, "tenant_id": tenant}  # fmt: skip
    if token is not None:
        body["sts_token"] = token
    return body


async def card(gw: Serving, token: str, agent_id: str, url: str) -> None:
    body = {"id": agent_id, "name": agent_id, "url": url, "tenant_id": "acme",
            "capabilities": ["echo"], "description": "echo"}  # fmt: skip
    status, answer = await call(gw, "POST", "/v1/a2a/agents", bearer(token), body)
    assert status == 201, answer


async def test_a_tool_call_runs_as_the_acting_agent(
    controlplane, gateway, upstream, idp, analytics
) -> None:
    human = await user_token(idp)
    up = upstream()
    async with stack(controlplane, gateway) as (sts, gw):
        a, b = await registered_agents(idp, sts, ("a", "b"), tools=("echo",))
        server = await mcp_server(gw, idp, up)
        token = await sts.token(human, a.token, b.agent_id)
        status, body = await call(gw, "POST", "/v1/mcp/tools/call", bearer(a.token),
                                  tool_call(server, token, "audited"))  # fmt: skip
        assert status == 200, body
        assert "audited" in json.dumps(body["result"])
        rows = await audit_rows(
            analytics, "agent_id = {a:String} AND action = 'tool_call'", a=a.agent_id
        )
        assert [r["status"] for r in rows] == ["ok"]
        assert json.loads(rows[0]["act_chain"]) == claims_of(token)["act_chain"]


async def test_an_agent_calls_only_its_allowed_tools(controlplane, gateway, upstream, idp) -> None:
    human = await user_token(idp)
    up = upstream()
    async with stack(controlplane, gateway) as (sts, gw):
        a, b = await registered_agents(idp, sts, ("a", "b"), tools=("search",))
        server = await mcp_server(gw, idp, up)
        token = await sts.token(human, a.token, b.agent_id)
        status, body = await call(gw, "POST", "/v1/mcp/tools/call", bearer(a.token),
                                  tool_call(server, token))  # fmt: skip
        assert (status, body["error"]) == (403, "agent_not_allowed")
        assert body["message"] == f"agent {a.agent_id} may not call the tool echo"
    assert up.count("tools/call") == 0


async def sts_delete(sts: Sts, agent_id: str) -> None:
    status, _ = await request("DELETE", f"{sts.url}/api/agents/{agent_id}", headers=MASTER)
    assert status == 200


async def test_a_deregistered_agent_no_longer_acts(controlplane, gateway, upstream, idp) -> None:
    human = await user_token(idp)
    up = upstream()
    async with stack(controlplane, gateway) as (sts, gw):
        a, b = await registered_agents(idp, sts, ("a", "b"))
        server = await mcp_server(gw, idp, up)
        token = await sts.token(human, a.token, b.agent_id)
        await sts_delete(sts, a.agent_id)
        status, body = await call(gw, "POST", "/v1/mcp/tools/call", bearer(a.token),
                                  tool_call(server, token))  # fmt: skip
        assert (status, body["error"]) == (403, "agent_not_allowed")
    assert up.count("tools/call") == 0


async def test_a_used_token_is_refused_everywhere(controlplane, gateway, upstream, idp) -> None:
    """Replay: at the same place, at its own audience over A2A, at another audience."""
    human = await user_token(idp)
    up = upstream()
    async with a2a_agent() as agent, stack(controlplane, gateway) as (sts, gw):
        a, b, c = await registered_agents(idp, sts, ("a", "b", "c"))
        await sts.register(a.agent_id, "acme", (b.agent_id, c.agent_id), ("echo",))
        server = await mcp_server(gw, idp, up)
        await card(gw, a.token, b.agent_id, agent.url)
        await card(gw, a.token, c.agent_id, agent.url)
        token = await sts.token(human, a.token, b.agent_id)
        ok, _ = await call(gw, "POST", "/v1/mcp/tools/call", bearer(a.token),
                           tool_call(server, token))  # fmt: skip
        assert ok == 200
        status, body = await call(gw, "POST", "/v1/mcp/tools/call", bearer(a.token),
                                  tool_call(server, token))  # fmt: skip
        assert (status, body["error"]) == (401, "token_replayed")
        status, body = await call(gw, "POST", "/v1/a2a/send", bearer(a.token),
                                  send(a.agent_id, b.agent_id, token))  # fmt: skip
        assert (status, body["error"]) == (401, "token_replayed")
        status, body = await call(gw, "POST", "/v1/a2a/send", bearer(a.token),
                                  send(a.agent_id, c.agent_id, token))  # fmt: skip
        assert (status, body["error"]) == (403, "audience_mismatch")
        # Used first on A2A, then replayed on a tool call.
        other = await sts.token(human, a.token, b.agent_id)
        status, _ = await call(gw, "POST", "/v1/a2a/send", bearer(a.token),
                               send(a.agent_id, b.agent_id, other))  # fmt: skip
        assert status == 200
        status, body = await call(gw, "POST", "/v1/mcp/tools/call", bearer(a.token),
                                  tool_call(server, other))  # fmt: skip
        assert (status, body["error"]) == (401, "token_replayed")
    assert up.count("tools/call") == 1
    assert len(agent.executor.seen) == 1


async def test_the_replay_guard_lives_as_long_as_the_token(
    controlplane, gateway, upstream, idp, valkey_url
) -> None:
    human = await user_token(idp)
    up = upstream()
    async with stack(controlplane, gateway) as (sts, gw):
        a, b = await registered_agents(idp, sts, ("a", "b"))
        server = await mcp_server(gw, idp, up)
        token = await sts.token(human, a.token, b.agent_id)
        assert (await call(gw, "POST", "/v1/mcp/tools/call", bearer(a.token),
                           tool_call(server, token)))[0] == 200  # fmt: skip
    kv = connect_kv(valkey_url)
    claims = claims_of(token)
    ttl = await kv.ttl(jti_key(claims["jti"]))
    assert await kv.get(jti_key(claims["jti"])) == "1"
    assert 0 < ttl <= claims["exp"] - int(time.time()) + 1 and ttl <= 120
    await kv.aclose()


async def test_concurrent_use_of_one_token_succeeds_once(
    controlplane, gateway, upstream, idp
) -> None:
    human = await user_token(idp)
    up = upstream()
    async with stack(controlplane, gateway) as (sts, gw), stack(controlplane, gateway) as (_, gw2):
        a, b = await registered_agents(idp, sts, ("a", "b"))
        server = await mcp_server(gw, idp, up)
        token = await sts.token(human, a.token, b.agent_id)
        calls = [
            call(replica, "POST", "/v1/mcp/tools/call", bearer(a.token), tool_call(server, token))
            for replica in (gw, gw2) * 6
        ]
        statuses = sorted(status for status, _ in await asyncio.gather(*calls))
    assert statuses == [200] + [401] * 11
    assert up.count("tools/call") == 1


async def test_forged_tokens_are_refused(controlplane, gateway, upstream, idp) -> None:
    """alg none; HS256 keyed with the public key; a tampered or re-signed act_chain; an unknown
    kid; expired; another issuer; a chain that does not end with sub."""
    human = await user_token(idp)
    up = upstream()
    key = new_key()
    kid = public_jwk(key.public_key())["kid"]
    async with stack(controlplane, gateway, {"STS_ED25519_PRIVATE_DER_B64": der_b64(key)}) as (
        sts,
        gw,
    ):
        a, b = await registered_agents(idp, sts, ("a", "b"))
        server = await mcp_server(gw, idp, up)
        genuine = await sts.token(human, a.token, b.agent_id)
        claims = claims_of(genuine)
        assert header_of(genuine)["kid"] == kid

        def fresh(**overrides: Any) -> dict[str, Any]:  # a new jti: never a replay
            return {**claims, "jti": f"forged-{time.time_ns()}", **overrides}

        pem = key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
        raw = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        attacker = new_key()
        chain = claims["act_chain"]
        tampered = fresh(act_chain=[{**chain[0], "id": "ceo"}, chain[1]])
        forged = {
            "alg none": unsigned(fresh()),
            "HS256 with the PEM public key": hs256_with(fresh(), pem, kid),
            "HS256 with the raw public key": hs256_with(fresh(), raw, kid),
            "tampered act_chain": with_payload(genuine, tampered),
            "re-signed act_chain": signed(tampered, attacker, kid),
            "unknown kid": signed(fresh(), attacker, public_jwk(attacker.public_key())["kid"]),
            "expired": signed(fresh(exp=int(time.time()) - 1), key, kid),
            "wrong issuer": signed(fresh(iss="https://evil.example/sts"), key, kid),
            "chain not ending with sub": signed(fresh(sub=b.agent_id), key, kid),
            "no act_chain": signed(
                {k: v for k, v in fresh().items() if k != "act_chain"}, key, kid
            ),
        }
        for name, token in forged.items():
            status, body = await call(gw, "POST", "/v1/mcp/tools/call", bearer(a.token),
                                      tool_call(server, token))  # fmt: skip
            assert (status, body["error"]) == (401, "invalid_token"), name
            assert body["message"] == "Invalid or expired token", name
        # A genuine token of the same key passes (the refusals were the forgeries').
        status, _ = await call(gw, "POST", "/v1/mcp/tools/call", bearer(a.token),
                               tool_call(server, signed(fresh(), key, kid)))  # fmt: skip
        assert status == 200
    assert up.count("tools/call") == 1


async def test_a2a_hop_is_verified_and_carried_to_the_next_agent(
    controlplane, gateway, idp, analytics
) -> None:
    human = await user_token(idp)
    bob = await user_token(idp, "bob", "bob")
    async with a2a_agent() as agent, stack(controlplane, gateway) as (sts, gw):
        a, b, c = await registered_agents(idp, sts, ("a", "b", "c"))
        await card(gw, a.token, b.agent_id, agent.url)
        token = await sts.token(human, a.token, b.agent_id)
        # aud must be the receiving agent; sub the sender; the tenant the call's
        status, body = await call(gw, "POST", "/v1/a2a/send", bearer(a.token),
                                  send(a.agent_id, c.agent_id, token))  # fmt: skip
        assert (status, body["error"]) == (403, "audience_mismatch")
        status, body = await call(gw, "POST", "/v1/a2a/send", bearer(c.token),
                                  send(c.agent_id, b.agent_id, token))  # fmt: skip
        assert (status, body["error"]) == (403, "sender_mismatch")
        status, body = await call(gw, "POST", "/v1/a2a/send", bearer(bob),
                                  send(a.agent_id, b.agent_id, token, "globex"))  # fmt: skip
        assert (status, body["error"]) == (403, "tenant_mismatch")
        assert agent.headers == []  # refused before anything was forwarded
        status, body = await call(gw, "POST", "/v1/a2a/send", bearer(a.token),
                                  send(a.agent_id, b.agent_id, token))  # fmt: skip
        assert (status, body["status"]) == (200, "completed"), body
        assert agent.headers[-1]["authorization"] == f"Bearer {token}"
        rows = await audit_rows(
            analytics, "agent_id = {a:String} AND action = 'a2a_send'", a=a.agent_id
        )
        assert json.loads(rows[-1]["act_chain"]) == claims_of(token)["act_chain"]


async def test_the_flag_off_ignores_sts_token(gateway, upstream, idp) -> None:
    up = upstream()
    async with gateway() as gw:
        server = await mcp_server(gw, idp, up)
        alice = bearer(await user_token(idp))
        status, _ = await call(gw, "POST", "/v1/mcp/tools/call", alice,
                               tool_call(server, "not even a token"))  # fmt: skip
        assert status == 200


async def test_an_unreachable_store_fails_closed(controlplane, gateway, idp, config_for) -> None:
    human = await user_token(idp)
    dead = f"redis://127.0.0.1:{free_port()}/0"
    async with stack(controlplane, gateway) as (sts, _):
        a, b = await registered_agents(idp, sts, ("a", "b"))
        token = await sts.token(human, a.token, b.agent_id)
        config = config_for(AgentGatewayConfig, SVC_AGENT_IDENTITY="on", STS_ISSUER=ISSUER,
                            STS_JWKS_URL=f"{sts.url}/sts/jwks")  # fmt: skip
        verifier = HopVerifier(config, connect_kv(dead))
        with pytest.raises(Unavailable):
            await verifier.check(token, "acme", tool="echo")
        async with gateway(SVC_AGENT_IDENTITY="on", STS_ISSUER=ISSUER, REDIS_URL=dead,
                           STS_JWKS_URL=f"{sts.url}/sts/jwks") as down:  # fmt: skip
            status, body = await call(down, "POST", "/v1/a2a/send", bearer(a.token),
                                      send(a.agent_id, b.agent_id, token))  # fmt: skip
            assert (status, body["error"]) == (503, "store_unavailable")
        await verifier.kv.aclose()


async def test_verification_spans(controlplane, gateway, idp, config_for, valkey_url) -> None:
    human = await user_token(idp)
    async with stack(controlplane, gateway) as (sts, _):
        a, b = await registered_agents(idp, sts, ("a", "b"))
        token = await sts.token(human, a.token, b.agent_id)
        config = config_for(AgentGatewayConfig, SVC_AGENT_IDENTITY="on", STS_ISSUER=ISSUER,
                            STS_JWKS_URL=f"{sts.url}/sts/jwks")  # fmt: skip
        verifier = HopVerifier(config, connect_kv(valkey_url))
        with recorded_spans() as names:
            hop = await verifier.check(token, "acme", tool="echo")
        assert hop is not None and hop.acting_agent == a.agent_id
        assert hop.human == claims_of(human)["sub"]
        await verifier.kv.aclose()
    assert names == ["agent_gateway.verify_sts_token", "agent_gateway.check_replay"]


async def test_a_new_signing_key_is_fetched_on_its_first_token(
    controlplane, gateway, upstream, idp
) -> None:
    """Key rotation at the gateway: an unknown kid refreshes the cached key set."""
    human = await user_token(idp)
    up = upstream()
    async with stack(controlplane, gateway) as (sts, gw):
        a, b = await registered_agents(idp, sts, ("a", "b"))
        server = await mcp_server(gw, idp, up)
        first = await sts.token(human, a.token, b.agent_id)
        assert (await call(gw, "POST", "/v1/mcp/tools/call", bearer(a.token),
                           tool_call(server, first)))[0] == 200  # fmt: skip
        async with controlplane() as other:  # a replica with its own (new) key
            second = await Sts(other).token(human, a.token, b.agent_id)
            assert header_of(second)["kid"] != header_of(first)["kid"]
            await asyncio.sleep(JWKS_MIN_REFRESH_SECS)  # the refresh's rate limit
            status, body = await call(gw, "POST", "/v1/mcp/tools/call", bearer(a.token),
                                      tool_call(server, second))  # fmt: skip
            assert status == 200, body


async def test_legacy_hs256_mode(controlplane, gateway, upstream, idp) -> None:
    human = await user_token(idp)
    up = upstream()
    secret = f"legacy-secret-{time.time_ns()}"
    async with (
        controlplane(SVC_ENV="production", STS_SIGNING_KEY=secret) as cp,
        controlplane() as eddsa_cp,
        gateway(SVC_AGENT_IDENTITY="on", STS_ISSUER=ISSUER, STS_SIGNING_KEY=secret) as gw,
    ):
        sts = Sts(cp)
        a, b = await registered_agents(idp, sts, ("a", "b"))
        server = await mcp_server(gw, idp, up)
        token = await sts.token(human, a.token, b.agent_id)
        assert header_of(token)["alg"] == "HS256"
        assert (await call(gw, "POST", "/v1/mcp/tools/call", bearer(a.token),
                           tool_call(server, token)))[0] == 200  # fmt: skip
        # Without a key-set URL the gateway takes HS256 only.
        eddsa = await Sts(eddsa_cp).token(human, a.token, b.agent_id)
        status, body = await call(gw, "POST", "/v1/mcp/tools/call", bearer(a.token),
                                  tool_call(server, eddsa))  # fmt: skip
        assert (status, body["error"]) == (401, "invalid_token")


def test_the_gateway_needs_a_way_to_verify(config_for) -> None:
    with pytest.raises(ConfigError) as info:
        config_for(AgentGatewayConfig, SVC_AGENT_IDENTITY="on")
    assert "STS_JWKS_URL" in str(info.value)
