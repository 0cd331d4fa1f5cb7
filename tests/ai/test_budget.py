"""Token budgets on the chat path: 429 `budget_exceeded`, exact settlement against the echo
provider's deterministic usage, a concurrent burst through two gateway instances sharing one
Valkey, and the `budget_warning` notification reaching an in-process control plane once."""

from __future__ import annotations

import asyncio

import aiohttp
import openai
import pytest
from ai_kit import client, gateway_processes, provider, set_providers, tenant
from openai.types.chat import ChatCompletionMessageParam
from shared_kit import MASTER_KEY

from controlplane.app import build as build_cp
from controlplane.config import ControlPlaneConfig
from gateways.ai.tenants.keys import budget_key, warned_key
from runtime.testing import serving
from strata.controlplane.v1 import notification_pb2, notification_pb2_grpc

# Store-facing: runs on the session's Valkey cluster (issue 24; tests/conftest.py).
pytestmark = pytest.mark.kv_cluster

# "a b c": prompt estimate 3 chars // 4 + 4 per message + 1 = 6; with max_tokens 10 a request
# reserves 16. The echo answers "echo: a b c": usage 3 prompt + 4 completion words = 7.
MESSAGES: list[ChatCompletionMessageParam] = [{"role": "user", "content": "a b c"}]
RESERVED, USED = 16, 7


@pytest.fixture
async def echo_provider(echo, kv, monkeypatch):
    monkeypatch.setenv("ECHO_TEST_KEY", "sk-echo-0000")
    await set_providers(
        kv,
        provider(
            "echo",
            echo,
            models=["echo-1"],
            key_source={"type": "env_var", "var_name": "ECHO_TEST_KEY"},
        ),
    )


async def set_budget(url: str, t: str, tokens: int) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{url}/v1/budget/{t}",
            json={"tokens": tokens},
            headers={"Authorization": f"Bearer {MASTER_KEY}"},
        ) as resp,
    ):
        assert resp.status == 200, await resp.text()


async def test_settles_exactly_and_refuses_when_not_enough(gateway, echo_provider, kv) -> None:
    t = tenant()
    async with gateway() as ai:
        await set_budget(ai.http_url, t, RESERVED + USED)
        async with client(ai.http_url, t) as sdk:
            await sdk.chat.completions.create(model="echo-1", messages=MESSAGES, max_tokens=10)
            assert int(await kv.get(budget_key(t))) == RESERVED  # 23 - 7
            await sdk.chat.completions.create(model="echo-1", messages=MESSAGES, max_tokens=10)
            assert int(await kv.get(budget_key(t))) == RESERVED - USED  # 9 < 16
            with pytest.raises(openai.RateLimitError) as info:
                await sdk.chat.completions.create(model="echo-1", messages=MESSAGES, max_tokens=10)
            assert info.value.body["type"] == "budget_exceeded"  # type: ignore[index]
            assert int(await kv.get(budget_key(t))) == RESERVED - USED  # nothing taken
            # A stream is settled too.
            await set_budget(ai.http_url, t, 100)
            stream = await sdk.chat.completions.create(
                model="echo-1", messages=MESSAGES, max_tokens=10, stream=True
            )
            [_ async for _ in stream]
            assert int(await kv.get(budget_key(t))) == 100 - USED
        # No budget: unlimited, nothing written.
        u = tenant()
        async with client(ai.http_url, u) as sdk:
            await sdk.chat.completions.create(model="echo-1", messages=MESSAGES)
        assert await kv.get(budget_key(u)) is None
        async with aiohttp.ClientSession() as http, http.get(ai.http_url + "/metrics") as resp:
            metrics = await resp.text()
        assert "ai_gateway_budget_exceeded_total 1.0" in metrics


