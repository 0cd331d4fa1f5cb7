"""The control plane, served in-process exactly as `__main__` builds it, against the real
embedded stores: health over HTTP and gRPC, reflection, auth, bad input, the declared-but-
unimplemented contract, the analytics write path and the platform health probes."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from multidict import CIMultiDictProxy
from shared_kit import MASTER_KEY, ConfigFor, free_port, reflected_services, user_token

from controlplane.app import build
from controlplane.config import ControlPlaneConfig
from gateways.ai.app import build as build_ai
from gateways.ai.config import AiGatewayConfig
from runtime.config import ServiceConfig
from runtime.logs import JsonFormatter
from runtime.stores import Stores
from runtime.stores.analytics import Analytics
from runtime.stores.shipping import ShippingSink
from runtime.testing import Serving, serving
from strata.controlplane.v1 import (
    analytics_pb2,
    analytics_pb2_grpc,
    log_ingest_pb2,
    log_ingest_pb2_grpc,
    tenant_pb2,
    tenant_pb2_grpc,
)

MASTER = (("authorization", f"Bearer {MASTER_KEY}"),)
BEARER = {"Authorization": f"Bearer {MASTER_KEY}"}


@pytest.fixture
def start(
    config_for: ConfigFor, stores_for: Callable[[ServiceConfig], Stores]
) -> Callable[..., object]:
    def make(**env: str) -> object:
        config = config_for(ControlPlaneConfig, **env)
        return serving(build(config, stores_for(config)))

    return make


@pytest.fixture
async def cp(start) -> AsyncIterator[Serving]:
    async with start() as svc:
        yield svc


async def get(
    svc: Serving,
    path: str,
    headers: dict[str, str] | None = None,
    method: str = "GET",
    data: str | bytes | None = None,
) -> tuple[int, Any, CIMultiDictProxy[str]]:
    async with (
        aiohttp.ClientSession(svc.http_url) as http,
        http.request(method, path, headers=headers or {}, data=data) as resp,
    ):
        text = await resp.text()
        body = json.loads(text) if resp.content_type == "application/json" else text
        return resp.status, body, resp.headers


async def test_health_over_http_and_grpc(cp: Serving) -> None:
    status, body, _ = await get(cp, "/health")
    assert status == 200
    assert body == {
        "status": "healthy",
        "service": "controlplane",
        "version": "0.1.0",
        "checks": {"redis": "connected"},
    }
    stub = health_pb2_grpc.HealthStub(cp.channel)
    for service in ("", "strata.controlplane.v1.TenantService"):
        reply = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_health_is_degraded_when_the_kv_store_is_unreachable(start) -> None:
    async with start(REDIS_URL=f"redis://127.0.0.1:{free_port()}/0") as svc:
        status, body, _ = await get(svc, "/health")
    assert status == 200
    assert body["status"] == "degraded"
    assert body["checks"] == {"redis": "unreachable"}


async def test_reflection_lists_the_declared_services(cp: Serving) -> None:
    names = await reflected_services(cp.channel)
    assert {
        "strata.controlplane.v1.TenantService",
        "strata.controlplane.v1.LogIngestService",
        "strata.controlplane.v1.PlatformHealthService",
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
    } <= names
    assert len([n for n in names if n.startswith("strata.controlplane.v1.")]) == 14
    # Behind SVC_AGENT_IDENTITY (off by default): not served at all.
    assert "strata.controlplane.v1.AgentRegistryService" not in names
    assert "strata.controlplane.v1.TokenExchangeService" not in names


async def test_agent_identity_flag_serves_registry_and_sts(start) -> None:
    async with start(SVC_AGENT_IDENTITY="on") as svc:
        names = await reflected_services(svc.channel)
        assert "strata.controlplane.v1.TokenExchangeService" in names
        status, body, _ = await get(svc, "/api/agents", BEARER)
        assert status == 200 and "agents" in body
        # The STS carries no bearer header.
        status, body, _ = await get(svc, "/sts/jwks")
        assert status == 200 and body["keys"]


async def test_flag_off_answers_404_for_registry_and_sts(cp: Serving) -> None:
    for path in ("/api/agents", "/sts/jwks"):
        status, body, _ = await get(cp, path, BEARER)
        assert status == 404
        assert body["error"] == "not_found"


async def test_agent_topology_answers_on_both_transports(cp: Serving) -> None:
    # Served whatever the agent identity flag (it reads the analytics store only).
    status, body, _ = await get(cp, "/api/agent-topology?tenant_id=nobody", BEARER)
    assert (status, body) == (200, {"edges": []})
    status, body, _ = await get(cp, "/api/agent-topology", BEARER)
    assert (status, body["error"]) == (400, "invalid_request")
    stub = analytics_pb2_grpc.AnalyticsServiceStub(cp.channel)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.GetAgentTopology(
            analytics_pb2.GetAgentTopologyRequest(), metadata=MASTER, timeout=5
        )
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    _, metrics, _ = await get(cp, "/metrics")
    assert (
        'strata_grpc_requests_total{code="INVALID_ARGUMENT",'
        'method="strata.controlplane.v1.AnalyticsService/GetAgentTopology",'
        'service="controlplane"} 1.0'
    ) in metrics


async def test_missing_and_bad_tokens_get_401_json_on_both_transports(cp: Serving) -> None:
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic eDp5"}):
        status, body, _ = await get(cp, "/api/tenants", headers)
        assert status == 401
        assert body["error"] == "unauthorized"
    stub = tenant_pb2_grpc.TenantServiceStub(cp.channel)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.ListTenants(tenant_pb2.ListTenantsRequest(), timeout=5)
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_identity_provider_tokens_are_accepted(cp: Serving, idp: str) -> None:
    token = await user_token(idp)
    status, body, _ = await get(cp, "/api/tenants", {"Authorization": f"Bearer {token}"})
    assert status == 200 and isinstance(body, list)  # authenticated: alice's tenant only


async def test_bad_input_is_a_clear_json_error(cp: Serving) -> None:
    as_json = {**BEARER, "Content-Type": "application/json"}
    status, body, _ = await get(cp, "/api/tenants", as_json, "POST", "{not json")
    assert status == 400
    assert body["error"] == "invalid_request" and "malformed JSON" in body["message"]
    status, body, _ = await get(cp, "/api/tenants", as_json, "POST", '{"name": "a", "colr": 1}')
    assert status == 400 and "colr" in body["message"]
    status, body, _ = await get(cp, "/api/tenants", BEARER, "POST", b"x" * (1024 * 1024 + 1))
    assert status == 413 and body["error"] == "payload_too_large"
    status, body, _ = await get(cp, "/no/such/path", BEARER)
    assert status == 404 and body == {
        "error": "not_found",
        "message": "no route for GET /no/such/path",
    }
    status, body, _ = await get(cp, "/health", method="DELETE")
    assert status == 405 and body["error"] == "method_not_allowed"


async def test_cors_allows_only_configured_origins(start) -> None:
    async with start(ALLOWED_ORIGINS="http://portal.test") as svc:
        pre = {"Origin": "http://portal.test", "Access-Control-Request-Method": "POST"}
        status, _, headers = await get(svc, "/api/tenants", pre, "OPTIONS")
        assert status == 204
        assert headers["Access-Control-Allow-Origin"] == "http://portal.test"
        _, _, headers = await get(svc, "/health", {"Origin": "http://evil.test"})
        assert "Access-Control-Allow-Origin" not in headers


async def count(analytics: Analytics, table: str, trace_id: str) -> int:
    rows = await analytics.query(
        f"SELECT count() AS n FROM gateway.{table} WHERE trace_id = {{t:String}}", {"t": trace_id}
    )
    return int(rows[0]["n"])


async def test_log_ingest_writes_rows_into_the_analytics_store(
    cp: Serving, analytics: Analytics
) -> None:
    stub = log_ingest_pb2_grpc.LogIngestServiceStub(cp.channel)
    row = {
        "tenant_id": "acme",
        "route_id": "r1",
        "method": "GET",
        "status_code": 200,
        "latency_ms": 1.5,
        "trace_id": "ingest-1",
        "path": "/api/x",
        "request_size": 10,
        "response_size": 20,
        "client_ip": "127.0.0.1",
        "user_agent": "curl",
    }
    reply = await stub.WriteLogBatch(
        log_ingest_pb2.WriteLogBatchRequest(table="request_log", rows=[json.dumps(row)] * 2),
        metadata=MASTER,
        timeout=10,
    )
    assert reply.written == 2
    assert await count(analytics, "request_log", "ingest-1") == 2


async def test_log_ingest_rejects_bad_batches_whole(
    cp: Serving, analytics: Analytics, idp: str
) -> None:
    stub = log_ingest_pb2_grpc.LogIngestServiceStub(cp.channel)
    good = json.dumps({"tenant_id": "acme", "trace_id": "ingest-bad"})
    for table, rows in (
        ("users", [good]),
        ("request_log", [good, "{oops"]),
        ("request_log", [good, "[1, 2]"]),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.WriteLogBatch(
                log_ingest_pb2.WriteLogBatchRequest(table=table, rows=rows),
                metadata=MASTER,
                timeout=10,
            )
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert await count(analytics, "request_log", "ingest-bad") == 0  # nothing half-written
    user = (("authorization", f"Bearer {await user_token(idp)}"),)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.WriteLogBatch(
            log_ingest_pb2.WriteLogBatchRequest(table="request_log", rows=[good]),
            metadata=user,
            timeout=10,
        )
    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED


async def test_other_services_ship_rows_through_the_control_plane(
    cp: Serving, analytics: Analytics
) -> None:
    sink = ShippingSink(cp.grpc_target, MASTER_KEY, deadline_secs=5)
    try:
        written = await sink.write(
            "ai_request_log",
            [
                {
                    "tenant_id": "acme",
                    "model": "gpt-4o",
                    "tokens_prompt": 12,
                    "tokens_completion": 30,
                    "cache_hit": False,
                    "pii_detected": True,
                    "latency_ms": 210.0,
                    "trace_id": "shipped-1",
                }
            ],
        )
    finally:
        await sink.close()
    assert written == 1
    rows = await analytics.query(
        "SELECT model, tokens_completion, pii_detected FROM gateway.ai_request_log "
        "WHERE trace_id = 'shipped-1'"
    )
    assert rows == [{"model": "gpt-4o", "tokens_completion": 30, "pii_detected": True}]


async def test_platform_health_probes_each_layer_over_grpc(config_for, stores_for) -> None:
    ai_config = config_for(AiGatewayConfig)
    async with serving(build_ai(ai_config, stores_for(ai_config))) as ai:
        config = config_for(
            ControlPlaneConfig,
            AI_GATEWAY_GRPC=ai.grpc_target,
            EDGE_GRPC=f"127.0.0.1:{free_port()}",
            AGENT_GATEWAY_GRPC=f"127.0.0.1:{free_port()}",
            GRPC_DEADLINE_SECS="1",
        )
        async with serving(build(config, stores_for(config))) as cp:
            status, body, _ = await get(cp, "/api/health/services", BEARER)
            assert status == 200
            by_layer = {s["layer"]: s for s in body}
            assert by_layer["L2"]["status"] == "healthy"
            assert by_layer["L2"]["service"] == "ai-gateway"
            assert by_layer["L1"]["status"] == "down"
            assert by_layer["L3"]["status"] == "down"
            assert all(isinstance(s["latency_ms"], int) for s in body)
            status, alerts, _ = await get(cp, "/api/health/alerts", BEARER)
            assert status == 200
            assert sorted(a["layer"] for a in alerts) == ["L1", "L3"]


async def test_no_authorization_header_or_secret_is_logged(cp: Serving, caplog) -> None:
    caplog.set_level(logging.INFO)
    secret = "Bearer super-secret-token-value"
    await get(cp, "/api/tenants", {"Authorization": secret, "X-Api-Key": "k-secret"})
    await get(cp, "/api/tenants", BEARER)
    lines = [JsonFormatter("controlplane").format(r) for r in caplog.records]
    assert any(json.loads(line).get("status") == 401 for line in lines)
    joined = "\n".join(lines)
    for leaked in ("super-secret-token-value", "k-secret", MASTER_KEY):
        assert leaked not in joined
