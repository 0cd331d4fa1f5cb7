"""PII redaction on the chat path: what reaches the provider, every message included, typed
placeholders, the tenant's switch, the metric and the log row's `pii_detected`, and the
redacted prompt as the cache's key. (`test_pii.py` tests the redactor alone.)"""

from __future__ import annotations

import asyncio
import json

import aiohttp
from ai_kit import client, log_rows, tenant
from openai.types.chat import ChatCompletionMessageParam

from gateways.ai.tenants.keys import prompt_config_key

CONVERSATION: list[ChatCompletionMessageParam] = [
    {"role": "system", "content": "You are a support agent."},
    {"role": "user", "content": "My card is 4111 1111 1111 1111, email ana.lopez@example.com."},
    {"role": "assistant", "content": "Thanks. What else?"},
    {
        "role": "user",
        "content": "Please call Priya Raghunathan on (212) 555-0147 about SSN 123-45-6789.",
    },
]
ORIGINALS = ("4111 1111 1111 1111", "ana.lopez@example.com", "Priya", "555-0147", "123-45-6789")


async def test_every_message_reaches_the_provider_redacted(gateway, scripted) -> None:
    async with gateway() as ai, client(ai.http_url, tenant()) as sdk:
        await sdk.chat.completions.create(model="m-1", messages=CONVERSATION)
    sent = scripted.attempts[0].body["messages"]
    text = json.dumps(sent)
    for original in ORIGINALS:
        assert original not in text
    assert sent[0]["content"] == "You are a support agent."
    assert sent[1]["content"] == "My card is <CREDIT_CARD>, email <EMAIL>."
    assert sent[3]["content"] == "Please call <PERSON> on <PHONE> about SSN <SSN>."


async def test_the_metric_and_the_log_row(gateway, scripted, analytics) -> None:
    t = tenant()
    async with gateway() as ai:
        async with client(ai.http_url, t) as sdk:
            await sdk.chat.completions.create(model="m-1", messages=CONVERSATION)
            await sdk.chat.completions.create(
                model="m-1", messages=[{"role": "user", "content": "What is 2 + 2?"}]
            )
        async with aiohttp.ClientSession() as http:
            metrics = await (await http.get(f"{ai.http_url}/metrics")).text()
        rows = await log_rows(analytics, t, 2)
    assert "ai_gateway_pii_detected_total 1.0" in metrics
    assert [r["pii_detected"] for r in rows] == [True, False]
    stored = json.dumps(rows, default=str)
    for original in ORIGINALS:
        assert original not in stored


async def test_a_tenant_can_turn_redaction_off(gateway, scripted, kv) -> None:
    t = tenant()
    await kv.set(prompt_config_key(t), json.dumps({"pii_redaction": False}))
    try:
        async with gateway() as ai, client(ai.http_url, t) as sdk:
            await sdk.chat.completions.create(model="m-1", messages=CONVERSATION)
    finally:
        await kv.delete(prompt_config_key(t))
    assert scripted.attempts[0].body["messages"][3] == CONVERSATION[3]


async def test_the_system_prompt_of_the_tenant_is_not_redacted(gateway, scripted, kv) -> None:
    t = tenant()
    config = {"system_prompt": "Sign as Maria Gonzalez, support lead."}
    await kv.set(prompt_config_key(t), json.dumps(config))
    try:
        async with gateway() as ai, client(ai.http_url, t) as sdk:
            await sdk.chat.completions.create(model="m-1", messages=CONVERSATION[1:2])
    finally:
        await kv.delete(prompt_config_key(t))
    sent = scripted.attempts[0].body["messages"]
    assert sent[0] == {"role": "system", "content": config["system_prompt"]}
    assert sent[1]["content"] == "My card is <CREDIT_CARD>, email <EMAIL>."


async def test_the_cache_keys_on_the_redacted_prompt(gateway, scripted) -> None:
    """Two people's questions that differ only in their PII share one answer: the provider
    saw neither name, and nothing keyed by a name is stored."""
    t = tenant()
    async with gateway() as ai, client(ai.http_url, t, cache=True) as sdk:
        first = await sdk.chat.completions.with_raw_response.create(
            model="m-1", messages=[{"role": "user", "content": "Write to John Smith at john@a.io"}]
        )
        await asyncio.sleep(0.3)
        second = await sdk.chat.completions.with_raw_response.create(
            model="m-1", messages=[{"role": "user", "content": "Write to Wei Zhang at wei@b.io"}]
        )
    assert (first.headers["x-cache"], second.headers["x-cache"]) == ("MISS", "HIT")
    assert scripted.attempts[0].body["messages"][0]["content"] == "Write to <PERSON> at <EMAIL>"
