"""Issued API keys (`sk-…`, from the control plane's request → approve workflow) as bearer
credentials at the AI gateway and the agent gateway (`runtime/issued_keys.py`), against the
real Valkey, the control plane's real workflow and the official `openai` SDK: the key acts
for its tenant only and never as a platform administrator; a revoked key is refused by every
replica; unknown keys are 401; an unreachable store is 503 (fail closed) for a key not in
memory, while a key in memory is held through an outage for a bounded time; a warm key costs
no store command; keys issued before the projection existed work once a control plane
starts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import openai
import pytest
from keys_kit import MASTER, Platform, Tenants, call, control_plane, eventually, unique
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageParam
from shared_kit import issued_keys_of, running, valkey_server

import runtime.stores.kv as kv_store
from gateways.agent.app import build as build_agent
from gateways.agent.config import AgentGatewayConfig
from gateways.ai.app import build as build_ai
from gateways.ai.config import AiGatewayConfig
from gateways.ai.providers import keys as providers_keys
from gateways.ai.tenants.keys import budget_key, limit_key
from runtime import issued_keys
from runtime.errors import Unauthenticated
from runtime.issued_keys import DIGESTS, digest
from runtime.stores.kv import connect_kv
from runtime.testing import Serving, serving
from sidecars.echo_llm.app import build_app as build_echo

pytestmark = pytest.mark.timeout(120)

PROVIDERS = providers_keys.PROVIDERS
INVALID = "Invalid or expired token"
Service = Callable[..., AbstractAsyncContextManager[Serving]]


@pytest.fixture
async def tenants(kv: Any, names: set[str]) -> AsyncIterator[Tenants]:
    made = Tenants(kv)
    yield made
    await made.cleanup(names)
    for tenant in made.added:
        await kv.delete(budget_key(tenant), limit_key(tenant))


@pytest.fixture
async def cp(config_for: Callable[..., Any], stores_for: Callable[..., Any]) -> AsyncIterator[Any]:
    async with control_plane(config_for, stores_for) as platform:
        yield platform


@pytest.fixture
async def echo(kv: Any) -> AsyncIterator[str]:
    """The echo LLM, in-process, as the one enabled provider (`echo-*`)."""
    async with running(build_echo()) as url:
        provider = {
            "id": "echo", "display_name": "Echo LLM (test)", "type": "openai_compatible",
            "base_url": f"{url}/v1", "auth_type": "bearer",
            "key_source": {"type": "manual"}, "model_patterns": ["echo-*"],
            "default_models": ["echo-1", "echo-2"], "enabled": True,
        }  # fmt: skip
        async with kv.pipeline(transaction=True) as pipe:  # as the control plane writes it
            pipe.hset(PROVIDERS, "echo", json.dumps(provider))
            pipe.hset(providers_keys.SECRETS, "echo", "echo-test-key")
            pipe.incr(providers_keys.VERSION)
            pipe.publish(providers_keys.CHANGED, "echo")
            await pipe.execute()
        yield url
        await kv.delete(PROVIDERS, providers_keys.SECRETS)
        await kv.incr(providers_keys.VERSION)


def service(build: Callable[..., Any], config_class: type, config_for: Callable[..., Any],
            stores_for: Callable[..., Any]) -> Service:  # fmt: skip
    @asynccontextmanager
    async def start(**env: str) -> AsyncIterator[Serving]:
        config = config_for(config_class, ENVIRONMENT="development", **env)
        async with serving(build(config, stores_for(config))) as svc:
            yield svc

    return start


@pytest.fixture
def ai_gateway(config_for: Callable[..., Any], stores_for: Callable[..., Any]) -> Service:
    """`async with ai_gateway(**env) as svc:` an AI gateway (twice: two replicas)."""
    return service(build_ai, AiGatewayConfig, config_for, stores_for)


@pytest.fixture
def agent_gateway(config_for: Callable[..., Any], stores_for: Callable[..., Any]) -> Service:
    return service(build_agent, AgentGatewayConfig, config_for, stores_for)


async def issue(cp: Platform, tenants: Tenants, names: set[str], tenant: str) -> tuple[str, str]:
    """A key of `tenant` through the workflow: request, approve. Returns (key id, key)."""
    name, route = unique("key"), unique("r")
    names.add(name)
    await tenants.put_routes(route)
    body = {"name": name, "tenant_id": tenant, "routes": [route], "reason": "gateway tests",
            "email": "dev@example.com"}  # fmt: skip
    status, created = await cp.api("POST", "/api/keys/request", body=body)
    assert status == 201, created
    status, approved = await cp.api("POST", f"/api/keys/requests/{created['id']}/approve")
    assert status == 200, approved
    return approved["key_id"], approved["full_key"]


def sdk(svc: Serving, key: str) -> AsyncOpenAI:
    """The official OpenAI SDK with the issued key as its `api_key` (retries off)."""
    return AsyncOpenAI(
        base_url=f"{svc.http_url}/v1",
        api_key=key,
        max_retries=0,
        timeout=20,
        default_headers={"Cache-Control": "no-store"},
    )


async def get(svc: Serving, path: str, key: str, **headers: str) -> tuple[int, Any]:
    status, body, _ = await call(svc.http_url, "GET", path, token=key, headers=headers)
    return status, body


HELLO: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hello there"}]


# --- the key at the AI gateway ------------------------------------------------------------


async def test_the_openai_sdk_chats_with_an_issued_key_for_its_tenant_only(
    cp: Platform, tenants: Tenants, names: set[str], echo: str, ai_gateway: Service
) -> None:
    tenant, other = await tenants.add(), await tenants.add()
    _, key = await issue(cp, tenants, names, tenant)
    async with ai_gateway() as ai, sdk(ai, key) as client:
        status, _, _ = await call(
            ai.http_url, "POST", f"/v1/budget/{tenant}", body={"tokens": 1000}
        )  # the master key sets the tenant's budget
        assert status == 200

        answer = await client.chat.completions.create(model="echo-1", messages=HELLO)
        assert answer.choices[0].message.content == "echo: hello there"
        stream = await client.chat.completions.create(model="echo-2", messages=HELLO, stream=True)
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        assert text == "echo: hello there"
        assert {m.id for m in (await client.models.list()).data} >= {"echo-1", "echo-2"}

        # The tokens were debited from the key's tenant, which the key may read.
        status, budget = await get(ai, f"/v1/budget/{tenant}", key)
        assert status == 200 and budget["remaining_tokens"] < 1000, budget

        # Another tenant, named in the header or the path: 403, as for a JWT.
        with pytest.raises(openai.PermissionDeniedError):
            await client.chat.completions.create(
                model="echo-1", messages=HELLO, extra_headers={"x-tenant-id": other}
            )
        assert (await get(ai, f"/v1/budget/{other}", key))[0] == 403
        # A platform administrator's operation: 403.
        status, body, _ = await call(
            ai.http_url, "POST", f"/v1/budget/{tenant}", token=key, body={"tokens": 10**9}
        )
        assert status == 403, body
        assert body["error"]["code"] == "forbidden"


async def test_unknown_keys_are_401_at_both_gateways(
    cp: Platform, tenants: Tenants, names: set[str], ai_gateway: Service, agent_gateway: Service
) -> None:
    _, key = await issue(cp, tenants, names, await tenants.add())
    made_up = "sk-" + "A" * 43  # well formed, never issued
    async with ai_gateway() as ai, agent_gateway() as agent, sdk(ai, made_up) as client:
        assert (await get(ai, "/v1/models", key))[0] == 200
        assert (await get(agent, "/v1/sessions", key))[0] == 200
        with pytest.raises(openai.AuthenticationError) as refused:
            await client.chat.completions.create(model="echo-1", messages=HELLO)
        assert refused.value.body["message"] == INVALID  # type: ignore[index]
        for wrong in (made_up, made_up, key[:-1] + "x", "sk-garbage", "sk-" + "!" * 43,
                      "sk-" + "a" * 500):  # fmt: skip
            status, body = await get(ai, "/v1/models", wrong)
            assert (status, body["error"]["message"]) == (401, INVALID), wrong
            status, body = await get(agent, "/v1/sessions", wrong)
            assert (status, body["message"]) == (401, INVALID), wrong


async def test_made_up_keys_held_in_memory_are_bounded(
    cp: Platform, tenants: Tenants, names: set[str], kv: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flood of made-up keys keeps at most MAX_UNKNOWN of them in memory, and pushes no
    issued key out."""
    monkeypatch.setattr(issued_keys, "MAX_UNKNOWN", 50)
    tenant = await tenants.add()
    _, key = await issue(cp, tenants, names, tenant)
    keys = issued_keys.IssuedKeys(kv)
    await keys.start()
    try:
        await eventually(lambda: _true(keys.watch.trusted))
        assert (await keys.principal(key)).tenant_id == tenant
        for i in range(200):
            with pytest.raises(Unauthenticated):
                await keys.principal(f"sk-made-up-{i:040d}")
        assert len(keys._unknown) == 50
        assert digest(key) in keys._known
    finally:
        await keys.stop()


