"""The two-tier response cache on the chat path, through the official OpenAI SDK: `x-cache`
MISS → HIT → SEMANTIC_HIT, near misses refused, no crossing of tenants or models,
`Cache-Control` bypasses, the tenant's switch, expiry, no budget spent on a hit, streaming
untouched, the metric and the log row, and two gateways (in process, and as two OS
processes) sharing the tiers.
(`test_cache.py` tests the cache package alone: conversations, parameters, purges, stores
down.)"""

from __future__ import annotations

import asyncio
import json
import threading

import aiohttp
import pytest
from ai_kit import client, gateway_processes, log_rows, pipeline_of, tenant
from openai.types.chat import ChatCompletionMessageParam
from shared_kit import MASTER_KEY

from gateways.ai.providers import keys as providers_keys
from gateways.ai.tenants.keys import budget_key, prompt_config_key

# Store-facing: runs on the session's Valkey cluster (issue 24; tests/conftest.py).
pytestmark = pytest.mark.kv_cluster

ASKED = "How many days are in a leap year?"
REWORDED = "How many days does a leap year have?"


def user(text: str) -> list[ChatCompletionMessageParam]:
    return [{"role": "user", "content": text}]


async def ask(url: str, t: str, text: str = ASKED, model: str = "m-1", **headers: str) -> str:
    """One non-stream completion; returns its `x-cache` header."""
    async with client(url, t, cache=True) as sdk:
        raw = await sdk.chat.completions.with_raw_response.create(
            model=model, messages=user(text), extra_headers=headers
        )
    assert raw.headers["x-tenant-id"] == t
    completion = raw.parse()
    assert completion.choices[0].message.content == "w0 w1 w2 "
    return raw.headers["x-cache"]


async def test_miss_then_exact_hit_then_semantic_hit(gateway, scripted) -> None:
    t = tenant()
    async with gateway() as ai:
        assert await ask(ai.http_url, t) == "MISS"
        await asyncio.sleep(0.3)  # the store runs after the answer
        assert await ask(ai.http_url, t) == "HIT"
        assert await ask(ai.http_url, t, REWORDED) == "SEMANTIC_HIT"
        async with aiohttp.ClientSession() as http:
            metrics = await (await http.get(f"{ai.http_url}/metrics")).text()
    assert len(scripted.attempts) == 1  # the hits never reached the provider
    assert "ai_gateway_cache_hits_total 2.0" in metrics
    assert "ai_gateway_cache_misses_total 1.0" in metrics


async def test_a_near_miss_is_asked_and_a_rewording_is_kept_exactly(gateway, scripted) -> None:
    """ "Summarize ticket 4412" is 0.98 similar to "Summarize ticket 4411": the guard sends it
    to the provider. A rewording of 4411 is served from the cache (SEMANTIC_HIT) and kept
    under its own words: asked again, it is an exact HIT."""
    t = tenant()
    async with gateway() as ai:
        assert await ask(ai.http_url, t, "Summarize ticket 4411.") == "MISS"
        await asyncio.sleep(0.3)
        assert await ask(ai.http_url, t, "Summarize ticket 4412.") == "MISS"
        await asyncio.sleep(0.3)
        reworded = "Give me a summary of ticket 4411."
        assert await ask(ai.http_url, t, reworded) == "SEMANTIC_HIT"
        assert await ask(ai.http_url, t, reworded) == "HIT"
    assert len(scripted.attempts) == 2


async def test_a_hit_gets_its_own_id(gateway, scripted) -> None:
    t = tenant()
    async with gateway() as ai, client(ai.http_url, t, cache=True) as sdk:
        first = await sdk.chat.completions.create(model="m-1", messages=user(ASKED))
        await asyncio.sleep(0.3)
        second = await sdk.chat.completions.create(model="m-1", messages=user(ASKED))
    assert first.id != second.id
    assert second.choices[0].message.content == first.choices[0].message.content


