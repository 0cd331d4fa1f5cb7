"""Retries, circuit breakers, fallbacks and streams at their edges, observed at local providers
speaking OpenAI's wire format (`ai_kit.Scripted`) through the official OpenAI SDK: retry counts
and backoff, no retry on 4xx, a breaker shared by two gateway instances (open, one half-open
probe, closed), the fallback order, a disconnecting stream client cancelling the upstream, a
reset mid-stream, headers propagated, the request log row, and no key in any log line."""

from __future__ import annotations

import asyncio
import json
import logging

import aiohttp
import openai
import pytest
from ai_kit import (
    Scripted,
    client,
    gateway_processes,
    log_rows,
    provider,
    set_providers,
    tenant,
)
from openai.types.chat import ChatCompletionMessageParam
from shared_kit import MASTER_KEY, running

from gateways.ai.providers import keys as providers_keys
from gateways.ai.tenants.keys import budget_key

HI: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hi"}]


async def scraped(base_url: str, *series: str) -> list[float]:
    """The values of exact series in a gateway's /metrics (0 for a series not written)."""
    async with aiohttp.ClientSession() as http, http.get(f"{base_url}/metrics") as resp:
        lines = (await resp.text()).splitlines()
    values = dict(line.rsplit(" ", 1) for line in lines if line and not line.startswith("#"))
    return [float(values.get(name, 0)) for name in series]


async def test_retries_503_twice_then_success(gateway, scripted) -> None:
    scripted.script = [503, 503, 200]
    async with gateway() as ai, client(ai.http_url, tenant()) as sdk:
        answer = await sdk.chat.completions.create(model="m-1", messages=HI)
    assert answer.choices[0].message.content == "w0 w1 w2 "
    assert len(scripted.attempts) == 3
    first, second = (
        b.at - a.at for a, b in zip(scripted.attempts, scripted.attempts[1:], strict=False)
    )
    # the spec's 100 ms initial delay, then 200 ms: jitter adds to them, never takes away
    # (each interval also holds an answer's round trip, so only the lower bound is exact)
    assert first >= 0.1, first
    assert second >= 0.2, second


async def test_a_4xx_is_not_retried(gateway, scripted) -> None:
    scripted.script = [400]
    async with gateway() as ai, client(ai.http_url, tenant()) as sdk:
        with pytest.raises(openai.BadRequestError):
            await sdk.chat.completions.create(model="m-1", messages=HI)
    assert len(scripted.attempts) == 1


async def test_exhausted_retries_are_502_provider_error(gateway, scripted) -> None:
    scripted.script = [500, 502, 429, 200]
    async with gateway() as ai, client(ai.http_url, tenant()) as sdk:
        with pytest.raises(openai.APIStatusError) as info:
            await sdk.chat.completions.create(model="m-1", messages=HI)
    assert info.value.status_code == 502
    assert info.value.body["type"] == "provider_error"  # type: ignore[index]
    assert len(scripted.attempts) == 3  # 1 + 2 retries


async def test_breaker_is_shared_opens_probes_once_and_closes(gateway, scripted, kv) -> None:
    await kv.delete(*providers_keys.breaker_keys("flaky"))
    scripted.script = [503, 503, 503]
    env = {"AI_BREAKER_FAILURES": "3", "AI_BREAKER_OPEN_SECS": "0.6", "AI_RETRY_MAX": "0"}
    async with gateway(**env) as one, gateway(**env) as two:
        a, b = client(one.http_url, tenant()), client(two.http_url, tenant())
        for _ in range(3):
            with pytest.raises(openai.APIStatusError) as info:
                await a.chat.completions.create(model="m-1", messages=HI)
            assert info.value.status_code == 502
        # Open, on the other instance too: no attempt reaches the provider.
        for sdk in (a, b):
            with pytest.raises(openai.APIStatusError) as info:
                await sdk.chat.completions.create(model="m-1", messages=HI)
            assert info.value.status_code == 503
            assert info.value.body["type"] == "all_providers_unavailable"  # type: ignore[index]
        assert len(scripted.attempts) == 3
        # What each replica saw: the one that tripped it, and a skipped call on each.
        opened = 'ai_gateway_breaker_opened_total{provider="flaky"}'
        skipped = 'ai_gateway_breaker_skipped_total{provider="flaky"}'
        assert await scraped(one.http_url, opened, skipped) == [1.0, 1.0]
        assert await scraped(two.http_url, opened, skipped) == [0.0, 1.0]
        await asyncio.sleep(0.7)  # half-open: one probe, whichever instance wins it
        scripted.delay = 0.3
        results = await asyncio.gather(
            a.chat.completions.create(model="m-1", messages=HI),
            b.chat.completions.create(model="m-1", messages=HI),
            return_exceptions=True,
        )
        assert len(scripted.attempts) == 4  # the single probe
        assert sorted(type(r).__name__ for r in results) == [
            "ChatCompletion",
            "InternalServerError",
        ]
        scripted.delay = 0
        await asyncio.sleep(0.3)  # past the breaker copies' refresh
        for sdk in (a, b):  # closed again
            await sdk.chat.completions.create(model="m-1", messages=HI)
        assert len(scripted.attempts) == 6
        await a.close()
        await b.close()


