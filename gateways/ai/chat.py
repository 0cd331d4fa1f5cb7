"""`strata.ai.v1.ChatService`: the request pipeline (`pipeline.py`, which holds the logic and
works on OpenAI's JSON objects) behind two faces: the RPCs, which translate protobuf, and the
`*_json` methods the front door calls in process with the JSON body as parsed (the rules'
`json_method`), so the hot path pays no protobuf round trip."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from google.protobuf import json_format

from gateways.ai.pipeline import ChatPipeline
from runtime.access import current_caller
from runtime.context import ServicerContext
from strata.ai.v1 import chat_pb2, chat_pb2_grpc


def _body_of(request: Any) -> dict[str, Any]:
    """The OpenAI body of an RPC request: the passthrough Struct when the caller sent it, or
    the typed fields alone."""
    if request.HasField("body") and request.body.fields:
        return json_format.MessageToDict(request.body)
    return {
        "model": request.model,
        "messages": [{"role": m.role, "content": m.content} for m in request.messages],
    }


class ChatServicer(chat_pb2_grpc.ChatServiceServicer):
    def __init__(self, pipeline: ChatPipeline) -> None:
        self.pipeline = pipeline

    # --- the front door's JSON face ---------------------------------------------------------

    async def complete_json(
        self, body: Mapping[str, Any], context: ServicerContext
    ) -> dict[str, Any]:
        return (await self.pipeline.complete(body, context)).completion

    def stream_json(
        self, body: Mapping[str, Any], context: ServicerContext
    ) -> AsyncIterator[dict[str, Any]]:
        return self.pipeline.stream(body, context)

    # --- the RPCs ---------------------------------------------------------------------------

    async def CreateChatCompletion(
        self, request: chat_pb2.CreateChatCompletionRequest, context: ServicerContext
    ) -> chat_pb2.CreateChatCompletionResponse:
        answer = await self.pipeline.complete(_body_of(request), context)
        return chat_pb2.CreateChatCompletionResponse(
            completion=json_format.ParseDict(answer.completion, chat_pb2.ChatCompletion()),
            cache=answer.cache,
            tenant_id=answer.tenant,
        )

    async def StreamChatCompletion(
        self, request: chat_pb2.StreamChatCompletionRequest, context: ServicerContext
    ) -> AsyncIterator[chat_pb2.StreamChatCompletionResponse]:
        stream = self.pipeline.stream(_body_of(request), context)
        first = True
        try:
            async for chunk in stream:
                message = chat_pb2.StreamChatCompletionResponse(
                    chunk=json_format.ParseDict(chunk, chat_pb2.ChatCompletionChunk())
                )
                if first:  # streaming bypasses the cache
                    message.cache, message.tenant_id = "MISS", current_caller().tenant_id or ""
                    first = False
                yield message
        finally:
            await stream.aclose()  # a disconnect closes the pipeline's stream (and upstream)

    async def ListModels(
        self, request: chat_pb2.ListModelsRequest, context: ServicerContext
    ) -> chat_pb2.ListModelsResponse:
        return await self.pipeline.models()
