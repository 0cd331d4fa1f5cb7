"""A bidirectional stream through the guard, with Envoy's Aggregated Discovery Service (from
xds-protos, what the edge's configuration push speaks): authentication, the access rule,
metrics and error translation hold for it as for unary calls; and `Peer.stream` keeps a
long-lived stream open across a restart of the serving peer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2
from shared_kit import MASTER_KEY, free_port, user_token

from runtime.auth import Authenticator, JwksCache
from runtime.context import respond
from runtime.errors import InvalidRequest, PermissionDenied, from_rpc_error
from runtime.peers import Peer
from runtime.serve import Running, start
from runtime.service import ServiceDefinition, bind
from runtime.telemetry import Metrics
from strata.access.v1.access_pb2 import Access

ADS = "envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"
CLUSTERS = "type.googleapis.com/envoy.config.cluster.v3.Cluster"


class Discovery(ads_pb2_grpc.AggregatedDiscoveryServiceServicer):
    """Answers each DiscoveryRequest with a response of the same type; `generation` tells
    servers apart across a restart."""

    def __init__(self, generation: str) -> None:
        self.generation = generation

    async def StreamAggregatedResources(
        self, requests: AsyncIterator[discovery_pb2.DiscoveryRequest], context: Any
    ) -> AsyncIterator[discovery_pb2.DiscoveryResponse]:
        async for request in requests:
            if request.type_url == "invalid":
                raise InvalidRequest("unknown resource type", error="invalid_request")
            if request.type_url == "denied":
                raise PermissionDenied("not your resources", error="forbidden")
            respond(context, headers={"x-generation": self.generation})
            yield discovery_pb2.DiscoveryResponse(
                type_url=request.type_url, version_info=self.generation, nonce=request.node.id
            )


def definition(idp: str, generation: str = "1") -> ServiceDefinition:
    async def healthy() -> dict[str, str]:
        return {"status": "healthy"}

    return ServiceDefinition(
        name="xds-test",
        # Envoy's protos declare no Strata rule: the binding names it.
        bindings=[bind(ads_pb2_grpc, Discovery(generation), access=Access.ACCESS_INTERNAL)],
        http_rules=[],
        info={},
        health=healthy,
        authenticator=Authenticator(JwksCache(f"{idp}/protocol/openid-connect/certs"), MASTER_KEY),
        metrics=Metrics("xds-test"),
    )


@pytest.fixture
async def ads(idp: str) -> AsyncIterator[Running]:
    running = await start(definition(idp), "127.0.0.1", 0, 0)
    yield running
    await running.stop(grace=0.5)


def ask(*type_urls: str) -> list[discovery_pb2.DiscoveryRequest]:
    return [discovery_pb2.DiscoveryRequest(type_url=t) for t in type_urls]


async def exchange(port: int | None, requests: list[Any], metadata: tuple = ()) -> Any:
    assert port is not None  # the service serves gRPC
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel).StreamAggregatedResources(
            iter(requests), metadata=metadata, timeout=5
        )
        replies = [r async for r in call]
        return replies, await call.trailing_metadata()


async def test_bidi_stream_needs_credentials_and_the_right_kind(ads: Running, idp: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await exchange(ads.grpc_port, ask(CLUSTERS))
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    person = (("authorization", f"Bearer {await user_token(idp)}"),)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await exchange(ads.grpc_port, ask(CLUSTERS), person)
    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED  # internal: services only


async def counted(ads: Running, line: str) -> None:
    """`line` shows in the metrics within 5 s: the server counts a stream once its handler has
    ended, which the client may hear of (the status) a moment before."""
    for _ in range(250):
        if line in ads.definition.metrics.exposition().decode():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{line!r} never counted")


async def test_bidi_stream_serves_and_counts(ads: Running) -> None:
    master = (("authorization", f"Bearer {MASTER_KEY}"),)
    replies, trailing = await exchange(ads.grpc_port, ask(CLUSTERS, CLUSTERS), master)
    assert [r.type_url for r in replies] == [CLUSTERS, CLUSTERS]
    assert ("x-generation", "1") in tuple(trailing)  # headers set through the context
    await counted(
        ads, f'strata_grpc_requests_total{{code="OK",method="{ADS}",service="xds-test"}} 1.0'
    )


async def test_bidi_stream_error_keeps_its_kind(ads: Running) -> None:
    master = (("authorization", f"Bearer {MASTER_KEY}"),)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await exchange(ads.grpc_port, ask(CLUSTERS, "invalid"), master)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    rebuilt = from_rpc_error(info.value)
    assert isinstance(rebuilt, InvalidRequest) and rebuilt.error == "invalid_request"
    await counted(ads, f'code="INVALID_ARGUMENT",method="{ADS}"')


async def test_a_method_without_a_rule_is_not_served(ads: Running) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{ads.grpc_port}") as channel:
        call: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(
            "/envoy.service.discovery.v3.Nope/Nope"
        )
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await call(b"", timeout=5)
    assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED


async def test_peer_stream_reconnects_across_a_restart(idp: str) -> None:
    port = free_port()
    first = await start(definition(idp, "1"), "127.0.0.1", 0, port)
    peer = Peer(f"127.0.0.1:{port}", MASTER_KEY, deadline_secs=5)

    async def subscription() -> AsyncIterator[discovery_pb2.DiscoveryRequest]:
        # Sent again on every connection; kept open, as an xDS client does.
        yield discovery_pb2.DiscoveryRequest(type_url=CLUSTERS)
        await asyncio.Event().wait()

    stream = peer.stream(
        ads_pb2_grpc.AggregatedDiscoveryServiceStub(peer.channel).StreamAggregatedResources,
        subscription,
        initial_backoff=0.05,
        max_backoff=0.2,
    )
    try:
        assert (await asyncio.wait_for(anext(stream), 5)).version_info == "1"
        await first.stop(grace=0.1)
        second = await start(definition(idp, "2"), "127.0.0.1", 0, port)
        try:
            assert (await asyncio.wait_for(anext(stream), 10)).version_info == "2"
        finally:
            await stream.aclose()
            await second.stop(grace=0.1)
    finally:
        await peer.close()


async def test_peer_stream_stops_on_a_refusal(ads: Running) -> None:
    peer = Peer(f"127.0.0.1:{ads.grpc_port}", MASTER_KEY, deadline_secs=5)

    def refused() -> Any:
        return iter(ask("denied"))

    stub = ads_pb2_grpc.AggregatedDiscoveryServiceStub(peer.channel)
    try:
        with pytest.raises(PermissionDenied, match="not your resources"):
            async for _ in peer.stream(stub.StreamAggregatedResources, refused):
                pass
    finally:
        await peer.close()
