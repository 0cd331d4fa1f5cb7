"""Server-streaming RPCs on both transports: server-sent events from the front door (one
`data:` event per message, then `data: [DONE]`), a gRPC stream through the interceptor, and
errors before the first message keeping their status code."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterable
from typing import Any

import aiohttp
import grpc
import pytest
from shared_kit import MASTER_KEY

from gateways.ai.http_rules import HTTP_RULES
from runtime.auth import Authenticator, JwksCache
from runtime.errors import ResourceExhausted
from runtime.service import ServiceDefinition, bind
from runtime.telemetry import Metrics
from runtime.testing import serving
from strata.ai.v1 import chat_pb2, chat_pb2_grpc


class Words(chat_pb2_grpc.ChatServiceServicer):
    """Streams the last message back one word per chunk; refuses the model `over-budget`;
    the model `many` streams MANY long words, all at once, and `endless` long words until it
    is closed (at most ENDLESS). `closed` is set once a stream's generator is closed, and
    `yielded` counts its events."""

    MANY = 3000
    ENDLESS = 200_000

    def __init__(self) -> None:
        self.closed = asyncio.Event()
        self.yielded = 0

    async def StreamChatCompletion(
        self, request: chat_pb2.StreamChatCompletionRequest, context: Any
    ) -> AsyncIterator[chat_pb2.StreamChatCompletionResponse]:
        if request.model == "over-budget":
            raise ResourceExhausted("tenant token budget exceeded", error="budget_exceeded")
        words: Iterable[str] = request.messages[-1].content.split()
        if request.model in ("many", "endless"):
            many = self.MANY if request.model == "many" else self.ENDLESS
            words = (f"{i:05d}{'x' * 500}" for i in range(many))
        try:
            for word in words:
                self.yielded += 1
                chunk = chat_pb2.ChatCompletionChunk(id="c1", model=request.model)
                chunk.choices.add().update({"index": 0, "delta": {"content": word}})
                yield chat_pb2.StreamChatCompletionResponse(chunk=chunk, cache="MISS")
        finally:
            self.closed.set()


@pytest.fixture
def servicer() -> Words:
    return Words()


@pytest.fixture
async def words(idp: str, servicer: Words):
    definition = ServiceDefinition(
        name="stream-test",
        bindings=[bind(chat_pb2_grpc, servicer)],
        http_rules=[r for r in HTTP_RULES if r.service == "strata.ai.v1.ChatService"],
        info={},
        health=_healthy,
        authenticator=Authenticator(JwksCache(f"{idp}/protocol/openid-connect/certs"), MASTER_KEY),
        metrics=Metrics("stream-test"),
    )
    async with serving(definition) as svc:
        yield svc


async def _healthy() -> dict[str, str]:
    return {"status": "healthy"}


def chat(model: str, text: str) -> dict[str, Any]:
    return {
        "model": model,
        "stream": True,
        "messages": [{"role": "user", "content": text}],
        "temperature": 0,
    }


def post_chat(http: aiohttp.ClientSession, model: str, text: str) -> Any:
    """The front door's streamed chat (`async with` it, or await it)."""
    auth = {"Authorization": f"Bearer {MASTER_KEY}"}
    return http.post("/v1/chat/completions", json=chat(model, text), headers=auth)


def data_of(body: str) -> list[str]:
    """The `data:` of each event of a server-sent event stream."""
    return [event.removeprefix("data: ") for event in body.split("\n\n") if event]


async def test_front_door_renders_server_sent_events(words) -> None:
    async with (
        aiohttp.ClientSession(words.http_url) as http,
        post_chat(http, "echo-1", "hello strata world") as resp,
    ):
        assert resp.status == 200
        assert resp.content_type == "text/event-stream"
        events = data_of((await resp.read()).decode())
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert [c["choices"][0]["delta"]["content"] for c in chunks] == ["hello", "strata", "world"]
    assert "cache" not in chunks[0]  # only the `chunk` field is the event payload


async def test_a_slow_client_gets_every_event_in_order(words) -> None:
    """Events produced faster than the client reads (far more than the front door queues)
    all arrive, in order, each whole."""
    received = bytearray()
    async with aiohttp.ClientSession(words.http_url) as http, post_chat(http, "many", "-") as resp:
        assert resp.status == 200
        async for piece in resp.content.iter_chunked(1 << 14):
            received += piece
            await asyncio.sleep(0.001)
    events = data_of(received.decode())
    assert events[-1] == "[DONE]"
    contents = [json.loads(e)["choices"][0]["delta"]["content"] for e in events[:-1]]
    assert [int(c[:5]) for c in contents] == list(range(Words.MANY))
    assert all(len(c) == 505 for c in contents)


async def test_a_client_gone_mid_stream_closes_the_servicers_stream(words, servicer) -> None:
    async with aiohttp.ClientSession(words.http_url) as http:
        resp = await post_chat(http, "endless", "-")
        assert (await resp.content.readline()).startswith(b"data: ")
        resp.close()  # mid-stream
    await asyncio.wait_for(servicer.closed.wait(), 10)
    assert servicer.yielded < Words.ENDLESS  # closed as the client went, not at its end


async def test_error_before_the_first_event_keeps_its_status(words) -> None:
    async with (
        aiohttp.ClientSession(words.http_url) as http,
        post_chat(http, "over-budget", "hi") as resp,
    ):
        assert resp.status == 429
        # The chat rules carry their own envelope (OpenAI's), whatever the service's is.
        assert await resp.json() == {
            "error": {
                "message": "tenant token budget exceeded",
                "type": "budget_exceeded",
                "param": None,
                "code": "budget_exceeded",
            }
        }


async def test_grpc_stream_and_its_errors(words) -> None:
    stub = chat_pb2_grpc.ChatServiceStub(words.channel)
    auth = (("authorization", f"Bearer {MASTER_KEY}"),)
    request = chat_pb2.StreamChatCompletionRequest(
        model="echo-1", messages=[chat_pb2.ChatMessage(role="user", content="a b")]
    )
    replies = [r async for r in stub.StreamChatCompletion(request, metadata=auth, timeout=5)]
    assert [r.chunk.choices[0]["delta"]["content"] for r in replies] == ["a", "b"]
    request.model = "over-budget"
    with pytest.raises(grpc.aio.AioRpcError) as info:
        [r async for r in stub.StreamChatCompletion(request, metadata=auth, timeout=5)]
    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert dict(info.value.trailing_metadata())["strata-error"] == "budget_exceeded"
    with pytest.raises(grpc.aio.AioRpcError) as info:
        [r async for r in stub.StreamChatCompletion(request, timeout=5)]
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
