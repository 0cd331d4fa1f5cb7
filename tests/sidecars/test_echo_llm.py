"""The echo LLM through the official `openai` SDK: completions, streaming, auth, faults."""

from __future__ import annotations

import time

import openai
import pytest
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageParam

from sidecars.echo_llm.app import build_app

MESSAGES: list[ChatCompletionMessageParam] = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "first question"},
    {"role": "assistant", "content": "echo: first question"},
    {"role": "user", "content": "hello big world"},
]
# prompt words: 2 + 2 + 3 + 3 = 10; answer "echo: hello big world" = 4 words
USAGE = {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14}


@pytest.fixture
async def llm(running):
    async with running(build_app()) as server:
        yield server


@pytest.fixture
async def client(llm):
    # max_retries=0: the fault tests must see the first answer, not the SDK's retries.
    async with AsyncOpenAI(
        base_url=str(llm.make_url("/v1")), api_key="test-key", max_retries=0
    ) as sdk:
        yield sdk


async def test_models(client):
    page = await client.models.list()
    assert [model.id for model in page.data] == ["echo-1", "echo-2"]
    assert all(model.owned_by == "strata" for model in page.data)


async def test_chat_completion_echoes_last_user_message(client):
    reply = await client.chat.completions.create(model="echo-1", messages=MESSAGES)
    assert reply.id.startswith("chatcmpl-")
    assert reply.object == "chat.completion"
    assert reply.model == "echo-1"
    assert len(reply.choices) == 1
    choice = reply.choices[0]
    assert (choice.index, choice.finish_reason) == (0, "stop")
    assert choice.message.role == "assistant"
    assert choice.message.content == "echo: hello big world"
    assert reply.usage is not None
    assert reply.usage.model_dump(include=set(USAGE)) == USAGE


async def test_stream_one_chunk_per_word_then_stop(client):
    stream = await client.chat.completions.create(
        model="echo-1",
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    assert all(chunk.object == "chat.completion.chunk" for chunk in chunks)
    assert len({chunk.id for chunk in chunks}) == 1
    content = [c.choices[0].delta.content for c in chunks if c.choices]
    content = [piece for piece in content if piece]
    assert content == ["echo: ", "hello ", "big ", "world"]
    assert chunks[0].choices[0].delta.role == "assistant"
    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert [c.choices[0].finish_reason for c in finals] == ["stop"]
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.model_dump(include=set(USAGE)) == USAGE


async def test_raw_stream_is_sse_ending_with_done(http, llm):
    async with http.post(
        llm.make_url("/v1/chat/completions"),
        headers={"Authorization": "Bearer k"},
        json={"model": "echo-1", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
    ) as resp:
        assert resp.status == 200
        assert resp.content_type == "text/event-stream"
        text = await resp.text()
    events = [block for block in text.split("\n\n") if block]
    assert all(event.startswith("data: ") for event in events)
    assert events[-1] == "data: [DONE]"
    assert len(events) == 4  # "echo: ", "hi", the stop chunk, [DONE]; no usage unless asked
    assert '"usage"' not in text


async def test_missing_key_is_401_envelope(http, llm):
    async with http.post(
        llm.make_url("/v1/chat/completions"), json={"model": "echo-1", "messages": MESSAGES}
    ) as resp:
        assert resp.status == 401
        assert await resp.json() == {
            "error": {
                "message": "Missing or malformed bearer API key.",
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_api_key",
            }
        }
    # The SDK always sends its key, so replace the header with a non-bearer one.
    async with AsyncOpenAI(
        base_url=str(llm.make_url("/v1")),
        api_key="unused",
        max_retries=0,
        default_headers={"Authorization": "Basic dXNlcjpwdw=="},
    ) as sdk:
        with pytest.raises(openai.AuthenticationError) as caught:
            await sdk.chat.completions.create(model="echo-1", messages=MESSAGES)
    assert caught.value.status_code == 401


async def test_bad_requests_are_400_envelopes(http, llm):
    url, auth = llm.make_url("/v1/chat/completions"), {"Authorization": "Bearer k"}
    for payload, param in (({"messages": MESSAGES}, "model"), ({"model": "echo-1"}, "messages")):
        async with http.post(url, headers=auth, json=payload) as resp:
            assert resp.status == 400
            error = (await resp.json())["error"]
        assert (error["type"], error["param"]) == ("invalid_request_error", param)
    async with http.post(url, headers=auth, data=b"{not json") as resp:
        assert resp.status == 400
        assert (await resp.json())["error"]["type"] == "invalid_request_error"


async def test_injected_faults(client):
    with pytest.raises(openai.InternalServerError) as caught:
        await client.chat.completions.create(model="fail-500", messages=MESSAGES)
    assert caught.value.status_code == 500
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["code"] == "injected_fault"
    with pytest.raises(openai.RateLimitError) as limited:
        await client.chat.completions.create(model="fail-429-mini", messages=MESSAGES)
    assert limited.value.status_code == 429
    started = time.monotonic()
    reply = await client.chat.completions.create(model="slow-200", messages=MESSAGES)
    assert time.monotonic() - started >= 0.2
    assert reply.choices[0].message.content == "echo: hello big world"
    assert reply.model == "slow-200"


async def test_health_needs_no_key(http, llm):
    async with http.get(llm.make_url("/health")) as resp:
        assert resp.status == 200
        assert await resp.json() == {"status": "ok", "service": "echo-llm"}