async def _true(value: bool) -> bool:
    return value


# --- the key at the agent gateway ---------------------------------------------------------


async def test_the_agent_gateway_lists_the_key_tenants_sessions_and_refuses_others(
    cp: Platform, tenants: Tenants, names: set[str], agent_gateway: Service
) -> None:
    tenant, other = await tenants.add(), await tenants.add()
    _, key = await issue(cp, tenants, names, tenant)
    session = {"agent_id": "agent-1", "tool_allowlist": ["search"], "token_budget": 100}
    async with agent_gateway() as agent:
        status, mine, _ = await call(agent.http_url, "POST", "/v1/sessions", token=key,
                                     body={**session, "tenant_id": tenant})  # fmt: skip
        assert status == 201, mine
        status, theirs, _ = await call(agent.http_url, "POST", "/v1/sessions", token=MASTER,
                                       body={**session, "tenant_id": other})  # fmt: skip
        assert status == 201, theirs

        status, listed = await get(agent, "/v1/sessions", key)
        assert status == 200, listed
        assert [s["id"] for s in listed["sessions"]] == [mine["id"]]
        assert (await get(agent, f"/v1/sessions/{mine['id']}", key))[0] == 200
        assert (await get(agent, f"/v1/sessions/{theirs['id']}", key))[0] == 404

        # The gateway's own MCP endpoint takes the key too (its tenant's tools: none here).
        ask = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        status, answer, _ = await call(agent.http_url, "POST", "/mcp", token=key, body=ask)
        assert (status, answer["result"]["tools"]) == (200, []), answer

        # Another tenant named: 403.
        status, body = await get(agent, "/v1/sessions", key, **{"x-tenant-id": other})
        assert status == 403, body
        status, body, _ = await call(agent.http_url, "POST", "/v1/sessions", token=key,
                                     body={**session, "tenant_id": other})  # fmt: skip
        assert status == 403, body
        # What a person must do (relax the tenant's policy), or an administrator: 403.
        status, body, _ = await call(
            agent.http_url, "PUT", f"/v1/policies/{tenant}", token=key, body={}
        )
        assert status == 403 and "API keys are refused" in body["message"], body
        status, body, _ = await call(
            agent.http_url, "POST", "/v1/mcp/servers/s-1/approve-tools", token=key, body={}
        )
        assert status == 403, body


