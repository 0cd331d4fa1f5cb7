"""Faults: each one's stated outcome while it lasts, and recovery without restarting anything
(the table is in README.md).

- key-value store paused (SIGSTOP): the edge's rate limiter fails open (200); every security
  control fails closed with 503 (STS, hop tokens, HITL decisions, tool calls, budgets, unknown
  API keys, the control plane's API); the control plane's `/health` says `degraded`. Demanded
  by defect 6: a tenant with no finite budget is still served, `/api/health/services` reports
  the store. After: everything answers again.
- key-value store killed (SIGKILL): `strata up` restarts it and the services reconnect, none
  of them restarted (defect 8).
- control plane paused: the data planes keep serving (edge routes with JWTs, chat, tool calls);
  after, its API answers again.
- IdP paused: tokens verified before keep working at every layer; a token whose `kid` is
  unknown is a 401 (not a hang, not a 5xx); after, a new token of the IdP works everywhere.
- LLM provider down: 502 `provider_error`, then 503 `all_providers_unavailable` once its
  breaker is open, never another 5xx; after, the breaker's probe finds it back (200).
- MCP server down: a tool call is a 502, never a 500; after, tool calls succeed again.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from shared_kit import free_port

from reliability.forge import Target, attacker_keys, claims_of
from reliability.kit import (
    Agent,
    Http,
    Reply,
    Stack,
    Tenant,
    all_replies,
    client_token,
    eventually,
    exchange,
    new_agent,
    new_tenant,
    register_mcp,
    sidecar,
    unique,
)

pytestmark = [pytest.mark.stack, pytest.mark.timeout(300)]


@dataclass
class Scene:
    stack: Stack
    tenant: Tenant  # a finite token budget (its plan's)
    unlimited: Tenant  # no budget at all
    caller: Agent
    callee: Agent
    mcp_port: int
    server_id: str


@pytest.fixture(scope="module")
async def scene(stack: Stack) -> AsyncIterator[Scene]:
    port = free_port()
    async with Http() as http, sidecar(stack, "sidecars.demo", "--port", str(port), port=port):
        tenant = await new_tenant(http, stack, "fault")
        unlimited = await new_tenant(http, stack, "nobudget")
        removed = await http.call("DELETE", f"{stack.ai}/v1/budget/{unlimited.id}",
                                  token=stack.master)  # fmt: skip
        assert removed.status == 200, removed.text
        callee = await new_agent(http, stack, tenant.id)
        caller = await new_agent(http, stack, tenant.id, audiences=(callee.id,))
        server = await register_mcp(http, stack, tenant.id, tenant.token,
                                    f"http://127.0.0.1:{port}/mcp")  # fmt: skip
        yield Scene(stack, tenant, unlimited, caller, callee, port, server)


def chat(text: str = "") -> dict[str, object]:
    return {"model": "echo-1", "messages": [{"role": "user", "content": text or unique("hi")}]}


async def tool_call(http: Http, s: Scene, **extra: object) -> Reply:
    body = {"server_id": s.server_id, "tool_name": "echo", "tenant_id": s.tenant.id,
            "arguments": {"text": unique("t")}, **extra}  # fmt: skip
    return await http.call("POST", f"{s.stack.agent}/v1/mcp/tools/call", token=s.tenant.token,
                           json_body=body)  # fmt: skip


async def hop_token(http: Http, s: Scene) -> str:
    hop = await exchange(http, s.stack, s.tenant.token, s.caller.token, s.callee.id)
    assert hop.status == 200, hop.text
    return str(hop.body["access_token"])


async def security_controls(http: Http, s: Scene, hop: str) -> dict[str, Reply]:
    """One request per control that needs the store, all at once (`hop`: an unused hop
    token)."""
    st = s.stack
    calls = {
        "edge /smoke/* (limiter)": http.call("GET", f"{st.edge}/smoke/fault",
                                             headers={"X-Tenant-ID": s.tenant.id}),
        "edge /api/* (limiter)": http.call("GET", f"{st.edge}/api/fault", token=s.tenant.token),
        "STS exchange": exchange(http, st, s.tenant.token, s.caller.token, s.callee.id),
        "hop token": tool_call(http, s, sts_token=hop),
        "tool call": tool_call(http, s),
        "HITL decision": http.call("POST", f"{st.agent}/v1/hitl/hitl-{unique('x')}/approve",
                                   token=s.tenant.token),
        "chat, finite budget": http.call("POST", f"{st.ai}/v1/chat/completions",
                                         token=s.tenant.token, json_body=chat()),
        "chat, unknown API key": http.call("POST", f"{st.ai}/v1/chat/completions",
                                           token="sk-" + "A" * 43, json_body=chat()),
        "control plane API": http.call("GET", f"{st.cp}/api/tenants", token=s.tenant.token),
        "sessions": http.call("GET", f"{st.agent}/v1/sessions", token=s.tenant.token),
    }  # fmt: skip
    replies = await asyncio.gather(*calls.values())
    return dict(zip(calls, replies, strict=True))


FAILS_OPEN = {"edge /smoke/* (limiter)", "edge /api/* (limiter)"}
# what each control answers with the store up (the HITL decision names no real approval)
NORMAL = {"HITL decision": 404, "chat, unknown API key": 401}


async def test_store_paused_limiter_fails_open_controls_fail_closed_then_recover(
    scene: Scene, http: Http
) -> None:
    hop = await hop_token(http, scene)
    with scene.stack.paused("valkey"):
        during = await security_controls(http, scene, hop)
        health = await http.call("GET", f"{scene.stack.cp}/health")
    expected = {name: 200 if name in FAILS_OPEN else 503 for name in during}
    assert {name: reply.status for name, reply in during.items()} == expected, {
        name: reply.text[:200] for name, reply in during.items()
    }
    assert (health.body["status"], health.body["checks"]["redis"]) == ("degraded", "unreachable")

    async def controls() -> dict[str, Reply]:
        return await security_controls(http, scene, await hop_token(http, scene))

    normal = {name: NORMAL.get(name, 200) for name in during}
    after = await eventually(
        controls, lambda found: {name: r.status for name, r in found.items()} == normal
    )
    assert {name: reply.status for name, reply in after.items()} == normal


async def test_store_paused_a_tenant_without_budget_is_still_served(
    scene: Scene, http: Http
) -> None:
    url = f"{scene.stack.ai}/v1/chat/completions"
    # The gateway learns "no budget" from a reservation read while its budgets feed is
    # trusted; after an earlier fault the feed is trusted again within a poll (1 s) of the
    # store's return, so the tenant is warmed once more after that.
    for _ in range(2):
        warm = await http.call("POST", url, token=scene.unlimited.token, json_body=chat())
        assert warm.status == 200, warm.text
        await asyncio.sleep(2.5)
    with scene.stack.paused("valkey"):
        served = await http.call("POST", url, token=scene.unlimited.token, json_body=chat())
    assert served.status == 200, served.text


async def test_store_paused_platform_health_reports_the_store(scene: Scene, http: Http) -> None:
    url = f"{scene.stack.cp}/api/health/services"
    with scene.stack.paused("valkey"):
        reported = await http.call("GET", url, token=scene.stack.master)
    assert reported.status == 200, reported.text
    assert any(entry["status"] != "healthy" for entry in reported.body), reported.body


async def test_control_plane_paused_the_data_planes_keep_serving(scene: Scene, http: Http) -> None:
    st = scene.stack
    with st.paused("controlplane"):
        served = await asyncio.gather(
            http.call("GET", f"{st.edge}/smoke/cp", headers={"X-Tenant-ID": scene.tenant.id}),
            http.call("GET", f"{st.edge}/api/cp", token=scene.tenant.token),
            http.call("POST", f"{st.ai}/v1/chat/completions", token=scene.tenant.token,
                      json_body=chat()),
            tool_call(http, scene),
        )  # fmt: skip
    assert [reply.status for reply in served] == [200] * 4, [r.text[:200] for r in served]
    back = await http.call("GET", f"{st.cp}/api/tenants", token=scene.tenant.token)
    assert back.status == 200, back.text


async def test_idp_paused_verified_tokens_keep_working_unknown_keys_are_401(
    scene: Scene, http: Http
) -> None:
    st = scene.stack
    points = [("GET", f"{st.edge}/api/idp"), ("GET", f"{st.ai}/v1/models"),
              ("GET", f"{st.agent}/v1/sessions"), ("GET", f"{st.cp}/api/tenants")]  # fmt: skip
    for method, url in points:  # each layer has the IdP's key set
        assert (await http.call(method, url, token=scene.tenant.token)).status == 200
    # a key no one has seen: its kid sends each verifier to the (hung) IdP's key set
    stranger = Target("idp", attacker_keys()[:1], claims_of(scene.tenant.token), "")
    unknown_kid = stranger.signed()
    with st.paused("idp"):
        known = await all_replies([http.call(m, u, token=scene.tenant.token) for m, u in points])
        unknown = await all_replies(
            [http.call(m, u, token=unknown_kid, wait=60) for m, u in points]
        )
    assert [r.status for r in known] == [200] * 4, [r.text[:200] for r in known]
    assert [r.status for r in unknown] == [401] * 4, [r.text[:200] for r in unknown]
    fresh = await new_agent_token(http, scene)
    assert [(await http.call(m, u, token=fresh)).status for m, u in points] == [200] * 4


async def new_agent_token(http: Http, scene: Scene) -> str:
    """A token the IdP issues after the pause (client credentials of the scene's agent)."""
    return await client_token(http, scene.stack, scene.caller.client_id, scene.caller.secret)


async def test_provider_down_502_then_breaker_503_then_recovered(scene: Scene, http: Http) -> None:
    st = scene.stack
    port = free_port()
    provider = unique("faulty")
    body = {"id": provider, "display_name": "a provider that goes down",
            "type": "openai_compatible", "base_url": f"http://127.0.0.1:{port}/v1",
            "auth_type": "bearer", "key_source": {"type": "env_var",
                                                  "var_name": "ECHO_LLM_API_KEY"},
            "model_patterns": [f"{provider}-*"], "default_models": [f"{provider}-1"],
            "enabled": True}  # fmt: skip
    saved = await http.call("POST", f"{st.cp}/api/providers", token=st.master, json_body=body)
    assert saved.status == 200, saved.text
    url = f"{st.ai}/v1/chat/completions"
    request = {"model": f"{provider}-1", "messages": [{"role": "user", "content": "hi"}]}

    async def ask() -> Reply:
        return await http.call("POST", url, token=scene.tenant.token, json_body=request,
                               headers={"Cache-Control": "no-store"})  # fmt: skip

    try:
        async with sidecar(st, "sidecars.echo_llm", "--port", str(port), port=port):
            up = await eventually(ask, lambda reply: reply.status == 200)
            assert up.status == 200, up.text
        down = [await ask() for _ in range(8)]
        statuses = [reply.status for reply in down]
        # retries exhausted (502), then the open breaker refuses at once (503)
        assert set(statuses) == {502, 503} and statuses[0] == 502, [r.text[:150] for r in down]
        refused = next(reply for reply in down if reply.status == 503)
        assert refused.body["error"]["code"] == "all_providers_unavailable", refused.text
        async with sidecar(st, "sidecars.echo_llm", "--port", str(port), port=port):
            back = await eventually(ask, lambda reply: reply.status == 200)
            assert back.status == 200, back.text
    finally:
        await http.call("DELETE", f"{st.cp}/api/providers/{provider}", token=st.master)


async def test_mcp_server_down_502_then_recovered(scene: Scene, http: Http) -> None:
    st = scene.stack
    port = free_port()
    async with sidecar(st, "sidecars.demo", "--port", str(port), port=port):
        tenant = await new_tenant(http, st, "mcpdown")
        server = await register_mcp(http, st, tenant.id, tenant.token,
                                    f"http://127.0.0.1:{port}/mcp")  # fmt: skip
        body = {"server_id": server, "tool_name": "echo", "tenant_id": tenant.id,
                "arguments": {"text": "up"}}  # fmt: skip
        call = f"{st.agent}/v1/mcp/tools/call"
        assert (await http.call("POST", call, token=tenant.token, json_body=body)).status == 200
    down = [await http.call("POST", call, token=tenant.token, json_body=body) for _ in range(3)]
    assert [reply.status for reply in down] == [502] * 3, [r.text[:200] for r in down]
    async with sidecar(st, "sidecars.demo", "--port", str(port), port=port):
        back = await eventually(
            lambda: http.call("POST", call, token=tenant.token, json_body=body),
            lambda reply: reply.status == 200,
        )
        assert back.status == 200, back.text


async def test_store_killed_is_restarted_and_the_services_reconnect(
    scene: Scene, http: Http
) -> None:
    st = scene.stack
    services = {name: pid for name, pid in st.pids().items() if name != "valkey"}
    try:
        os.kill(st.pid("valkey"), signal.SIGKILL)
        smoke = await http.call("GET", f"{st.edge}/smoke/killed",
                                headers={"X-Tenant-ID": scene.tenant.id})  # fmt: skip
        assert smoke.status == 200, smoke.text  # the limiter fails open, or Valkey is back
        recovered = False
        for _ in range(150):
            assert st.running, "strata up stopped the stack when Valkey died"
            replies = await asyncio.gather(
                exchange(http, st, scene.tenant.token, scene.caller.token, scene.callee.id),
                http.call("POST", f"{st.ai}/v1/chat/completions", token=scene.tenant.token,
                          json_body=chat()),
                tool_call(http, scene),
            )  # fmt: skip
            if all(reply.status == 200 for reply in replies):
                recovered = True
                break
            await asyncio.sleep(0.2)
        assert recovered, "the services did not reconnect to the restarted store"
        alive = {name: _alive(pid) for name, pid in services.items()}
        assert all(alive.values()), f"restarted: {alive}"  # nobody was restarted
    finally:
        await st.ensure_running()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
