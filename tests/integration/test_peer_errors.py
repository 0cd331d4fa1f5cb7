"""A StrataError raised by one service reaches a calling service intact over gRPC: same
class (even where two classes share a status code), identifier, message and extra fields."""

from __future__ import annotations

import json
from typing import Any

import grpc
import pytest
from shared_kit import MASTER_KEY, free_port

from runtime.auth import Authenticator, JwksCache
from runtime.errors import (
    DETAILS_KEY,
    ERROR_KEY,
    AlreadyExists,
    InvalidRequest,
    PayloadTooLarge,
    PermissionDenied,
    ResourceExhausted,
    StrataError,
    Unavailable,
    UpstreamError,
    from_rpc_error,
)
from runtime.peers import Peer
from runtime.service import ServiceDefinition, bind
from runtime.telemetry import Metrics
from runtime.testing import serving
from strata.ai.v1 import chat_pb2, chat_pb2_grpc


class ToolDenied(PermissionDenied):
    """A service's own error, one level below the tree's PermissionDenied."""


class HopDenied(ToolDenied):
    """Two levels below: the registry must find it at any depth."""


FAILURES: dict[str, StrataError] = {
    "depth-two": HopDenied(
        "the acting agent may not call the tool", error="tool_not_allowed", tool="rm"
    ),
    "upstream": UpstreamError("provider answered 500", error="provider_error", provider="openai"),
    "unavailable": Unavailable("all breakers open", error="all_providers_unavailable"),
    "too-large": PayloadTooLarge("prompt too large", error="payload_too_large"),
    "invalid": InvalidRequest("model not found", error="invalid_request_error"),
    "collision": AlreadyExists(
        "tool names collide", error="tool_naming_collision", collisions=["search", "fetch"]
    ),
}


class Failing(chat_pb2_grpc.ChatServiceServicer):
    async def CreateChatCompletion(self, request: Any, context: Any) -> Any:
        raise FAILURES[request.model]


@pytest.fixture
async def peer(idp: str):
    definition = ServiceDefinition(
        name="failing",
        bindings=[bind(chat_pb2_grpc, Failing())],
        http_rules=[],
        info={},
        health=_healthy,
        metrics=Metrics("failing"),
        authenticator=Authenticator(JwksCache(f"{idp}/protocol/openid-connect/certs"), MASTER_KEY),
    )
    async with serving(definition) as svc:
        client = Peer(svc.grpc_target, MASTER_KEY, deadline_secs=5)
        yield client
        await client.close()


async def _healthy() -> dict[str, str]:
    return {"status": "healthy"}


@pytest.mark.parametrize("model", sorted(FAILURES))
async def test_peer_error_is_rebuilt_exactly(peer: Peer, model: str) -> None:
    sent = FAILURES[model]
    stub = chat_pb2_grpc.ChatServiceStub(peer.channel)
    with pytest.raises(StrataError) as info:
        await peer.call(
            stub.CreateChatCompletion, chat_pb2.CreateChatCompletionRequest(model=model)
        )
    got = info.value
    assert type(got) is type(sent)
    assert (got.message, got.error, got.extra) == (sent.message, sent.error, sent.extra)
    assert got.body() == sent.body()
    assert got.http_status == sent.http_status and got.retryable == sent.retryable


async def test_unreachable_peer_is_unavailable_and_named() -> None:
    target = f"127.0.0.1:{free_port()}"
    client = Peer(target, MASTER_KEY, deadline_secs=1)
    stub = chat_pb2_grpc.ChatServiceStub(client.channel)
    try:
        with pytest.raises(Unavailable) as info:
            await client.call(stub.ListModels, chat_pb2.ListModelsRequest())
    finally:
        await client.close()
    assert info.value.message.startswith(f"{target}: ")
    assert info.value.retryable


def test_an_unknown_class_is_rebuilt_by_its_code() -> None:
    """A peer's class the caller does not have (another service's module) becomes the tree's
    class for the status code, identifier and fields intact."""
    metadata = grpc.aio.Metadata(
        (ERROR_KEY, "budget_exceeded"),
        (DETAILS_KEY, json.dumps({"kind": "SessionBudgetExceeded", "used": 9}).encode()),
    )
    exc = grpc.aio.AioRpcError(
        grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.aio.Metadata(), metadata, "over budget"
    )
    rebuilt = from_rpc_error(exc)
    assert type(rebuilt) is ResourceExhausted
    assert rebuilt.body() == {"error": "budget_exceeded", "message": "over budget", "used": 9}