async def test_no_crossing_tenants_or_models(gateway, scripted, kv) -> None:
    scripted_models = json.loads(await kv.hget(providers_keys.PROVIDERS, "flaky"))
    scripted_models["default_models"] = ["m-1", "m-2"]
    await kv.hset(providers_keys.PROVIDERS, "flaky", json.dumps(scripted_models))
    await kv.incr(providers_keys.VERSION)
    await kv.publish(providers_keys.CHANGED, "flaky")
    a, b, c = tenant(), tenant(), tenant()
    async with gateway() as ai:
        assert await ask(ai.http_url, a) == "MISS"
        await asyncio.sleep(0.3)
        assert await ask(ai.http_url, b) == "MISS"  # the same text, another tenant
        assert await ask(ai.http_url, c, REWORDED) == "MISS"  # a paraphrase, another tenant
        assert await ask(ai.http_url, a, REWORDED, model="m-2") == "MISS"  # another model
        assert await ask(ai.http_url, a) == "HIT"
    assert len(scripted.attempts) == 4


async def test_cache_control_bypasses(gateway, scripted) -> None:
    t = tenant()
    async with gateway() as ai:
        assert await ask(ai.http_url, t, **{"Cache-Control": "no-store"}) == "MISS"
        await asyncio.sleep(0.3)
        assert await ask(ai.http_url, t) == "MISS"  # no-store: nothing was kept
        await asyncio.sleep(0.3)
        assert await ask(ai.http_url, t, **{"Cache-Control": "no-cache"}) == "MISS"
        assert await ask(ai.http_url, t) == "HIT"
    assert len(scripted.attempts) == 3


async def test_a_tenant_can_turn_the_cache_off(gateway, scripted, kv) -> None:
    t = tenant()
    await kv.set(prompt_config_key(t), json.dumps({"cache_enabled": False}))
    try:
        async with gateway() as ai:
            for _ in range(2):
                assert await ask(ai.http_url, t) == "MISS"
                await asyncio.sleep(0.3)
    finally:
        await kv.delete(prompt_config_key(t))
    assert len(scripted.attempts) == 2


async def test_an_answer_expires(gateway, scripted) -> None:
    t = tenant()
    async with gateway(AI_CACHE_TTL_SECS="1") as ai:
        assert await ask(ai.http_url, t) == "MISS"
        await asyncio.sleep(1.3)
        assert await ask(ai.http_url, t, REWORDED) == "MISS"  # the semantic tier forgot too
        assert await ask(ai.http_url, t, ASKED, **{"Cache-Control": "no-store"}) == "MISS"
    assert len(scripted.attempts) == 3


async def test_a_hit_costs_no_budget(gateway, scripted, kv) -> None:
    t = tenant()
    async with gateway() as ai, aiohttp.ClientSession() as http:
        await http.post(
            f"{ai.http_url}/v1/budget/{t}",
            json={"tokens": 1000},
            headers={"Authorization": f"Bearer {MASTER_KEY}"},
        )
        assert await ask(ai.http_url, t) == "MISS"
        spent = 1000 - int(await kv.get(budget_key(t)))
        assert spent == 7 + 3  # the scripted provider's usage
        await asyncio.sleep(0.3)
        assert await ask(ai.http_url, t) == "HIT"
        assert await ask(ai.http_url, t, REWORDED) == "SEMANTIC_HIT"
        assert int(await kv.get(budget_key(t))) == 1000 - spent