async def test_fallback_order(gateway, kv, echo, monkeypatch) -> None:
    monkeypatch.setenv("ECHO_TEST_KEY", "sk-echo-fallback")
    broken = Scripted(script=[503] * 10)
    also_broken = Scripted(script=[500] * 10)
    async with running(broken.app()) as first, running(also_broken.app()) as second:
        await set_providers(
            kv,
            provider("primary", first, models=["m-1"]),
            provider("secondary", second, models=["m-2"]),
            provider(
                "tertiary",
                echo,
                models=["echo-1"],
                key_source={"type": "env_var", "var_name": "ECHO_TEST_KEY"},
            ),
        )
        async with (
            gateway(AI_FALLBACK_CHAIN="secondary,tertiary", AI_RETRY_MAX="1") as ai,
            client(ai.http_url, tenant()) as sdk,
        ):
            answer = await sdk.chat.completions.create(model="m-1", messages=HI)
    assert answer.choices[0].message.content == "echo: hi"
    assert (len(broken.attempts), len(also_broken.attempts)) == (2, 2)
    assert broken.attempts[-1].at < also_broken.attempts[0].at


async def test_disconnecting_stream_client_cancels_the_upstream(gateway, kv) -> None:
    slow = Scripted(words=200, word_delay=0.02)
    t = tenant()
    async with running(slow.app()) as url:
        await set_providers(kv, provider("slow", url, models=["m-1"]))
        async with gateway() as ai:
            await kv.set(budget_key(t), 10_000)
            http = aiohttp.ClientSession()
            resp = await http.post(
                f"{ai.http_url}/v1/chat/completions",
                headers={"Authorization": f"Bearer {MASTER_KEY}", "x-tenant-id": t},
                json={"model": "m-1", "messages": HI, "stream": True, "max_tokens": 500},
            )
            assert resp.status == 200
            for _ in range(3):
                assert (await resp.content.readline()).startswith(b"data: ")
                await resp.content.readline()
            resp.close()  # the client goes away mid-stream
            await http.close()
            await asyncio.wait_for(slow.cancelled.wait(), 5)
            for _ in range(100):
                left = int(await kv.get(budget_key(t)))
                if left > 10_000 - 500:
                    break
                await asyncio.sleep(0.02)
    # Billed for what was produced (an estimate: the stream ended before any usage).
    assert 10_000 - 50 < left < 10_000


async def test_reset_mid_stream_ends_with_an_error_event_and_done(gateway, kv) -> None:
    broken = Scripted(words=5, fail_after_words=2)
    async with running(broken.app()) as url:
        await set_providers(kv, provider("broken", url, models=["m-1"]))
        async with (
            gateway() as ai,
            aiohttp.ClientSession() as http,
            http.post(
                f"{ai.http_url}/v1/chat/completions",
                headers={"Authorization": f"Bearer {MASTER_KEY}", "x-tenant-id": tenant()},
                json={"model": "m-1", "messages": HI, "stream": True},
            ) as resp,
        ):
            text = await resp.text()
    events = [e[6:] for e in text.split("\n\n") if e.startswith("data: ")]
    assert events[-1] == "[DONE]"
    error = json.loads(events[-2])["error"]
    assert error["type"] == "provider_error"
    assert [json.loads(e)["choices"][0]["delta"].get("content") for e in events[:2]] == [
        "w0 ",
        "w1 ",
    ]
    assert len(broken.attempts) == 1  # no failover once bytes were sent


