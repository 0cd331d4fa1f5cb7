"""`strata.ai.v1.ChatService`: the gRPC face of the request pipeline (`pipeline.py` holds the
logic; the front door's chat rules call these in-process)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from gateways.ai.pipeline import ChatPipeline
from strata.ai.v1 import chat_pb2, chat_pb2_grpc


class ChatServicer(chat_pb2_grpc.ChatServiceServicer):
    def __init__(self, pipeline: ChatPipeline) -> None:
        self.pipeline = pipeline

    async def CreateChatCompletion(
        self, request: chat_pb2.CreateChatCompletionRequest, context: Any
    ) -> chat_pb2.CreateChatCompletionResponse:
        return await self.pipeline.complete(request, context)

    async def StreamChatCompletion(
        self, request: chat_pb2.StreamChatCompletionRequest, context: Any
    ) -> AsyncIterator[chat_pb2.StreamChatCompletionResponse]:
        stream = self.pipeline.stream(request, context)
        try:
            async for message in stream:
                yield message
        finally:
            await stream.aclose()  # a disconnect closes the pipeline's stream (and upstream)

    async def ListModels(
        self, request: chat_pb2.ListModelsRequest, context: Any
    ) -> chat_pb2.ListModelsResponse:
        return await self.pipeline.models()
