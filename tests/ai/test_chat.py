"""Chat completions through the AI gateway with the official OpenAI SDK, to the echo LLM
sidecar configured as an `openai_compatible` provider in `platform:providers`: non-stream and
stream, the response headers, tenants, validation, routing, prompt configuration, models."""

from __future__ import annotations

import json

import aiohttp
import openai
import pytest
from ai_kit import client, pipeline_of, provider, set_providers, tenant
from shared_kit import MASTER_KEY, user_token

from gateways.ai.tenants.keys import prompt_config_key

ECHO_KEY = "sk-echo-secret-value-1234"


@pytest.fixture
async def ai(gateway, echo, kv, monkeypatch):
    monkeypatch.setenv("ECHO_TEST_KEY", ECHO_KEY)
    await set_providers(
        kv,
        provider(
            "echo",
            echo,
            models=["echo-1", "echo-2"],
            patterns=["echo-*"],
            key_source={"type": "env_var", "var_name": "ECHO_TEST_KEY"},
        ),
    )
    async with gateway() as svc:
        yield svc


async def test_non_stream_through_the_sdk(ai) -> None:
    t = tenant()
    async with client(ai.http_url, t) as sdk:
        raw = await sdk.chat.completions.with_raw_response.create(
            model="echo-1", messages=[{"role": "user", "content": "hello there"}]
        )
    assert raw.headers["x-cache"] == "MISS"
    assert raw.headers["x-tenant-id"] == t
    answer = raw.parse()
    assert answer.object == "chat.completion"
    assert answer.choices[0].message.role == "assistant"
    assert answer.choices[0].message.content == "echo: hello there"
    assert answer.choices[0].finish_reason == "stop"
    assert answer.usage is not None
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (2, 3)
    assert answer.usage.total_tokens == 5
    assert answer.model == "echo-1" and answer.id.startswith("chatcmpl-")


async def test_stream_through_the_sdk(ai) -> None:
    t = tenant()
    async with client(ai.http_url, t) as sdk:
        stream = await sdk.chat.completions.create(
            model="echo-2",
            messages=[{"role": "user", "content": "one two three"}],
            stream=True,
        )
        chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "echo: one two three"
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert chunks[-1].choices[0].finish_reason == "stop"


async def test_raw_stream_is_sse_with_done_and_headers(ai) -> None:
    t = tenant()
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{ai.http_url}/v1/chat/completions",
            headers={"Authorization": f"Bearer {MASTER_KEY}", "x-tenant-id": t},
            json={
                "model": "echo-1",
                "messages": [{"role": "user", "content": "hi"}],
                "stream": True,
            },
        ) as resp,
    ):
        body = await resp.text()
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        assert resp.headers["x-cache"] == "MISS" and resp.headers["x-tenant-id"] == t
    events = [line[6:] for line in body.split("\n\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    first = json.loads(events[0])
    assert first["object"] == "chat.completion.chunk"
    assert first["choices"][0]["delta"]["role"] == "assistant"


async def test_content_parts_are_joined_and_unknown_fields_pass(ai) -> None:
    async with client(ai.http_url, tenant()) as sdk:
        answer = await sdk.chat.completions.create(
            model="echo-1",
            messages=[{"role": "user", "content": [{"type": "text", "text": "parts work"}]}],
            temperature=0.2,
            user="u-1",
            max_tokens=50,
        )
    assert answer.choices[0].message.content == "echo: parts work"


async def test_jwt_tenant_and_header_rules(ai, idp) -> None:
    token = await user_token(idp)  # alice, tenant acme
    async with client(ai.http_url, key=token) as sdk:
        raw = await sdk.chat.completions.with_raw_response.create(
            model="echo-1", messages=[{"role": "user", "content": "x"}]
        )
        assert raw.headers["x-tenant-id"] == "acme"
    async with client(ai.http_url, "acme", key=token) as sdk:  # the same tenant: fine
        await sdk.chat.completions.create(
            model="echo-1", messages=[{"role": "user", "content": "x"}]
        )
    async with client(ai.http_url, "globex", key=token) as sdk:
        with pytest.raises(openai.PermissionDeniedError):
            await sdk.chat.completions.create(
                model="echo-1", messages=[{"role": "user", "content": "x"}]
            )
    tenantless = await user_token(idp, scope="openid")  # no tenant_id claim
    async with client(ai.http_url, key=tenantless) as sdk:
        with pytest.raises(openai.AuthenticationError) as info:
            await sdk.chat.completions.create(
                model="echo-1", messages=[{"role": "user", "content": "x"}]
            )
    assert info.value.status_code == 401
    assert info.value.body["type"] == "unauthorized"  # type: ignore[index]
    async with client(ai.http_url, "globex", key=tenantless) as sdk:  # may name one
        raw = await sdk.chat.completions.with_raw_response.create(
            model="echo-1", messages=[{"role": "user", "content": "x"}]
        )
        assert raw.headers["x-tenant-id"] == "globex"
    admin = await user_token(idp, "admin", "admin")  # platform admin: any tenant
    async with client(ai.http_url, "globex", key=admin) as sdk:
        raw = await sdk.chat.completions.with_raw_response.create(
            model="echo-1", messages=[{"role": "user", "content": "x"}]
        )
        assert raw.headers["x-tenant-id"] == "globex"
    async with client(ai.http_url) as sdk:  # master key, no tenant
        with pytest.raises(openai.AuthenticationError):
            await sdk.chat.completions.create(
                model="echo-1", messages=[{"role": "user", "content": "x"}]
            )


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": [{"role": "user", "content": "x"}]}, "model"),
        ({"model": 7, "messages": [{"role": "user", "content": "x"}]}, "model"),
        ({"model": "echo-1"}, "messages"),
        ({"model": "echo-1", "messages": []}, "messages"),
        ({"model": "echo-1", "messages": "hi"}, "messages"),
        ({"model": "echo-1", "messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
        # found by the fuzzer (tests/fuzz): a role that is not a string was a 500
        ({"model": "echo-1", "messages": [{"role": {}, "content": ""}]}, "messages[0].role"),
        ({"model": "echo-1", "messages": [{"role": ["user"], "content": ""}]}, "messages[0].role"),
        ({"model": "echo-1", "messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        ({"model": "echo-1", "messages": [{"role": "user"}]}, "messages[0].content"),
        (
            {"model": "echo-1", "messages": [{"role": "user", "content": "x"}], "max_tokens": "a"},
            "max_tokens",
        ),
        ({"model": "nope-model", "messages": [{"role": "user", "content": "x"}]}, "model"),
    ],
)
async def test_bad_requests_are_400_openai_envelopes(ai, body, param) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{ai.http_url}/v1/chat/completions",
            headers={"Authorization": f"Bearer {MASTER_KEY}", "x-tenant-id": tenant()},
            json=body,
        ) as resp,
    ):
        error = (await resp.json())["error"]
    assert resp.status == 400, error
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert set(error) >= {"message", "type", "param", "code"}


async def test_malformed_json_is_400_invalid_request_error(ai) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{ai.http_url}/v1/chat/completions",
            headers={
                "Authorization": f"Bearer {MASTER_KEY}",
                "x-tenant-id": tenant(),
                "Content-Type": "application/json",
            },
            data=b"{not json",
        ) as resp,
    ):
        assert resp.status == 400
        assert (await resp.json())["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded"])
