"""PlatformHealthService: the health of each layer, probed over gRPC health checking."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import grpc
from google.protobuf import struct_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc

from strata.controlplane.v1 import platform_health_pb2 as pb
from strata.controlplane.v1 import platform_health_pb2_grpc


@dataclass(frozen=True)
class Probe:
    layer: str  # L1, L2, L3
    service: str
    grpc_target: str
    url: str  # the HTTP URL reported to operators


class PlatformHealthServicer(platform_health_pb2_grpc.PlatformHealthServiceServicer):
    def __init__(self, probes: list[Probe], deadline_secs: float) -> None:
        self.probes = probes
        self.deadline = deadline_secs
        self._channels: dict[str, grpc.aio.Channel] = {}

    def _channel(self, target: str) -> grpc.aio.Channel:
        if target not in self._channels:
            self._channels[target] = grpc.aio.insecure_channel(target)
        return self._channels[target]

    async def _probe(self, probe: Probe) -> pb.ServiceHealth:
        started = time.perf_counter()
        stub = health_pb2_grpc.HealthStub(self._channel(probe.grpc_target))
        try:
            reply = await stub.Check(health_pb2.HealthCheckRequest(), timeout=self.deadline)
            serving = reply.status == health_pb2.HealthCheckResponse.SERVING
            status = "healthy" if serving else "degraded"
        except grpc.aio.AioRpcError:
            status = "down"
        latency = int((time.perf_counter() - started) * 1000)
        return pb.ServiceHealth(
            layer=probe.layer,
            service=probe.service,
            status=status,
            latency_ms=latency,
            url=probe.url,
        )

    async def ListServiceHealth(
        self, request: pb.ListServiceHealthRequest, context: object
    ) -> pb.ListServiceHealthResponse:
        results = await asyncio.gather(*(self._probe(p) for p in self.probes))
        return pb.ListServiceHealthResponse(services=results)

    async def ListHealthAlerts(
        self, request: pb.ListHealthAlertsRequest, context: object
    ) -> pb.ListHealthAlertsResponse:
        """An alert per service that is not healthy, derived from a fresh probe."""
        alerts = []
        for result in await asyncio.gather(*(self._probe(p) for p in self.probes)):
            if result.status == "healthy":
                continue
            alert = struct_pb2.Struct()
            alert.update(
                {
                    "id": f"health-{result.service}",
                    "type": "health_degraded",
                    "severity": "critical" if result.status == "down" else "warning",
                    "layer": result.layer,
                    "service": result.service,
                    "status": result.status,
                    "message": f"{result.service} ({result.layer}) is {result.status}",
                    "url": result.url,
                }
            )
            alerts.append(alert)
        return pb.ListHealthAlertsResponse(alerts=alerts)

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