# --- revocation -----------------------------------------------------------------------------


async def test_a_revoked_key_is_refused_by_every_replica(
    cp: Platform,
    tenants: Tenants,
    names: set[str],
    ai_gateway: Service,
    agent_gateway: Service,
) -> None:
    tenant = await tenants.add()
    key_id, key = await issue(cp, tenants, names, tenant)
    async with ai_gateway() as one, ai_gateway() as two, agent_gateway() as agent:
        replicas = [(one, "/v1/models"), (two, "/v1/models"), (agent, "/v1/sessions")]
        for svc, path in replicas:  # each replica holds the key in memory
            for _ in range(3):
                assert (await get(svc, path, key))[0] == 200

        status, _ = await cp.api("DELETE", f"/api/keys/{key_id}")
        assert status == 200

        for svc, path in replicas:

            async def refused(svc: Serving = svc, path: str = path) -> bool:
                return (await get(svc, path, key))[0] == 401

            await eventually(refused, within=5)
        for svc, path in replicas:
            status, body = await get(svc, path, key)
            assert status == 401, body


async def test_a_replica_that_missed_the_message_refuses_within_a_poll(
    cp: Platform, tenants: Tenants, names: set[str], ai_gateway: Service, kv: Any
) -> None:
    """The version counter is the safety net: a revocation whose message never arrived (here:
    the counter moved, no message published) still clears the replica's copies."""
    tenant = await tenants.add()
    _, key = await issue(cp, tenants, names, tenant)
    async with ai_gateway() as ai:
        assert (await get(ai, "/v1/models", key))[0] == 200
        entry = json.loads(await kv.hget(DIGESTS, digest(key)))
        await kv.hset(DIGESTS, digest(key), json.dumps({**entry, "status": "revoked"}))
        await kv.incr("cp:api-keys:version")  # no PUBLISH: as if the message were lost

        async def refused() -> bool:
            return (await get(ai, "/v1/models", key))[0] == 401

        await eventually(refused, within=5)


