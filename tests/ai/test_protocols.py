"""The official `openai` SDK through the gateway to each provider protocol's local server
(tests/ai/provider_servers.py: each checks the request as its provider would and answers
with the provider's published examples): the OpenAI answer, non-stream and stream, with the
provider's usage."""

from __future__ import annotations

from typing import Any

import pytest
from ai_kit import client, provider, set_providers, tenant
from openai.types.chat import ChatCompletionMessageParam
from provider_servers import EXPECTED, serve_protocol

PROTOCOLS = ("openai", "openai_compatible", "anthropic", "gemini", "cohere", "ollama")
AUTH = {"anthropic": "x-api-key", "ollama": "none"}
KEY = "sk-protocol-test-key-0123456789"


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_the_sdk_through_the_gateway_to_each_protocol(
    protocol: str, gateway: Any, kv: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROTOCOL_TEST_KEY", KEY)
    async with serve_protocol(protocol, api_key=KEY) as server:
        target = provider(
            f"p-{protocol}".replace("_", "-"),
            server.url,
            type=protocol,
            models=["the-model"],
            key_source={"type": "env_var", "var_name": "PROTOCOL_TEST_KEY"},
        )
        target["auth_type"] = AUTH.get(protocol, "bearer")
        await set_providers(kv, target)
        expected = EXPECTED["openai" if protocol == "openai_compatible" else protocol]
        async with gateway() as svc, client(svc.http_url, tenant()) as sdk:
            messages: list[ChatCompletionMessageParam] = [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Hello"},
            ]
            answer = await sdk.chat.completions.create(model="the-model", messages=messages)
            content, prompt, completion, finish, _ = expected["complete"]
            assert answer.choices[0].message.content == content
            assert answer.choices[0].finish_reason == finish
            assert answer.usage is not None
            assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (
                prompt,
                completion,
            )
            stream = await sdk.chat.completions.create(
                model="the-model", messages=messages, stream=True
            )
            pieces = [
                chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices
            ]
            assert "".join(pieces) == expected["stream"][0]
        # the provider saw its own protocol (its server checked path, auth and body)
        assert len(server.requests) == 2