async def test_a_vector_store_held_up_never_holds_a_chat_up(gateway, scripted) -> None:
    """The semantic tier's writes (a flush, a purge) never queue its searches; and searches
    that cannot run at all (its search threads taken, as by a store busy for seconds) make
    the lookup a miss at AI_CACHE_LOOKUP_TIMEOUT_MS: the provider answers, the metric counts
    it. Without the deadline the third chat would wait until the threads were freed."""
    t = tenant()
    release = threading.Event()
    async with gateway(AI_CACHE_LOOKUP_TIMEOUT_MS="300") as ai:
        assert await ask(ai.http_url, t) == "MISS"
        await asyncio.sleep(0.3)  # stored
        cache = pipeline_of(ai).cache
        assert cache is not None
        semantic = await cache._semantic_tier()
        try:
            semantic._writes.submit(release.wait)  # a write that does not end
            assert await ask(ai.http_url, t, REWORDED) == "SEMANTIC_HIT"
            for _ in range(semantic._reads._max_workers):
                semantic._reads.submit(release.wait)  # every search thread taken
            assert await ask(ai.http_url, t, "How many days are in a common year?") == "MISS"
        finally:
            release.set()
        async with aiohttp.ClientSession() as http:
            metrics = await (await http.get(f"{ai.http_url}/metrics")).text()
    assert "ai_gateway_cache_lookup_timeouts_total 1.0" in metrics
    assert len(scripted.attempts) == 2


async def test_streaming_bypasses_the_cache(gateway, scripted) -> None:
    t = tenant()
    async with gateway() as ai, client(ai.http_url, t, cache=True) as sdk:
        for _ in range(2):
            raw = await sdk.chat.completions.with_raw_response.create(
                model="m-1", messages=user(ASKED), stream=True
            )
            assert raw.headers["x-cache"] == "MISS"
            text = "".join(
                [c.choices[0].delta.content or "" async for c in raw.parse() if c.choices]
            )
            assert text == "w0 w1 w2 "
            await asyncio.sleep(0.3)
        assert await ask(ai.http_url, t) == "MISS"  # nothing was stored by the streams
    assert len(scripted.attempts) == 3


async def test_the_log_row_says_cache_hit(gateway, scripted, analytics) -> None:
    t = tenant()
    async with gateway() as ai:
        await ask(ai.http_url, t)
        await asyncio.sleep(0.3)
        await ask(ai.http_url, t)
        rows = await log_rows(analytics, t, 2, "cache_hit, tokens_prompt, tokens_completion")
    assert [(r["cache_hit"], r["tokens_prompt"] + r["tokens_completion"]) for r in rows] == [
        (False, 10),
        (True, 0),  # a hit used no provider tokens
    ]


async def test_two_gateways_share_both_tiers(gateway, scripted) -> None:
    t = tenant()
    async with gateway() as one, gateway() as two:
        assert await ask(one.http_url, t) == "MISS"
        await asyncio.sleep(0.3)
        assert await ask(two.http_url, t) == "HIT"
        assert await ask(two.http_url, t, REWORDED) == "SEMANTIC_HIT"
    assert len(scripted.attempts) == 1


async def test_two_gateway_processes_share_the_exact_tier(scripted, valkey_url, tmp_path) -> None:
    """Milvus Lite admits one owning process per file, so each process has its own semantic
    tier here; with a Milvus server as MILVUS_URI they share it as the in-process pair does."""
    t = tenant()
    async with gateway_processes(2, valkey_url, tmp_path) as urls:
        assert await ask(urls[0], t) == "MISS"
        await asyncio.sleep(0.5)
        assert await ask(urls[1], t) == "HIT"
    assert len(scripted.attempts) == 1


async def test_a_tenants_suffix_does_not_keep_rewordings_from_hitting(
    gateway, scripted, kv
) -> None:
    """The prompt configuration glues its suffix to the user's last word ("year?ref-3f9a"):
    the guard compares what the user wrote, so a rewording is still a SEMANTIC_HIT."""
    t = tenant()
    await kv.set(prompt_config_key(t), json.dumps({"suffix": "ref-3f9a1c2e"}))
    try:
        async with gateway() as ai:
            assert await ask(ai.http_url, t, ASKED) == "MISS"
            await asyncio.sleep(0.3)
            assert await ask(ai.http_url, t, REWORDED) == "SEMANTIC_HIT"
    finally:
        await kv.delete(prompt_config_key(t))
    assert len(scripted.attempts) == 1