# --- the store ----------------------------------------------------------------------------


async def test_a_warm_key_costs_no_store_command(
    cp: Platform, tenants: Tenants, names: set[str], ai_gateway: Service, agent_gateway: Service,
    valkey_url: str, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """MONITOR shows every command the store runs: the first request with a key reads its
    entry once per replica; later ones read nothing."""
    # MONITOR slows every command down; the test counts commands, so a loaded machine must not
    # turn a slow read into the hot path's 503.
    monkeypatch.setattr(kv_store, "HOT_PATH_SECS", 5.0)
    tenant = await tenants.add()
    _, key = await issue(cp, tenants, names, tenant)
    async with ai_gateway() as ai, agent_gateway() as agent, monitor(valkey_url) as seen:
        replicas = [(ai, "/v1/models"), (agent, "/v1/sessions")]

        async def trusted() -> bool:  # each replica's change feed is confirmed
            return all(issued_keys_of(svc).watch.trusted for svc, _ in replicas)

        await eventually(trusted)
        for svc, path in replicas:
            assert (await get(svc, path, key))[0] == 200
        await eventually(lambda: _reads(seen, 2))  # the cold lookups, one per replica
        for _ in range(20):
            for svc, path in replicas:
                assert (await get(svc, path, key))[0] == 200
        await _flush(seen, valkey_url)
        assert [c for c in seen if DIGESTS in c] == [f"hget {DIGESTS} {digest(key)}"] * 2


async def _reads(seen: list[str], count: int) -> bool:
    return len([c for c in seen if DIGESTS in c]) >= count


async def _flush(seen: list[str], valkey_url: str) -> None:
    """Wait until MONITOR has shown a marker command sent after everything before it."""
    marker = unique("monitor-marker")
    client = connect_kv(valkey_url)
    await client.get(marker)
    await client.aclose()
    await eventually(lambda: _contains(seen, marker))


async def _contains(seen: list[str], text: str) -> bool:
    return any(text in c for c in seen)


@asynccontextmanager
async def monitor(valkey_url: str) -> AsyncIterator[list[str]]:
    """The commands the store runs meanwhile, lower-cased, as `command arg …`."""
    client = connect_kv(valkey_url)
    seen: list[str] = []
    started = asyncio.Event()

    async def follow() -> None:
        async with client.monitor() as m:
            started.set()
            async for info in m.listen():
                seen.append(_command(info["command"]))

    task = asyncio.create_task(follow())
    await started.wait()
    await _flush(seen, valkey_url)
    seen.clear()
    try:
        yield seen
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.aclose()


def _command(text: str) -> str:
    verb, _, rest = text.partition(" ")
    return f"{verb.lower()} {rest}".strip()


async def test_the_store_down_is_503_for_a_key_not_in_memory_and_keeps_known_keys_a_while(
    config_for: Callable[..., Any],
    stores_for: Callable[..., Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Fail closed: without the store, a key held nowhere in memory cannot be checked (503).
    A key looked up before the store went out keeps working through the outage (issue 19:
    a restart or a short outage of the store must not stop every issued key), for at most
    OUTAGE_GRACE_SECS after contact was lost (a revocation written meanwhile by a replica that
    still reaches the store could not be heard)."""
    async with AsyncExitStack() as stack:
        store = stack.enter_context(valkey_server(tmp_path))
        url = f"redis://127.0.0.1:{store}/0"
        kv = connect_kv(url)
        stack.push_async_callback(kv.aclose)
        cp = await stack.enter_async_context(control_plane(config_for, stores_for, REDIS_URL=url))
        tenants = Tenants(kv)
        tenant = await tenants.add()
        _, key = await issue(cp, tenants, set(), tenant)
        _, cold = await issue(cp, tenants, set(), tenant)
        ai = await stack.enter_async_context(
            service(build_ai, AiGatewayConfig, config_for, stores_for)(REDIS_URL=url)
        )
        keys = issued_keys_of(ai)
        await eventually(lambda: _true(keys.watch.trusted))
        assert (await get(ai, "/v1/models", key))[0] == 200
        assert digest(key) in keys._known

        await kv.shutdown(nosave=True)  # the store goes away

        status, body = await get(ai, "/v1/models", cold)
        assert status == 503, body
        assert body["error"]["code"] == "store_unavailable"
        # A made-up key is no different: the store cannot say it is unknown.
        assert (await get(ai, "/v1/models", "sk-" + "B" * 43))[0] == 503
        await eventually(lambda: _true(keys.watch.lost_since is not None))
        assert (await get(ai, "/v1/models", key))[0] == 200  # held through the outage
        monkeypatch.setattr(issued_keys, "OUTAGE_GRACE_SECS", 0.0)
        assert (await get(ai, "/v1/models", key))[0] == 503  # not beyond the grace


# --- keys issued before the projection ----------------------------------------------------


async def test_keys_issued_before_the_projection_work_once_a_control_plane_starts(
    cp: Platform,
    tenants: Tenants,
    names: set[str],
    kv: Any,
    ai_gateway: Service,
    config_for: Callable[..., Any],
    stores_for: Callable[..., Any],
) -> None:
    tenant = await tenants.add()
    _, active = await issue(cp, tenants, names, tenant)
    revoked_id, revoked = await issue(cp, tenants, names, tenant)
    assert (await cp.api("DELETE", f"/api/keys/{revoked_id}"))[0] == 200
    # The store as an earlier release left it: `cp:api-keys` (with key_hash), no projection.
    await kv.hdel(DIGESTS, digest(active), digest(revoked))
    async with ai_gateway() as ai:
        assert (await get(ai, "/v1/models", active))[0] == 401

        async with control_plane(config_for, stores_for):  # a control plane starts

            async def works() -> bool:
                return (await get(ai, "/v1/models", active))[0] == 200

            await eventually(works)
        assert (await get(ai, "/v1/models", revoked))[0] == 401
    assert json.loads(await kv.hget(DIGESTS, digest(revoked)))["status"] == "revoked"