async def test_concurrent_burst_on_two_instances_never_overdraws(
    gateway, echo_provider, kv
) -> None:
    t = tenant()
    budget = 400
    async with gateway() as one, gateway() as two:
        await set_budget(one.http_url, t, budget)
        sdks = [client(one.http_url, t), client(two.http_url, t)]

        async def ask(i: int) -> str:
            try:
                await sdks[i % 2].chat.completions.create(
                    model="echo-1", messages=MESSAGES, max_tokens=10
                )
                return "ok"
            except openai.RateLimitError as exc:
                assert exc.body["type"] == "budget_exceeded"  # type: ignore[index]
                return "refused"

        outcomes = await asyncio.gather(*(ask(i) for i in range(80)))
        for sdk in sdks:
            await sdk.close()
    ok = outcomes.count("ok")
    left = int(await kv.get(budget_key(t)))
    assert left == budget - USED * ok  # every success billed exactly its usage
    assert left >= 0
    assert ok >= budget // RESERVED  # at least what fits at once was served
    assert outcomes.count("refused") == 80 - ok > 0


async def test_budget_warning_reaches_the_control_plane_once(
    gateway, echo_provider, kv, config_for, stores_for
) -> None:
    t = tenant()
    cp_config = config_for(ControlPlaneConfig)
    async with (
        serving(build_cp(cp_config, stores_for(cp_config))) as cp,
        gateway(CONTROLPLANE_GRPC=cp.grpc_target) as ai,
    ):
        await set_budget(ai.http_url, t, 50)  # 80% used: 10 tokens left or fewer
        async with client(ai.http_url, t) as sdk:
            for _ in range(5):  # 50 → 43 → 36 → 29 → 22 → 15: not yet
                await sdk.chat.completions.create(model="echo-1", messages=MESSAGES, max_tokens=10)
            assert int(await kv.get(budget_key(t))) == 15
            assert await kv.get(warned_key(t)) is None
            await sdk.chat.completions.create(  # → 8: crossed
                model="echo-1", messages=MESSAGES, max_tokens=2
            )
            assert int(await kv.get(budget_key(t))) == 8
            stub = notification_pb2_grpc.NotificationServiceStub(cp.channel)
            listed = None
            for _ in range(100):
                listed = await stub.ListNotifications(
                    notification_pb2.ListNotificationsRequest(tenant_id=t),
                    metadata=(("authorization", f"Bearer {MASTER_KEY}"),),
                    timeout=5,
                )
                if listed.notifications:
                    break
                await asyncio.sleep(0.05)
            assert listed is not None and len(listed.notifications) == 1
            note = listed.notifications[0]
            assert note.notification_type == "budget_warning"
            # Later requests past 80% do not warn again.
            await sdk.chat.completions.create(
                model="echo-1", messages=[{"role": "user", "content": "a"}], max_tokens=1
            )
            await asyncio.sleep(0.3)
            listed = await stub.ListNotifications(
                notification_pb2.ListNotificationsRequest(tenant_id=t),
                metadata=(("authorization", f"Bearer {MASTER_KEY}"),),
                timeout=5,
            )
            assert len(listed.notifications) == 1


async def test_burst_from_two_gateway_processes(echo_provider, kv, valkey_url, tmp_path) -> None:
    t = tenant()
    async with gateway_processes(2, valkey_url, tmp_path) as urls:
        budget = 300
        await set_budget(urls[0], t, budget)
        sdks = [client(url, t) for url in urls]

        async def ask(i: int) -> str:
            try:
                await sdks[i % 2].chat.completions.create(
                    model="echo-1", messages=MESSAGES, max_tokens=10
                )
                return "ok"
            except openai.RateLimitError:
                return "refused"

        outcomes = await asyncio.gather(*(ask(i) for i in range(60)))
        for sdk in sdks:
            await sdk.close()
    ok = outcomes.count("ok")
    left = int(await kv.get(budget_key(t)))
    assert left == budget - USED * ok >= 0
    assert ok >= budget // RESERVED and outcomes.count("refused") > 0