async def test_a_chat_body_that_is_not_json_by_its_type_is_415(ai, content_type) -> None:
    """Issue 22.7: a chat sent as text/plain is not served, nor a form read as malformed
    JSON: 415 in OpenAI's envelope, naming the type the endpoint takes."""
    body = {"model": "m-1", "messages": [{"role": "user", "content": "hi"}]}
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{ai.http_url}/v1/chat/completions",
            headers={
                "Authorization": f"Bearer {MASTER_KEY}",
                "x-tenant-id": tenant(),
                "Content-Type": content_type,
            },
            data=json.dumps(body).encode(),
        ) as resp,
    ):
        assert resp.status == 415
        error = (await resp.json())["error"]
    assert error["type"] == "unsupported_media_type"
    assert error["expected"] == "application/json"
    assert content_type in error["message"] and "application/json" in error["message"]


async def test_unknown_model_with_the_sdk(ai) -> None:
    async with client(ai.http_url, tenant()) as sdk:
        with pytest.raises(openai.BadRequestError) as info:
            await sdk.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "x"}]
            )
    assert info.value.code == "model_not_found" and info.value.param == "model"
    assert info.value.body["type"] == "invalid_request_error"  # type: ignore[index]
    assert "'gpt-4o'" in info.value.message and "GET /v1/models" in info.value.message


async def test_prompt_config_is_applied(ai, kv) -> None:
    t = tenant()
    await kv.set(
        prompt_config_key(t),
        json.dumps({"system_prompt": "Be brief.", "prefix": "[", "suffix": "]"}),
    )
    async with client(ai.http_url, t) as sdk:
        answer = await sdk.chat.completions.create(
            model="echo-1", messages=[{"role": "user", "content": "hi"}]
        )
    assert answer.choices[0].message.content == "echo: [hi]"
    assert answer.usage is not None and answer.usage.prompt_tokens == 3  # "Be brief. [hi]"


async def test_models_lists_reachable_providers(ai, kv, echo) -> None:
    async with client(ai.http_url, tenant()) as sdk:
        models = await sdk.models.list()
    assert [(m.id, m.provider) for m in models.data] == [  # type: ignore[attr-defined]
        ("echo-1", "echo"),
        ("echo-2", "echo"),
    ]
    # A provider whose key variable is not set is not reachable; a change applies within 1 s.
    await set_providers(
        kv,
        provider(
            "echo", echo, models=["echo-1"], key_source={"type": "env_var", "var_name": "NOPE_VAR"}
        ),
    )
    import asyncio

    for _ in range(30):
        async with client(ai.http_url, tenant()) as sdk:
            models = await sdk.models.list()
        if not models.data:
            break
        await asyncio.sleep(0.05)
    assert models.data == []


async def test_every_chat_ends_its_work_so_the_idle_gateway_gives_pages_back(ai) -> None:
    """`ChatPipeline.idle` gives the libraries' pages back once no chat runs or came for 10 s
    (runtime/idle_release.py): every chat, answered, streamed or refused, must end the work it
    began, or the gateway would never count as idle again."""
    idle = pipeline_of(ai).idle
    t = tenant()
    async with client(ai.http_url, t) as sdk:
        await sdk.chat.completions.create(
            model="echo-1", messages=[{"role": "user", "content": "hello there"}]
        )
        stream = await sdk.chat.completions.create(
            model="echo-1", messages=[{"role": "user", "content": "one two"}], stream=True
        )
        _ = [chunk async for chunk in stream]
        with pytest.raises(openai.BadRequestError):  # model_not_found
            await sdk.chat.completions.create(
                model="no-such-model", messages=[{"role": "user", "content": "hi"}]
            )
    assert idle._busy == 0
    assert idle._timer is not None  # the wait for the idle spell has begun
