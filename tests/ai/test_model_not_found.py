"""Models no provider serves, and providers refusing the gateway's configuration (issue 18):
a 400 `model_not_found` in OpenAI's envelope that names the model and points to
`GET /v1/models`, with no provider called and no breaker touched; the local catch-all taking
only the names the local provider serves (its models endpoint, reread on a miss at most every
`REFRESH_SECS`); a provider's 401/403 (the gateway's key) and 404 (unknown model) never
counting toward a breaker nor retried. Through the official `openai` SDK, with its own retries
on where the scenario needs them."""

from __future__ import annotations

import openai
import pytest
from ai_kit import (
    ECHO_KEY,
    KEY_VARS,
    client,
    listed,
    provider,
    save_provider,
    set_providers,
    tenant,
)
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageParam
from provider_servers import EXAMPLES, serve_protocol
from redis.asyncio import Redis
from shared_kit import MASTER_KEY, free_port

from gateways.ai import local_models
from gateways.ai.providers import keys as providers_keys
from gateways.ai.providers.builtin import BUILTIN_PROVIDERS
from sidecars.echo_llm.provider import echo_provider

HI: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hi"}]


def retrying_sdk(ai_url: str) -> AsyncOpenAI:
    """The SDK as a user has it: its default retries (2, on connection errors, 408, 409, 429
    and 5xx)."""
    return AsyncOpenAI(
        base_url=f"{ai_url}/v1",
        api_key=MASTER_KEY,
        default_headers={"x-tenant-id": tenant(), "Cache-Control": "no-store"},
    )


async def breaker_keys(kv: Redis, *provider_ids: str) -> list[str]:
    return [k for p in provider_ids for k in providers_keys.breaker_keys(p) if await kv.exists(k)]


async def forget_breakers(kv: Redis, *provider_ids: str) -> None:
    for key in await breaker_keys(kv, *provider_ids):
        await kv.delete(key)


def not_found(info: pytest.ExceptionInfo[openai.BadRequestError], model: str) -> str:
    """The message of a model_not_found answer, checked for the envelope's fields."""
    err = info.value
    assert err.status_code == 400
    assert err.body == {  # the OpenAI envelope
        "message": err.body["message"],  # type: ignore[index]
        "type": "invalid_request_error",
        "param": "model",
        "code": "model_not_found",
    }
    message: str = err.body["message"]
    assert f"{model!r}" in message and "GET /v1/models" in message
    return message


async def test_misspelled_models_leave_every_breaker_closed(
    control_plane, gateway, echo, kv, monkeypatch
) -> None:
    """The issue's scenario: a development stack (the built-ins, no cloud key, no local model
    server; the echo LLM registered), several SDK calls with misspelled models. Before, each
    fell through to the local catch-all, answered 502, was retried by the gateway and by the
    SDK, and opened the local provider's breaker: then every unknown model was 503."""
    monkeypatch.setenv("ECHO_LLM_API_KEY", ECHO_KEY)
    for var in KEY_VARS:
        monkeypatch.delenv(var, raising=False)
    cp = control_plane.http_url
    nowhere = f"http://127.0.0.1:{free_port()}"
    await save_provider(cp, {"id": "ollama", "type": "ollama", "base_url": nowhere})
    await save_provider(cp, echo_provider(echo))
    ids = [*(p["id"] for p in BUILTIN_PROVIDERS), "echo"]
    await forget_breakers(kv, *ids)
    async with gateway(AI_BREAKER_FAILURES="2") as ai:
        await listed(ai.http_url, until={"echo-1", "echo-2"})
        sdk = retrying_sdk(ai.http_url)
        for _ in range(3):
            with pytest.raises(openai.BadRequestError) as info:
                await sdk.chat.completions.create(model="echo", messages=HI)
            message = not_found(info, "echo")
            assert "Did you mean" in message and "'echo-1'" in message
            with pytest.raises(openai.BadRequestError) as info:
                await sdk.chat.completions.create(model="gpt4o", messages=HI, stream=True)
            not_found(info, "gpt4o")
            with pytest.raises(openai.BadRequestError) as info:
                await sdk.chat.completions.create(model="llama3:8b", messages=HI)
            message = not_found(info, "llama3:8b")
            assert "local provider 'ollama' could not be reached" in message
        assert await breaker_keys(kv, *ids) == []
        answer = await sdk.chat.completions.create(model="echo-1", messages=HI)
        assert answer.choices[0].message.content == "echo: hi"
        await sdk.close()


