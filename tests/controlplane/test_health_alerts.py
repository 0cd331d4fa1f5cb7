"""Health alerts: layers down or degraded (real gRPC health servers and closed ports), the
key-value and analytics stores unreachable, `since` shared through the store, and one
`health_degraded` notification per transition, also across replicas and from the
background probes."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from controlplane_kit import MASTER, Start, Tokens, call, start_fixture, tokens_fixture  # noqa: F401
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio
from shared_kit import MASTER_KEY, free_port

from controlplane.notifications import delete_tenant_notifications
from controlplane.platform_health import (
    STATUS_KEY,
    HealthTransition,
    PlatformHealthServicer,
    Probe,
)
from runtime.context import LocalContext
from runtime.protojson import to_json
from runtime.stores.analytics import Analytics
from runtime.stores.kv import connect_kv
from strata.controlplane.v1 import platform_health_pb2 as pb

ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class Layer:
    """A real gRPC server with the standard health service, whose status a test sets."""

    def __init__(self) -> None:
        self.health = health_aio.HealthServicer()
        self.server = grpc.aio.server()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def set(self, status: Any) -> None:
        await self.health.set("", status)


@pytest.fixture
async def layer() -> AsyncIterator[Layer]:
    found = Layer()
    await found.server.start()
    yield found
    await found.server.stop(0)


@pytest.fixture
async def clean_status(valkey_url: str) -> None:
    kv = connect_kv(valkey_url)
    await kv.delete(STATUS_KEY)
    await delete_tenant_notifications(kv, "platform")
    await kv.aclose()


def servicer(
    probes: list[Probe], valkey_url: str, analytics: Analytics | None, **kwargs: Any
) -> tuple[PlatformHealthServicer, list[HealthTransition]]:
    raised: list[HealthTransition] = []

    async def notify(transition: HealthTransition) -> None:
        raised.append(transition)

    health = PlatformHealthServicer(
        probes, MASTER_KEY, 1.0, kv=connect_kv(valkey_url), analytics=analytics,
        notify=notify, **kwargs,
    )  # fmt: skip
    return health, raised


def caller() -> LocalContext:
    """The context of a call made in-process (the servicer reads nothing of it)."""
    return LocalContext({}, "ipv4:127.0.0.1:0")


async def alerts(health: PlatformHealthServicer) -> list[dict[str, Any]]:
    answer = await health.ListHealthAlerts(pb.ListHealthAlertsRequest(), caller())
    return [to_json(a) for a in answer.alerts]


async def test_alerts_over_http_for_layers_that_are_down(
    start: Start, layer: Layer, clean_status: None, tokens: Tokens, caplog: Any
) -> None:
    caplog.set_level(logging.WARNING, logger="controlplane.platform_health")
    edge, agent = free_port(), free_port()
    env = {
        "AI_GATEWAY_GRPC": layer.target,
        "EDGE_GRPC": f"127.0.0.1:{edge}",
        "AGENT_GATEWAY_GRPC": f"127.0.0.1:{agent}",
        "GRPC_DEADLINE_SECS": "1",
    }
    async with start(**env) as cp:
        status, body = await call(cp, "GET", "/api/health/alerts", MASTER)
        assert status == 200
        assert [a["id"] for a in body] == ["layer:L1", "layer:L3"]
        since = [a["since"] for a in body]
        first = dict(body[0])
        assert ISO.fullmatch(first.pop("since"))
        assert first == {
            "id": "layer:L1",
            "severity": "critical",
            "layer": "L1",
            "service": "edge-proxy",
            "store": None,
            "status": "down",
            "message": "edge-proxy (L1) is down",
            "url": "http://127.0.0.1:9080",
        }
        # the same conditions: the same `since`, and no second notification
        _, again = await call(cp, "GET", "/api/health/alerts", tokens.admin)
        assert [a["since"] for a in again] == since
        assert (await call(cp, "GET", "/api/health/services", MASTER))[0] == 200
        for headers in (tokens.alice, tokens.agent):
            assert (await call(cp, "GET", "/api/health/alerts", headers))[0] == 403
        assert (await call(cp, "GET", "/api/health/alerts"))[0] == 401

        await layer.set(NOT_SERVING)  # the AI gateway reports itself not serving
        _, body = await call(cp, "GET", "/api/health/alerts", MASTER)
        assert [(a["id"], a["severity"], a["status"]) for a in body] == [
            ("layer:L1", "critical", "down"),
            ("layer:L2", "warning", "degraded"),
            ("layer:L3", "critical", "down"),
        ]
        await layer.set(SERVING)
        _, body = await call(cp, "GET", "/api/health/alerts", MASTER)
        assert [a["id"] for a in body] == ["layer:L1", "layer:L3"]
        # one health_degraded notification per transition, for the platform's operators
        _, listed = await call(cp, "GET", "/api/notifications?tenant_id=platform", MASTER)
        raised = [n for n in listed["notifications"] if n["notification_type"] == "health_degraded"]
        assert sorted(n["title"] for n in raised) == [
            "agent-gateway (L3) is down",
            "ai-gateway (L2) is degraded",
            "edge-proxy (L1) is down",
        ]


async def test_no_alerts_when_everything_answers(
    layer: Layer, valkey_url: str, analytics: Analytics, clean_status: None
) -> None:
    health, raised = servicer(
        [Probe("L2", "ai-gateway", layer.target, "http://ai")], valkey_url, analytics
    )
    try:
        assert await alerts(health) == []
        assert raised == []
    finally:
        await health.close()
        await health.kv.aclose()  # type: ignore[union-attr]


async def test_one_notification_per_transition_across_replicas(
    layer: Layer, valkey_url: str, analytics: Analytics, clean_status: None
) -> None:
    probes = [Probe("L2", "ai-gateway", layer.target, "http://ai")]
    one, raised_one = servicer(probes, valkey_url, analytics)
    two, raised_two = servicer(probes, valkey_url, analytics)
    try:
        await layer.set(NOT_SERVING)
        first = await alerts(one)
        second = await alerts(two)  # the other replica: same since, no second notification
        await one.ListServiceHealth(pb.ListServiceHealthRequest(), caller())
        await asyncio.gather(*one._tasks)  # its recording, done in the background
        assert first == second and first[0]["status"] == "degraded"
        raised = raised_one + raised_two
        assert [(t.layer, t.status, t.previous) for t in raised] == [("L2", "degraded", "")]
        assert raised[0].since == first[0]["since"]

        await layer.server.stop(0)  # now down: a new transition
        await alerts(two)
        await alerts(one)
        raised = raised_one + raised_two
        assert [(t.status, t.previous) for t in raised] == [("degraded", ""), ("down", "degraded")]
        assert raised[1].title == "ai-gateway (L2) is down"
    finally:
        for health in (one, two):
            await health.close()
            await health.kv.aclose()  # type: ignore[union-attr]


async def test_recovery_then_failure_notifies_again(
    layer: Layer, valkey_url: str, analytics: Analytics, clean_status: None
) -> None:
    health, raised = servicer(
        [Probe("L3", "agent-gateway", layer.target, "http://agent")], valkey_url, analytics
    )
    try:
        for status in (NOT_SERVING, SERVING, NOT_SERVING):
            await layer.set(status)
            await alerts(health)
        assert [t.status for t in raised] == ["degraded", "degraded"]
        kv = connect_kv(valkey_url)
        assert (await kv.hget(STATUS_KEY, "layer:L3") or "").startswith("degraded|")
        await kv.aclose()
    finally:
        await health.close()
        await health.kv.aclose()  # type: ignore[union-attr]


async def test_background_probes_notify_without_a_reader(
    layer: Layer, valkey_url: str, analytics: Analytics, clean_status: None
) -> None:
    health, raised = servicer(
        [Probe("L1", "edge-proxy", layer.target, "http://edge")],
        valkey_url,
        analytics,
        interval_secs=0.05,
    )
    await layer.set(NOT_SERVING)
    await health.start()
    try:
        for _ in range(200):
            if raised:
                break
            await asyncio.sleep(0.02)
        assert [(t.layer, t.status) for t in raised] == [("L1", "degraded")]
    finally:
        await health.close()
        await health.kv.aclose()  # type: ignore[union-attr]


async def test_analytics_store_unreachable(valkey_url: str, clean_status: None) -> None:
    unreachable = Analytics(f"http://127.0.0.1:{free_port()}")
    health, _ = servicer([], valkey_url, unreachable)
    try:
        found = await alerts(health)
        assert len(found) == 1
        assert ISO.fullmatch(found[0].pop("since"))
        assert found[0] == {
            "id": "store:analytics",
            "severity": "critical",
            "layer": None,
            "service": None,
            "store": "analytics",
            "status": "unreachable",
            "message": "the analytics store is unreachable",
            "url": None,
        }
        assert (await alerts(health))[0]["id"] == "store:analytics"
    finally:
        await health.close()
        await health.kv.aclose()  # type: ignore[union-attr]
        await unreachable.close()


async def test_key_value_store_unreachable(start: Start, layer: Layer) -> None:
    env = {
        "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0",
        "EDGE_GRPC": layer.target,
        "AI_GATEWAY_GRPC": layer.target,
        "AGENT_GATEWAY_GRPC": layer.target,
    }
    async with start(**env) as cp:
        status, body = await call(cp, "GET", "/api/health/alerts", MASTER)
        assert status == 200
        assert [(a["id"], a["store"], a["status"]) for a in body] == [
            ("store:kv", "kv", "unreachable")
        ]
        since = body[0]["since"]
        assert ISO.fullmatch(since)
        _, again = await call(cp, "GET", "/api/health/alerts", MASTER)
        assert again[0]["since"] == since  # this replica remembers when it began
        status, health = await call(cp, "GET", "/health")
        assert status == 200 and health["status"] == "degraded"
        # Every layer answers its health check, and keeps its state in the unreachable store.
        status, services = await call(cp, "GET", "/api/health/services", MASTER)
        assert status == 200
        assert [(s["layer"], s["status"]) for s in services] == [
            ("L1", "degraded"),
            ("L2", "degraded"),
            ("L3", "degraded"),
        ]
        assert all(set(s) == {"layer", "service", "status", "latency_ms", "url"} for s in services)


async def test_the_services_probe_also_notifies(
    layer: Layer, valkey_url: str, analytics: Analytics, clean_status: None
) -> None:
    health, raised = servicer(
        [Probe("L2", "ai-gateway", layer.target, "http://ai")], valkey_url, analytics
    )
    try:
        await layer.set(NOT_SERVING)
        answer = await health.ListServiceHealth(pb.ListServiceHealthRequest(), caller())
        assert [s.status for s in answer.services] == ["degraded"]
        await asyncio.gather(*health._tasks)  # recorded in the background
        assert [(t.layer, t.status) for t in raised] == [("L2", "degraded")]
        assert (await alerts(health))[0]["since"] == raised[0].since
        assert len(raised) == 1
    finally:
        await health.close()
        await health.kv.aclose()  # type: ignore[union-attr]
