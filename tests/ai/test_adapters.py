"""The provider adapters against local servers speaking each provider's documented wire format
(tests/ai/provider_servers.py): the request each sends, what each makes of the providers'
published example answers, streamed or not, and how failures map to ProviderError."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
from provider_servers import EXAMPLES, EXPECTED, PROTOCOLS, serve_protocol
from shared_kit import free_port, running

from gateways.ai.providers import ADAPTERS
from gateways.ai.providers.base import ChatCall, Delta, ProviderError, ProviderTarget, Usage
from gateways.ai.providers.builtin import (
    ANTHROPIC_MODELS,
    ANTHROPIC_PROBE_MODEL,
    BUILTIN_PROVIDERS,
    PROVIDER_TYPE_DEFAULTS,
)
from gateways.ai.providers.common import join_url
from runtime.http1.client import HttpClient
from sidecars.echo_llm.app import build_app as build_echo_app

KEY = "sk-test-0123456789abcdef"
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
MODELS = {
    "openai": "gpt-4o-mini",
    "anthropic": "claude-sonnet-4-5",
    "gemini": "gemini-2.0-flash",
    "cohere": "command-a-03-2025",
    "ollama": "llama3.2",
}
AUTH = {
    "openai": "bearer",
    "anthropic": "x-api-key",
    "gemini": "bearer",
    "cohere": "bearer",
    "ollama": "none",
}
MESSAGES: list[Mapping[str, Any]] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Hello"},
    {"role": "assistant", "content": "Hi."},
    {"role": "user", "content": [{"type": "text", "text": "How are you?"}]},
]


@pytest.fixture
async def http() -> AsyncIterator[HttpClient]:
    client = HttpClient()
    yield client
    client.close()


def target_for(protocol: str, url: str, *, key: str | None = KEY) -> ProviderTarget:
    auth = AUTH[protocol]
    return ProviderTarget(protocol, protocol, url, auth, None if auth == "none" else key)


def call_for(protocol: str, **params: object) -> ChatCall:
    return ChatCall(
        model=MODELS[protocol],
        messages=MESSAGES,
        params=params,
        headers={"traceparent": TRACEPARENT, "x-request-id": "req-1", "Authorization": "no"},
        timeout=5.0,
    )


async def collect(http: HttpClient, target: ProviderTarget, call: ChatCall) -> list[Delta]:
    return [d async for d in ADAPTERS[target.type].stream(http, target, call)]


def test_registry_has_every_type() -> None:
    assert set(ADAPTERS) == {
        "openai",
        "openai_compatible",
        "anthropic",
        "gemini",
        "cohere",
        "ollama",
    }
    assert set(PROVIDER_TYPE_DEFAULTS) == set(ADAPTERS)
    for type_, adapter in ADAPTERS.items():
        assert adapter.type == type_


def test_builtin_providers() -> None:
    by_id = {p["id"]: p for p in BUILTIN_PROVIDERS}
    assert list(by_id) == [
        "openai",
        "anthropic",
        "gemini",
        "groq",
        "mistral",
        "deepseek",
        "together",
        "fireworks",
        "cohere",
        "ollama",
    ]
    assert by_id["openai"]["model_patterns"] == ["gpt-*", "o1-*", "o3-*"]
    assert by_id["together"]["model_patterns"] == ["meta-llama/*", "Qwen/*"]
    assert by_id["cohere"]["model_patterns"] == ["command-*", "c4ai-*"]
    assert by_id["anthropic"]["auth_type"] == "x-api-key"
    assert by_id["gemini"]["auth_type"] == "bearer"
    assert by_id["ollama"] | {} == by_id["ollama"]
    assert by_id["ollama"]["key_source"] == {"type": "none"}
    assert by_id["ollama"]["base_url"] == "http://127.0.0.1:11434"
    for provider in BUILTIN_PROVIDERS:
        assert provider["type"] in ADAPTERS
        assert provider["enabled"] is True and provider["status"] == "untested"
        assert provider["last_tested"] is None and provider["discovered_models"] == []
        if provider["id"] != "ollama":
            assert provider["key_source"] == {
                "type": "env_var",
                "var_name": f"{provider['id'].upper()}_API_KEY",
            }
    assert set(by_id) == {p["id"] for p in BUILTIN_PROVIDERS}


def test_join_url_does_not_double_the_version() -> None:
    assert join_url("https://api.openai.com", "/v1/models") == "https://api.openai.com/v1/models"
    assert join_url("http://h:8000/v1/", "/v1/models") == "http://h:8000/v1/models"
    assert join_url("https://api.groq.com/openai", "/v1/x") == "https://api.groq.com/openai/v1/x"


# --- the request each adapter sends ---------------------------------------------------------------


async def test_openai_request(http: HttpClient) -> None:
    async with serve_protocol("openai", api_key=KEY) as server:
        target = target_for("openai", server.url)
        await ADAPTERS["openai"].complete(
            http, target, call_for("openai", temperature=0.2, max_tokens=50, n=3, foo=1)
        )
        sent = server.last
        assert sent.path == "/v1/chat/completions"
        assert sent.headers["authorization"] == f"Bearer {KEY}"
        assert sent.headers["traceparent"] == TRACEPARENT
        assert sent.headers["x-request-id"] == "req-1"
        assert sent.body["messages"] == MESSAGES
        assert sent.body["temperature"] == 0.2 and sent.body["max_tokens"] == 50
        assert "n" not in sent.body and "foo" not in sent.body and "stream" not in sent.body
        await collect(http, target, call_for("openai"))
        assert server.last.body["stream"] is True
        assert server.last.body["stream_options"] == {"include_usage": True}


async def test_anthropic_request(http: HttpClient) -> None:
    async with serve_protocol("anthropic", api_key=KEY) as server:
        target = target_for("anthropic", server.url)
        await ADAPTERS["anthropic"].complete(
            http, target, call_for("anthropic", temperature=1.7, stop="END", top_p=0.9)
        )
        sent = server.last
        assert sent.path == "/v1/messages"
        assert sent.headers["x-api-key"] == KEY and "authorization" not in sent.headers
        assert sent.headers["anthropic-version"] == "2023-06-01"
        assert sent.headers["traceparent"] == TRACEPARENT
        assert sent.body["system"] == "You are terse."
        assert sent.body["messages"] == [
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Hi."},
            {"role": "user", "content": "How are you?"},
        ]
        assert sent.body["max_tokens"] == 1024  # required; the client gave none
        assert sent.body["temperature"] == 1.0  # Anthropic's range ends at 1
        assert sent.body["stop_sequences"] == ["END"] and sent.body["top_p"] == 0.9
        await ADAPTERS["anthropic"].complete(http, target, call_for("anthropic", max_tokens=7))
        assert server.last.body["max_tokens"] == 7


async def test_gemini_request(http: HttpClient) -> None:
    async with serve_protocol("gemini", api_key=KEY) as server:
        target = target_for("gemini", server.url)
        await ADAPTERS["gemini"].complete(
            http, target, call_for("gemini", temperature=0.5, max_tokens=64, stop=["x"])
        )
        sent = server.last
        assert sent.path == "/v1beta/models/gemini-2.0-flash:generateContent"
        assert sent.headers["authorization"] == f"Bearer {KEY}"  # the spec's default
        assert sent.headers["traceparent"] == TRACEPARENT
        assert sent.body["systemInstruction"] == {"parts": [{"text": "You are terse."}]}
        assert sent.body["contents"] == [
            {"role": "user", "parts": [{"text": "Hello"}]},
            {"role": "model", "parts": [{"text": "Hi."}]},
            {"role": "user", "parts": [{"text": "How are you?"}]},
        ]
        assert sent.body["generationConfig"] == {
            "temperature": 0.5,
            "maxOutputTokens": 64,
            "stopSequences": ["x"],
        }
        await collect(http, target, call_for("gemini"))
        assert server.last.path == "/v1beta/models/gemini-2.0-flash:streamGenerateContent"
        assert server.last.query == {"alt": "sse"}
        # An AI Studio API key: auth_type `api-key` goes in Google's x-goog-api-key header.
        keyed = ProviderTarget("gemini", "gemini", server.url, "api-key", KEY)
        await ADAPTERS["gemini"].complete(http, keyed, call_for("gemini"))
        assert server.last.headers["x-goog-api-key"] == KEY
        assert "authorization" not in server.last.headers


async def test_cohere_request(http: HttpClient) -> None:
    async with serve_protocol("cohere", api_key=KEY) as server:
        target = target_for("cohere", server.url)
        await ADAPTERS["cohere"].complete(http, target, call_for("cohere", top_p=0.8, stop="x"))
        sent = server.last
        assert sent.path == "/v2/chat"
        assert sent.headers["authorization"] == f"Bearer {KEY}"
        assert sent.headers["x-request-id"] == "req-1"
        assert sent.body["messages"] == [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Hi."},
            {"role": "user", "content": "How are you?"},
        ]
        assert sent.body["p"] == 0.8 and sent.body["stop_sequences"] == ["x"]
        assert sent.body["stream"] is False


async def test_ollama_request(http: HttpClient) -> None:
    async with serve_protocol("ollama") as server:
        target = target_for("ollama", server.url)
        done = await ADAPTERS["ollama"].complete(
            http, target, call_for("ollama", max_tokens=10, temperature=0.1)
        )
        assert done.content == "Hello! How are you today?"  # stream: false, explicitly
        sent = server.last
        assert sent.path == "/api/chat"
        assert "authorization" not in sent.headers  # auth none
        assert sent.headers["traceparent"] == TRACEPARENT
        assert sent.body["stream"] is False
        assert sent.body["options"] == {"num_predict": 10, "temperature": 0.1}
        assert sent.body["messages"][3] == {"role": "user", "content": "How are you?"}


# --- the published examples, streamed and not ------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_complete_reads_the_published_example(http: HttpClient, protocol: str) -> None:
    async with serve_protocol(protocol, api_key=KEY) as server:
        target = target_for(protocol, server.url)
        done = await ADAPTERS[protocol].complete(http, target, call_for(protocol))
    content, prompt, completion, finish, id_ = EXPECTED[protocol]["complete"]
    assert done.content == content
    assert done.usage == Usage(prompt, completion)
    assert done.usage.total_tokens == prompt + completion
    assert done.finish_reason == finish
    assert done.id == id_


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_stream_reads_the_published_example(http: HttpClient, protocol: str) -> None:
    async with serve_protocol(protocol, api_key=KEY) as server:
        target = target_for(protocol, server.url)
        deltas = await collect(http, target, call_for(protocol))
    text, prompt, completion, finish = EXPECTED[protocol]["stream"]
    assert "".join(d.content for d in deltas) == text
    assert len([d for d in deltas if d.content]) >= 2  # streamed in pieces
    assert [d.finish_reason for d in deltas if d.finish_reason] == [finish]
    usages = [d.usage for d in deltas if d.usage is not None]
    assert usages == [Usage(prompt, completion)]
    assert deltas[-1].usage is not None  # usage comes last


async def test_openai_compatible_is_openai_with_a_base_url(http: HttpClient) -> None:
    async with serve_protocol("openai_compatible", api_key=KEY) as server:
        target = ProviderTarget("groq", "openai_compatible", server.url + "/v1", "bearer", KEY)
        done = await ADAPTERS["openai_compatible"].complete(http, target, call_for("openai"))
        assert done.usage == Usage(9, 12)
        assert server.last.path == "/v1/chat/completions"
        models = await ADAPTERS["openai_compatible"].list_models(http, target, 5.0)
        assert models == EXPECTED["openai"]["models"]


async def test_openai_stream_without_usage_leaves_it_to_the_pipeline(
    http: HttpClient,
) -> None:
    """A server ignoring `stream_options` sends no usage chunk: no Delta carries usage."""
    async with serve_protocol("openai") as server:
        server.stream_usage = False
        deltas = await collect(http, target_for("openai", server.url), call_for("openai"))
    assert all(d.usage is None for d in deltas)
    assert "".join(d.content for d in deltas) == "Hello!"
    assert deltas[-1].finish_reason == "stop"


# --- models ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_list_models(http: HttpClient, protocol: str) -> None:
    async with serve_protocol(protocol, api_key=KEY) as server:
        target = target_for(protocol, server.url)
        models = await ADAPTERS[protocol].list_models(http, target, 5.0)
        expected = EXPECTED[protocol]["models"]
        if protocol == "anthropic":
            assert models == list(ANTHROPIC_MODELS)
            probe = server.last
            assert probe.method == "POST" and probe.path == "/v1/messages"
            assert probe.body["model"] == ANTHROPIC_PROBE_MODEL
            assert probe.body["max_tokens"] == 1
        else:
            assert models == expected
            assert server.requests[0].method == "GET"
            if protocol == "cohere":  # the spec's /v2/models first, then Cohere's /v1/models
                assert [r.path for r in server.requests] == ["/v2/models", "/v1/models"]
            else:
                assert server.requests[0].path == "/v1/models"


@pytest.mark.parametrize("protocol", [p for p in PROTOCOLS if p != "ollama"])
async def test_list_models_with_a_bad_key(http: HttpClient, protocol: str) -> None:
    async with serve_protocol(protocol, api_key=KEY) as server:
        target = target_for(protocol, server.url, key="sk-wrong-key-000000000")
        with pytest.raises(ProviderError) as caught:
            await ADAPTERS[protocol].list_models(http, target, 5.0)
    assert caught.value.status == 401 and not caught.value.retryable


# --- failures -------------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(
    ("status", "retryable"), [(401, False), (400, False), (429, True), (503, True), (500, True)]
)
async def test_http_errors(http: HttpClient, protocol: str, status: int, retryable: bool) -> None:
    async with serve_protocol(protocol, api_key=KEY) as server:
        target = target_for(protocol, server.url)
        server.script(status, status)
        with pytest.raises(ProviderError) as caught:
            await ADAPTERS[protocol].complete(http, target, call_for(protocol))
        assert (caught.value.status, caught.value.retryable) == (status, retryable)
        assert f"scripted failure {status}" in caught.value.message or status == 401
        with pytest.raises(ProviderError) as streamed:
            await collect(http, target, call_for(protocol))
        assert (streamed.value.status, streamed.value.retryable) == (status, retryable)


async def test_the_key_never_appears_in_an_error(
    http: HttpClient, caplog: pytest.LogCaptureFixture
) -> None:
    """OpenAI echoes (part of) a rejected key in its 401 message; the adapter scrubs it."""
    caplog.set_level(logging.DEBUG)
    async with serve_protocol("openai", api_key=KEY) as server:
        target = target_for("openai", server.url)
        server.script(401)
        with pytest.raises(ProviderError) as caught:
            await ADAPTERS["openai"].complete(http, target, call_for("openai"))
    error = caught.value
    assert error.status == 401 and not error.retryable
    assert "Incorrect API key provided" in error.message
    assert KEY not in str(error) and KEY[:8] not in str(error)
    assert KEY not in repr(target)
    assert KEY not in caplog.text


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_connection_refused_is_retryable(http: HttpClient, protocol: str) -> None:
    target = target_for(protocol, f"http://127.0.0.1:{free_port()}")
    with pytest.raises(ProviderError) as caught:
        await ADAPTERS[protocol].complete(http, target, call_for(protocol))
    assert caught.value.retryable and caught.value.status is None
    with pytest.raises(ProviderError) as streamed:
        await collect(http, target, call_for(protocol))
    assert streamed.value.retryable and streamed.value.status is None
    with pytest.raises(ProviderError) as listed:
        await ADAPTERS[protocol].list_models(http, target, 2.0)
    assert listed.value.retryable and listed.value.status is None


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_timeout_is_retryable(http: HttpClient, protocol: str) -> None:
    async with serve_protocol(protocol, api_key=KEY) as server:
        target = target_for(protocol, server.url)
        server.script("hang", "hang")
        call = ChatCall(model=MODELS[protocol], messages=MESSAGES, timeout=0.2)
        with pytest.raises(ProviderError) as caught:
            await ADAPTERS[protocol].complete(http, target, call)
        assert caught.value.retryable and caught.value.status is None
        assert "0.2s" in caught.value.message
        with pytest.raises(ProviderError) as streamed:
            await collect(http, target, call)
        assert streamed.value.retryable and streamed.value.status is None


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("failure", ["malformed", "truncated"])
async def test_bad_answers_are_not_retryable(http: HttpClient, protocol: str, failure: str) -> None:
    async with serve_protocol(protocol, api_key=KEY) as server:
        target = target_for(protocol, server.url)
        server.script(failure)
        with pytest.raises(ProviderError) as caught:
            await ADAPTERS[protocol].complete(http, target, call_for(protocol))
        assert not caught.value.retryable and caught.value.status is None


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("failure", ["malformed", "truncated", "cut"])
async def test_bad_streams_raise_from_the_iterator(
    http: HttpClient, protocol: str, failure: str
) -> None:
    async with serve_protocol(protocol, api_key=KEY) as server:
        target = target_for(protocol, server.url)
        server.script(failure)
        received: list[Delta] = []
        with pytest.raises(ProviderError) as caught:
            async for delta in ADAPTERS[protocol].stream(http, target, call_for(protocol)):
                received.append(delta)
    assert not caught.value.retryable and caught.value.status is None
    if failure != "malformed":  # the pieces before the cut did arrive
        assert any(d.content for d in received)
    assert all(d.usage is None for d in received)


async def test_missing_fields_are_malformed(http: HttpClient) -> None:
    """A 200 JSON answer without the documented fields is not retryable."""
    async with serve_protocol("openai", api_key=KEY) as server:
        target = target_for("openai", server.url)
        server.response = {"id": "x", "object": "chat.completion"}
        with pytest.raises(ProviderError) as caught:
            await ADAPTERS["openai"].complete(http, target, call_for("openai"))
    assert not caught.value.retryable and caught.value.status is None
    assert "no choices" in caught.value.message


async def test_anthropic_stream_error_event(http: HttpClient) -> None:
    """Anthropic may send an `error` event mid-stream (e.g. overloaded_error): raised."""
    async with serve_protocol("anthropic", api_key=KEY) as server:
        target = target_for("anthropic", server.url)
        server.stream_events = [
            *EXAMPLES["anthropic"]["stream"][:4],
            ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Busy"}}),
        ]
        with pytest.raises(ProviderError) as caught:
            await collect(http, target, call_for("anthropic"))
    assert caught.value.retryable and "overloaded_error" in caught.value.message


async def test_breaking_out_of_a_stream_releases_it(http: HttpClient) -> None:
    """A consumer that stops early (client gone) closes the stream; the session goes on."""
    async with serve_protocol("anthropic", api_key=KEY) as server:
        target = target_for("anthropic", server.url)
        stream = ADAPTERS["anthropic"].stream(http, target, call_for("anthropic"))
        async for delta in stream:
            assert delta.content == "Hello"
            break
        await stream.aclose()  # type: ignore[attr-defined]
        done = await ADAPTERS["anthropic"].complete(http, target, call_for("anthropic"))
        assert done.content == "Hi! My name is Claude."


async def test_openai_compatible_against_the_echo_sidecar(http: HttpClient) -> None:
    """The repository's own OpenAI-compatible provider (sidecars/echo_llm), whole and streamed."""
    async with running(build_echo_app()) as echo:
        target = ProviderTarget("echo", "openai_compatible", echo, "bearer", KEY)
        call = ChatCall(model="echo-1", messages=[{"role": "user", "content": "hello big world"}])
        done = await ADAPTERS["openai_compatible"].complete(http, target, call)
        assert done.content == "echo: hello big world"
        assert done.usage == Usage(3, 4) and done.finish_reason == "stop"
        deltas = await collect(http, target, call)
        assert "".join(d.content for d in deltas) == "echo: hello big world"
        assert deltas[-1].usage == Usage(3, 4)
        models = await ADAPTERS["openai_compatible"].list_models(http, target, 5.0)
        assert models == ["echo-1", "echo-2"]
        failing = ChatCall(model="fail-429", messages=call.messages)
        with pytest.raises(ProviderError) as caught:
            await ADAPTERS["openai_compatible"].complete(http, target, failing)
        assert caught.value.status == 429 and caught.value.retryable


async def test_anthropic_probe_refused_for_its_model_still_proves_the_key(
    http: HttpClient,
) -> None:
    async with serve_protocol("anthropic", api_key=KEY) as server:
        target = target_for("anthropic", server.url)
        server.script(404)  # not_found_error: the probe model, not the key
        assert await ADAPTERS["anthropic"].list_models(http, target, 5.0) == list(ANTHROPIC_MODELS)
        server.script(403)
        with pytest.raises(ProviderError) as caught:
            await ADAPTERS["anthropic"].list_models(http, target, 5.0)
        assert caught.value.status == 403 and not caught.value.retryable
