"""gRPC health (what Kubernetes' readiness probe and the launcher ask) says SERVING only once
every port of the service listens, and NOT_SERVING from the first moment of a drain."""

from __future__ import annotations

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from shared_kit import MASTER_KEY, free_port

from runtime.auth import Authenticator, JwksCache
from runtime.http1.server import Exchange, Listening, serve
from runtime.serve import start
from runtime.service import ServiceDefinition
from runtime.telemetry import Metrics

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


async def health_of(port: int) -> int:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        reply = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
        return int(reply.status)


async def answer(exchange: Exchange) -> None:
    exchange.respond(204, b"")


async def test_serving_only_once_every_port_listens_and_not_serving_in_a_drain() -> None:
    grpc_port = free_port()
    seen_while_starting: list[int] = []

    async def late_listener(host: str) -> Listening:
        # Started after the gRPC server, before the front door: health must not say SERVING.
        seen_while_starting.append(await health_of(grpc_port))
        return await serve(answer, host, 0, 1024)

    async def healthy() -> dict[str, str]:
        return {"status": "healthy"}

    definition = ServiceDefinition(
        name="health-test",
        bindings=[],
        http_rules=[],
        info={},
        health=healthy,
        # Nothing here verifies a token: the key set is never fetched.
        authenticator=Authenticator(JwksCache("http://127.0.0.1:9/certs"), MASTER_KEY),
        metrics=Metrics("health-test"),
        listeners=[late_listener],
    )
    running = await start(definition, "127.0.0.1", 0, grpc_port)
    try:
        assert seen_while_starting == [NOT_SERVING]
        assert await health_of(grpc_port) == SERVING
        assert running.health is not None
        await running.health.enter_graceful_shutdown()  # the drain's first step
        assert await health_of(grpc_port) == NOT_SERVING
    finally:
        await running.stop(grace=0.5)
