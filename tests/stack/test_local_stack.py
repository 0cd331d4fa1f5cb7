"""The whole local stack, started by the launcher as subprocesses, exactly as `make run` does:
every service healthy over HTTP and gRPC, reflection listing each service's API, the stores
and sidecars answering, and a clean stop on Ctrl-C (SIGINT)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from support import OtlpCollector, launch_stack, reflected_services, stop_stack, user_token

pytestmark = [pytest.mark.stack, pytest.mark.timeout(240)]

# Beside a developer's own stack on the default ports, and below the kernel's ephemeral range
# (32768+), where an outgoing connection of another test could hold a fixed port.
OFFSET = 200
SERVICES = {  # name: (health URL, gRPC target, a service its reflection must list)
    "controlplane": (
        f"http://127.0.0.1:{4001 + OFFSET}/health",
        f"127.0.0.1:{14001 + OFFSET}",
        "strata.controlplane.v1.TenantService",
    ),
    "ai-gateway": (
        f"http://127.0.0.1:{4000 + OFFSET}/health",
        f"127.0.0.1:{14000 + OFFSET}",
        "strata.ai.v1.ChatService",
    ),
    "agent-gateway": (
        f"http://127.0.0.1:{5001 + OFFSET}/health",
        f"127.0.0.1:{15001 + OFFSET}",
        "strata.agent.v1.McpRegistryService",
    ),
    "edge-proxy": (
        f"http://127.0.0.1:{9180 + OFFSET}/health",
        f"127.0.0.1:{19080 + OFFSET}",
        "strata.edge.v1.EdgeConfigService",
    ),
}


@pytest.fixture(scope="module")
async def collector() -> AsyncIterator[OtlpCollector]:
    receiver = OtlpCollector()
    await receiver.server.start()
    yield receiver
    await receiver.server.stop(0)


@pytest.fixture(scope="module")
async def stack(
    tmp_path_factory: pytest.TempPathFactory, collector: OtlpCollector
) -> AsyncIterator[Path]:
    data = tmp_path_factory.mktemp("stack")
    env = {
        **os.environ,
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.port}",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
    }  # export spans every 200 ms, not every 5 s
    proc, output = await launch_stack(
        data, OFFSET, "--edge-workers", "2", "--timeout", "150", env=env
    )
    assert "Strata is up" in output, output + _logs(data)
    yield data
    assert await stop_stack(proc) == 0, _logs(data)
    for url, _, _ in SERVICES.values():  # everything stopped: nothing listens any more
        with pytest.raises(aiohttp.ClientConnectionError):
            async with aiohttp.ClientSession() as http, http.get(url):
                pass


def _logs(data: Path) -> str:
    return "\n".join(
        f"--- {p.name}\n{p.read_text()[-2000:]}" for p in sorted((data / "logs").glob("*.log"))
    )


@pytest.mark.parametrize("service", sorted(SERVICES))
async def test_service_is_healthy_over_http_and_grpc_with_reflection(
    stack: Path, service: str
) -> None:
    url, target, api = SERVICES[service]
    async with aiohttp.ClientSession() as http, http.get(url) as resp:
        assert resp.status == 200
        assert (await resp.json())["status"] == "healthy"
    async with grpc.aio.insecure_channel(target) as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=api), timeout=5
        )
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        assert api in await reflected_services(channel)


async def test_platform_view_and_tokens_across_the_stack(stack: Path) -> None:
    secrets = json.loads((stack / "secrets.json").read_text())
    issuer = f"http://127.0.0.1:{8080 + OFFSET}/realms/strata"
    token = await user_token(issuer)
    async with aiohttp.ClientSession() as http:
        async with http.get(
            f"http://127.0.0.1:{4001 + OFFSET}/api/health/services",
            headers={"Authorization": f"Bearer {secrets['MASTER_KEY']}"},
        ) as r:
            layers = {s["layer"]: s["status"] for s in await r.json()}
        assert layers == {"L1": "healthy", "L2": "healthy", "L3": "healthy"}
        async with http.get(
            f"http://127.0.0.1:{5001 + OFFSET}/v1/sessions",
            headers={"Authorization": f"Bearer {token}"},
        ) as r:
            assert r.status == 200  # the user token verified against the IdP's JWKS
            assert (await r.json())["total"] == 0
        for _ in range(4):  # both edge workers answer the data plane port
            async with http.get(f"http://127.0.0.1:{9080 + OFFSET}/") as r:
                assert (await r.json())["service"] == "edge-proxy"


async def test_one_trace_crosses_the_services_and_reaches_the_collector(
    stack: Path, collector: OtlpCollector
) -> None:
    """A W3C traceparent sent to the control plane continues through its gRPC health probes
    into the three gateways, and every process exports its spans over OTLP/gRPC."""
    secrets = json.loads((stack / "secrets.json").read_text())
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    headers = {
        "Authorization": f"Bearer {secrets['MASTER_KEY']}",
        "traceparent": f"00-{trace_id}-00f067aa0ba902b7-01",
    }
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{4001 + OFFSET}/api/health/services", headers=headers) as resp,
    ):
        assert resp.status == 200
    services: set[str] = set()
    for _ in range(50):
        services = {svc for svc, _, trace in collector.spans if trace == trace_id}
        if len(services) == 4:
            break
        await asyncio.sleep(0.2)
    assert services == {"controlplane", "edge-proxy", "ai-gateway", "agent-gateway"}
    names = {name for svc, name, trace in collector.spans if trace == trace_id}
    assert "/grpc.health.v1.Health/Check" in names