async def test_the_catch_all_takes_only_what_the_local_provider_serves(
    gateway, kv, monkeypatch
) -> None:
    monkeypatch.setattr(local_models, "REFRESH_SECS", 3600.0)  # no reread on a miss, for now
    await forget_breakers(kv, "ollama")
    async with serve_protocol("ollama") as ollama:  # serves llama3.2:latest
        await set_providers(kv, provider("ollama", ollama.url, type="ollama"))
        async with gateway() as ai, client(ai.http_url, tenant()) as sdk:
            for model in ("llama3.2", "llama3.2:latest"):  # no tag: Ollama's `latest`
                answer = await sdk.chat.completions.create(model=model, messages=HI)
                assert answer.choices[0].message.content == "Hello! How are you today?"
            for _ in range(2):
                with pytest.raises(openai.BadRequestError) as info:
                    await sdk.chat.completions.create(model="llama3.2:1b", messages=HI)
                message = not_found(info, "llama3.2:1b")
                assert "'ollama' does not serve it (it serves: llama3.2:latest)" in message
            assert await listed(ai.http_url) == [("llama3.2:latest", "ollama")]

            def calls() -> tuple[int, int]:
                paths = [r.path for r in ollama.requests]
                return paths.count("/v1/models"), paths.count("/api/chat")

            assert calls() == (1, 2)  # one read of the list; no chat call for the miss

            # The model is pulled: served once a miss may reread the list.
            pulled = {"id": "llama3.2:1b", "object": "model", "created": 0, "owned_by": "library"}
            monkeypatch.setitem(
                EXAMPLES["ollama"],
                "models",
                {"object": "list", "data": [*EXAMPLES["ollama"]["models"]["data"], pulled]},
            )
            with pytest.raises(openai.BadRequestError):
                await sdk.chat.completions.create(model="llama3.2:1b", messages=HI)
            assert calls() == (1, 2)
            monkeypatch.setattr(local_models, "REFRESH_SECS", 0.0)
            answer = await sdk.chat.completions.create(model="llama3.2:1b", messages=HI)
            assert answer.choices[0].message.content == "Hello! How are you today?"
            assert calls() == (2, 3)
    assert await breaker_keys(kv, "ollama") == []


async def test_a_provider_without_its_key_is_model_not_found(gateway, kv, monkeypatch) -> None:
    """The built-ins (nothing stored), OPENAI_API_KEY unset: gpt-4o routes to openai, which
    the gateway cannot call; the answer says which variable to set."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    await set_providers(kv)
    await forget_breakers(kv, "openai")
    async with gateway() as ai, client(ai.http_url, tenant()) as sdk:
        with pytest.raises(openai.BadRequestError) as info:
            await sdk.chat.completions.create(model="gpt-4o", messages=HI)
    message = not_found(info, "gpt-4o")
    assert "provider 'openai'" in message and "OPENAI_API_KEY is not set" in message
    assert await breaker_keys(kv, "openai") == []


@pytest.mark.parametrize("status", [401, 403])
async def test_a_provider_refusing_the_gateways_key_opens_no_breaker(
    gateway, scripted, kv, status
) -> None:
    """One such answer would open this breaker if it counted; the SDK is told not to resend."""
    await forget_breakers(kv, "flaky")
    scripted.script = [status, status]
    async with gateway(AI_BREAKER_FAILURES="1") as ai:
        sdk = retrying_sdk(ai.http_url)
        for attempts in (1, 2):
            with pytest.raises(openai.APIStatusError) as info:
                await sdk.chat.completions.create(model="m-1", messages=HI)
            assert info.value.status_code == 502
            assert info.value.body["type"] == "provider_error"  # type: ignore[index]
            assert f"HTTP {status}" in info.value.message
            assert info.value.response.headers["x-should-retry"] == "false"
            assert len(scripted.attempts) == attempts  # no retry, by the gateway or the SDK
        assert await breaker_keys(kv, "flaky") == []
        answer = await sdk.chat.completions.create(model="m-1", messages=HI)
        assert answer.choices[0].message.content == "w0 w1 w2 "
        await sdk.close()


async def test_a_provider_not_knowing_the_model_is_model_not_found(gateway, scripted, kv) -> None:
    await forget_breakers(kv, "flaky")
    scripted.script = [404]
    async with gateway(AI_BREAKER_FAILURES="1") as ai, client(ai.http_url, tenant()) as sdk:
        with pytest.raises(openai.BadRequestError) as info:
            await sdk.chat.completions.create(model="m-1", messages=HI)
        assert "provider 'flaky' answered that it does not know it" in not_found(info, "m-1")
        assert len(scripted.attempts) == 1
        assert await breaker_keys(kv, "flaky") == []
        await sdk.chat.completions.create(model="m-1", messages=HI)
