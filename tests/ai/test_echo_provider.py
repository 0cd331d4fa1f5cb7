"""The echo LLM as a new user meets it (issue 18): stored through the control plane's
`POST /api/providers` as the launcher registers it in development, its key in
ECHO_LLM_API_KEY; then `GET /v1/models` lists its models (and nothing for the built-ins whose
key is not set), and the official `openai` SDK gets a non-stream and a stream answer through
the `openai_compatible` adapter. Deleting it takes it out again."""

from __future__ import annotations

import aiohttp
import openai
import pytest
from ai_kit import ECHO_KEY, KEY_VARS, client, listed, save_provider, tenant
from openai.types.chat import ChatCompletionMessageParam
from shared_kit import MASTER_KEY, free_port

from sidecars.echo_llm.provider import echo_provider

HELLO: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hello there"}]


async def test_echo_registered_like_the_launcher_answers_the_sdk(
    control_plane_with, gateway, echo, monkeypatch
) -> None:
    monkeypatch.setenv("ECHO_LLM_API_KEY", ECHO_KEY)
    for var in KEY_VARS:
        monkeypatch.delenv(var, raising=False)
    async with gateway() as ai, control_plane_with(AI_GATEWAY_GRPC=ai.grpc_target) as plane:
        cp = plane.http_url
        # A fresh development stack: the built-ins, none with a key, and no local model server
        # (the local provider pointed where nothing listens): nothing to list.
        await save_provider(
            cp, {"id": "ollama", "type": "ollama", "base_url": f"http://127.0.0.1:{free_port()}"}
        )
        assert await listed(ai.http_url, until=set()) == []

        await save_provider(cp, echo_provider(echo))
        assert await listed(ai.http_url, until={"echo-1", "echo-2"}) == [
            ("echo-1", "echo"),
            ("echo-2", "echo"),
        ]
        async with (
            aiohttp.ClientSession() as http,
            http.get(
                f"{cp}/api/providers", headers={"Authorization": f"Bearer {MASTER_KEY}"}
            ) as resp,
        ):
            stored = {p["id"]: p for p in (await resp.json())["providers"]}
        assert stored["echo"]["enabled"] is True
        assert stored["echo"]["key_source"] == {"type": "env_var", "var_name": "ECHO_LLM_API_KEY"}
        async with (  # the control plane's provider test reaches it with the same key
            aiohttp.ClientSession() as http,
            http.post(
                f"{cp}/api/providers/echo/test", headers={"Authorization": f"Bearer {MASTER_KEY}"}
            ) as resp,
        ):
            tested = await resp.json()
        assert (tested["status"], tested["models"]) == ("valid", ["echo-1", "echo-2"])

        # A built-in lists its models once its key variable is set, not before.
        monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-not-used")
        assert ("gpt-4o", "openai") in await listed(ai.http_url)
        monkeypatch.delenv("OPENAI_API_KEY")

        async with client(ai.http_url, tenant()) as sdk:
            answer = await sdk.chat.completions.create(model="echo-1", messages=HELLO)
            assert answer.choices[0].message.content == "echo: hello there"
            assert answer.usage is not None and answer.usage.total_tokens == 5
            stream = await sdk.chat.completions.create(
                model="echo-2",
                messages=[{"role": "user", "content": "one two three"}],
                stream=True,
            )
            chunks = [chunk async for chunk in stream]
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == "echo: one two three"
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"

        # Removable like any provider: its models are gone, and naming one is a clear 400.
        async with (
            aiohttp.ClientSession() as http,
            http.delete(
                f"{cp}/api/providers/echo", headers={"Authorization": f"Bearer {MASTER_KEY}"}
            ) as resp,
        ):
            assert resp.status == 200
        assert await listed(ai.http_url, until=set()) == []
        async with client(ai.http_url, tenant()) as sdk:
            with pytest.raises(openai.BadRequestError) as info:
                await sdk.chat.completions.create(model="echo-1", messages=HELLO)
        assert info.value.code == "model_not_found"
