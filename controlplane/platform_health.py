"""PlatformHealthService: the health of each layer, probed over gRPC health checking."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from google.protobuf import struct_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc

from runtime.errors import StrataError
from runtime.peers import Peer
from strata.controlplane.v1 import platform_health_pb2 as pb
from strata.controlplane.v1 import platform_health_pb2_grpc


@dataclass(frozen=True)
class Probe:
    layer: str  # L1, L2, L3
    service: str
    grpc_target: str
    url: str  # the HTTP URL reported to operators


class PlatformHealthServicer(platform_health_pb2_grpc.PlatformHealthServiceServicer):
    def __init__(self, probes: list[Probe], master_key: str, deadline_secs: float) -> None:
        self.probes = probes
        self._peers = {
            p.grpc_target: Peer(p.grpc_target, master_key, deadline_secs) for p in probes
        }

    async def _probe(self, probe: Probe) -> pb.ServiceHealth:
        started = time.perf_counter()
        peer = self._peers[probe.grpc_target]
        stub = health_pb2_grpc.HealthStub(peer.channel)
        try:
            reply = await peer.call(stub.Check, health_pb2.HealthCheckRequest())
            serving = reply.status == health_pb2.HealthCheckResponse.SERVING
            status = "healthy" if serving else "degraded"
        except StrataError:
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
        for peer in self._peers.values():
            await peer.close()