async def test_stream_fails_over_before_the_first_byte(gateway, scripted) -> None:
    scripted.script = [503]
    async with gateway() as ai, client(ai.http_url, tenant()) as sdk:
        stream = await sdk.chat.completions.create(model="m-1", messages=HI, stream=True)
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "w0 w1 w2 "
    assert len(scripted.attempts) == 2


async def test_trace_headers_reach_the_provider_and_the_log_row(
    gateway, scripted, analytics
) -> None:
    t = tenant()
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    traceparent = f"00-{trace_id}-00f067aa0ba902b7-01"
    async with gateway() as ai:
        sdk = client(ai.http_url, t)
        await sdk.chat.completions.create(
            model="m-1",
            messages=HI,
            extra_headers={"traceparent": traceparent, "x-request-id": "req-123"},
        )
        await sdk.close()
        headers = {k.lower(): v for k, v in scripted.attempts[0].headers.items()}
        assert headers["traceparent"].split("-")[1] == trace_id
        assert headers["x-request-id"] == "req-123"
        rows = await log_rows(analytics, t, 1)
    assert len(rows) == 1
    row = rows[0]
    assert (row["model"], row["provider"], row["trace_id"]) == ("m-1", "flaky", trace_id)
    assert (row["tokens_prompt"], row["tokens_completion"]) == (7, 3)
    assert row["cache_hit"] is False and row["pii_detected"] is False
    assert row["latency_ms"] > 0


async def test_no_key_in_any_log_line(gateway, kv, echo, monkeypatch, caplog) -> None:
    secret = "sk-never-log-this-9f8e7d6c"
    monkeypatch.setenv("SECRET_KEY_VAR", secret)
    bad = Scripted(script=[401, 503, 503, 503])
    async with running(bad.app()) as url:
        await set_providers(
            kv,
            provider(
                "bad",
                url,
                models=["m-1"],
                key_source={"type": "env_var", "var_name": "SECRET_KEY_VAR"},
            ),
            provider(
                "echo",
                echo,
                models=["echo-1"],
                key_source={"type": "env_var", "var_name": "SECRET_KEY_VAR"},
            ),
        )
        caplog.set_level(logging.DEBUG)
        async with gateway() as ai, client(ai.http_url, tenant()) as sdk:
            await sdk.chat.completions.create(model="echo-1", messages=HI)
            for _ in range(2):
                with pytest.raises(openai.APIStatusError) as info:
                    await sdk.chat.completions.create(model="m-1", messages=HI)
                assert secret not in json.dumps(info.value.body)
        assert bad.attempts[0].headers["Authorization"] == f"Bearer {secret}"  # it was used
    lines = [r.getMessage() + repr(r.__dict__) for r in caplog.records]
    assert lines and not [line for line in lines if secret in line]


async def test_breaker_is_shared_by_two_gateway_processes(scripted, kv, valkey_url, tmp_path):
    """Failures seen by one process open the breaker for the other: no attempt of the second
    reaches the provider while it is open; after `AI_BREAKER_OPEN_SECS` a success closes it."""
    await kv.delete(*providers_keys.breaker_keys("flaky"))
    scripted.script = [503, 503, 503]
    env = {"AI_BREAKER_FAILURES": "3", "AI_BREAKER_OPEN_SECS": "1", "AI_RETRY_MAX": "0"}
    async with gateway_processes(2, valkey_url, tmp_path, **env) as urls:
        a, b = (client(url, tenant()) for url in urls)
        for _ in range(3):  # three failed attempts through the first process open it
            with pytest.raises(openai.APIStatusError) as info:
                await a.chat.completions.create(model="m-1", messages=HI)
            assert info.value.status_code == 502
        await asyncio.sleep(0.3)  # past the second process's breaker refresh
        with pytest.raises(openai.APIStatusError) as info:
            await b.chat.completions.create(model="m-1", messages=HI)
        assert info.value.status_code == 503  # open for the second process too
        assert len(scripted.attempts) == 3  # which never called the provider
        await asyncio.sleep(1.0)  # half-open: the next attempt is the probe, and succeeds
        await b.chat.completions.create(model="m-1", messages=HI)
        await asyncio.sleep(0.3)
        await a.chat.completions.create(model="m-1", messages=HI)  # closed for the first too
        assert len(scripted.attempts) == 5
        await a.close()
        await b.close()
