"""`/api/analytics/{traffic,llm,agents,consumers}` through the control plane's front door,
over rows written into the session's chDB: the hourly numbers, the ranges, the consumer
window, tenant isolation with real IdP tokens, injection attempts, and a 503 when the
analytics store is not there."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator, Callable

import grpc
import pytest
from analytics_kit import (
    HOUR,
    MASTER,
    bearer,
    call,
    hour_start,
    insert,
    iso_hour,
    tenant,
)
from shared_kit import MASTER_KEY, ConfigFor, free_port, user_token

from controlplane.analytics.servicer import provider_of
from controlplane.app import build
from controlplane.config import ControlPlaneConfig
from gateways.edge.plugin import PluginEnv, RequestContext
from gateways.edge.plugins import analytics_logger
from gateways.edge.plugins.analytics_logger import AnalyticsLogger
from runtime.config import ServiceConfig
from runtime.stores import Stores
from runtime.stores.analytics import Analytics, DirectSink
from runtime.stores.kv import connect_kv
from runtime.testing import Serving, serving
from strata.controlplane.v1 import analytics_pb2, analytics_pb2_grpc

DAY = 24 * HOUR


@pytest.fixture
async def cp(
    config_for: ConfigFor, stores_for: Callable[[ServiceConfig], Stores]
) -> AsyncIterator[Serving]:
    config = config_for(ControlPlaneConfig)
    async with serving(build(config, stores_for(config))) as svc:
        yield svc


def request_row(t: str, at: float, status: int = 200, latency: float = 10.0, **extra: object):
    return {
        "timestamp": at,
        "tenant_id": t,
        "route_id": "r1",
        "method": "GET",
        "status_code": status,
        "latency_ms": latency,
        "trace_id": f"tr-{at}",
        "path": "/x",
        "client_ip": "10.0.0.1",
        "user_agent": "test",
        **extra,
    }


# --- traffic ------------------------------------------------------------------------------


async def test_traffic_aggregates_each_hour(cp: Serving, analytics: Analytics) -> None:
    t = tenant()
    two_hours_ago = hour_start(time.time()) - 2 * HOUR
    three_days_ago = hour_start(time.time()) - 3 * DAY
    rows = [
        request_row(t, two_hours_ago + 60, 200, 10),
        request_row(t, two_hours_ago + 120, 200, 20),
        request_row(t, two_hours_ago + 180, 404, 30),
        request_row(t, two_hours_ago + 3599, 503, 40),
        request_row(t, two_hours_ago + HOUR + 5, 200, 7),  # the next hour
        request_row(t, three_days_ago + 10, 500, 100),  # inside 7d, outside 24h
        request_row(t, time.time() - 40 * DAY, 200, 1),  # outside 30d
    ]
    await insert(analytics, "request_log", rows)

    status, body, _ = await call(cp, "/api/analytics/traffic", {"tenant_id": t})
    assert status == 200
    assert body == {
        "data": [
            {
                "hour": iso_hour(two_hours_ago),
                "requests": 4,
                "errors": 2,
                "avg_latency_ms": 25.0,
                "p99_latency_ms": 39.7,  # quantile(0.99) interpolates between 30 and 40
            },
            {
                "hour": iso_hour(two_hours_ago + HOUR),
                "requests": 1,
                "errors": 0,
                "avg_latency_ms": 7.0,
                "p99_latency_ms": 7.0,
            },
        ]
    }
    _, week, _ = await call(cp, "/api/analytics/traffic", {"tenant_id": t, "range": "7d"})
    assert [p["hour"] for p in week["data"]] == [
        iso_hour(three_days_ago),
        iso_hour(two_hours_ago),
        iso_hour(two_hours_ago + HOUR),
    ]
    assert week["data"][0]["errors"] == 1
    _, month, _ = await call(cp, "/api/analytics/traffic", {"tenant_id": t, "range": "30d"})
    assert sum(p["requests"] for p in month["data"]) == 6  # not the 40-day-old row
    _, hour, _ = await call(cp, "/api/analytics/traffic", {"tenant_id": t, "range": "1h"})
    assert hour == {"data": []}

    # Without a tenant, the master key sees every tenant: this one's hour is in the sum.
    _, everyone, _ = await call(cp, "/api/analytics/traffic")
    point = next(p for p in everyone["data"] if p["hour"] == iso_hour(two_hours_ago))
    assert point["requests"] >= 4


async def test_last_hour_range(cp: Serving, analytics: Analytics) -> None:
    t = tenant()
    now = time.time()
    await insert(
        analytics,
        "request_log",
        [request_row(t, now - 60, 200, 5), request_row(t, now - 2 * HOUR, 200, 5)],
    )
    _, body, _ = await call(cp, "/api/analytics/traffic", {"tenant_id": t, "range": "1h"})
    assert [(p["hour"], p["requests"]) for p in body["data"]] == [(iso_hour(now - 60), 1)]


@pytest.mark.parametrize(
    "path", ["/api/analytics/traffic", "/api/analytics/llm", "/api/analytics/agents"]
)
@pytest.mark.parametrize("bad", ["90d", "2h", "", "24H", "24h' OR 1=1 --"])
async def test_a_range_outside_the_allowed_values_is_400(cp: Serving, path: str, bad: str) -> None:
    status, body, _ = await call(cp, path, {"range": bad})
    assert status == 400
    assert body["error"] == "invalid_request"
    assert body["field"] == "range"
    assert "range" in body["message"] and "1h, 24h, 7d, 30d" in body["message"]


async def test_an_empty_store_answers_empty_data(cp: Serving) -> None:
    for path in ("traffic", "llm", "agents", "consumers"):
        status, body, _ = await call(cp, f"/api/analytics/{path}", {"tenant_id": tenant()})
        assert (status, body) == (200, {"data": []})


# --- llm ----------------------------------------------------------------------------------


def ai_row(t: str, at: float, model: str, prompt: int, completion: int, **extra: object):
    return {
        "timestamp": at,
        "tenant_id": t,
        "model": model,
        "tokens_prompt": prompt,
        "tokens_completion": completion,
        "cache_hit": False,
        "pii_detected": False,
        "latency_ms": 100.0,
        "trace_id": f"ai-{at}",
        **extra,
    }


async def test_llm_usage_per_hour_model_and_provider(cp: Serving, analytics: Analytics) -> None:
    t = tenant()
    h = hour_start(time.time()) - 3 * HOUR
    await insert(
        analytics,
        "ai_request_log",
        [
            # gpt-4o: one row names its provider, one does not (derived: openai), one is
            # served by another provider.
            ai_row(t, h + 1, "gpt-4o", 10, 20, provider="openai", latency_ms=100.0),
            ai_row(t, h + 2, "gpt-4o", 5, 5, cache_hit=True, latency_ms=300.0),
            ai_row(t, h + 3, "gpt-4o", 1, 1, provider="azure-east", latency_ms=50.0),
            ai_row(t, h + 4, "claude-3-5-sonnet", 7, 3, provider="anthropic"),
            ai_row(t, h + 5, "llama3:8b", 2, 2),  # local: the catch-all
            ai_row(t, h + HOUR + 1, "gpt-4o", 1, 0, cache_hit=True, latency_ms=12.5),
        ],
    )
    status, body, _ = await call(cp, "/api/analytics/llm", {"tenant_id": t})
    assert status == 200
    hour, next_hour = iso_hour(h), iso_hour(h + HOUR)
    assert body["data"] == [
        {
            "hour": hour,
            "model": "claude-3-5-sonnet",
            "provider": "anthropic",
            "prompt_tokens": 7,
            "completion_tokens": 3,
            "total_tokens": 10,
            "avg_latency_ms": 100.0,
            "cache_hits": 0,
            "total_requests": 1,
        },
        {
            "hour": hour,
            "model": "gpt-4o",
            "provider": "azure-east",
            "prompt_tokens": 1,
            "completion_tokens": 1,
            "total_tokens": 2,
            "avg_latency_ms": 50.0,
            "cache_hits": 0,
            "total_requests": 1,
        },
        {
            "hour": hour,
            "model": "gpt-4o",
            "provider": "openai",
            "prompt_tokens": 15,
            "completion_tokens": 25,
            "total_tokens": 40,
            "avg_latency_ms": 200.0,
            "cache_hits": 1,
            "total_requests": 2,
        },
        {
            "hour": hour,
            "model": "llama3:8b",
            "provider": "ollama",
            "prompt_tokens": 2,
            "completion_tokens": 2,
            "total_tokens": 4,
            "avg_latency_ms": 100.0,
            "cache_hits": 0,
            "total_requests": 1,
        },
        {
            "hour": next_hour,
            "model": "gpt-4o",
            "provider": "openai",
            "prompt_tokens": 1,
            "completion_tokens": 0,
            "total_tokens": 1,
            "avg_latency_ms": 12.5,
            "cache_hits": 1,
            "total_requests": 1,
        },
    ]
    _, hour_only, _ = await call(cp, "/api/analytics/llm", {"tenant_id": t, "range": "1h"})
    assert hour_only == {"data": []}


def test_provider_routing_by_prefix() -> None:
    assert provider_of("gpt-4o-mini") == "openai"
    assert provider_of("o3-mini") == "openai"
    assert provider_of("claude-3-opus") == "anthropic"
    assert provider_of("meta-llama/Llama-3-70b") == "together"
    assert provider_of("accounts/fireworks/models/x") == "fireworks"
    assert provider_of("command-r") == "cohere"
    assert provider_of("mixtral-8x7b") == "groq"
    assert provider_of("llama3:8b") == "ollama"  # a `:` name is local
    assert provider_of("my-own-model") == "ollama"


# --- agents -------------------------------------------------------------------------------


def audit_row(t: str, at: float, action: str, tool: str, status: str, **extra: object):
    return {
        "timestamp": at,
        "tenant_id": t,
        "session_id": "s1",
        "agent_id": "agent:planner",
        "tool_name": tool,
        "action": action,
        "status": status,
        "trace_id": f"au-{at}",
        **extra,
    }


async def test_agent_activity_per_hour_action_and_tool(cp: Serving, analytics: Analytics) -> None:
    t = tenant()
    h = hour_start(time.time()) - 5 * HOUR
    await insert(
        analytics,
        "agent_audit_log",
        [
            audit_row(t, h + 1, "tool_call", "search", "success"),
            audit_row(t, h + 2, "tool_call", "search", "error"),
            audit_row(t, h + 3, "tool_call", "search", "DENIED"),
            audit_row(t, h + 4, "tool_call", "fetch", "success"),
            audit_row(t, h + 5, "session_terminate", "", "success"),
            audit_row(t, h + 2 * HOUR, "tool_call", "search", "blocked"),
            audit_row(t, time.time() - 10 * DAY, "tool_call", "search", "success"),
        ],
    )
    status, body, _ = await call(cp, "/api/analytics/agents", {"tenant_id": t})
    assert status == 200
    assert body["data"] == [
        {"hour": iso_hour(h), "action": "session_terminate", "tool_name": "", "total": 1,
         "errors": 0},
        {"hour": iso_hour(h), "action": "tool_call", "tool_name": "fetch", "total": 1,
         "errors": 0},
        {"hour": iso_hour(h), "action": "tool_call", "tool_name": "search", "total": 3,
         "errors": 2},
        {"hour": iso_hour(h + 2 * HOUR), "action": "tool_call", "tool_name": "search",
         "total": 1, "errors": 1},
    ]  # fmt: skip
    _, month, _ = await call(cp, "/api/analytics/agents", {"tenant_id": t, "range": "30d"})
    assert sum(p["total"] for p in month["data"]) == 7


# --- consumers ----------------------------------------------------------------------------


async def test_consumer_traffic_per_consumer_and_hour(cp: Serving, analytics: Analytics) -> None:
    t = tenant()
    h = hour_start(time.time()) - 4 * HOUR
    await insert(
        analytics,
        "request_log",
        [
            request_row(t, h + 1, 200, 10, consumer_name="mobile-app"),
            request_row(t, h + 2, 429, 30, consumer_name="mobile-app"),
            request_row(t, h + 3, 200, 5, consumer_name="batch-job"),
            request_row(t, h + 4, 200, 5),  # no consumer: not attributed
            request_row(t, h + HOUR, 500, 8, consumer_name="batch-job"),
        ],
    )
    status, body, _ = await call(cp, "/api/analytics/consumers", {"tenant_id": t})
    assert status == 200
    assert body["data"] == [
        {"consumer_name": "batch-job", "hour": iso_hour(h), "requests": 1, "errors": 0,
         "avg_latency_ms": 5.0, "p99_latency_ms": 5.0},
        {"consumer_name": "mobile-app", "hour": iso_hour(h), "requests": 2, "errors": 1,
         "avg_latency_ms": 20.0, "p99_latency_ms": 29.8},
        {"consumer_name": "batch-job", "hour": iso_hour(h + HOUR), "requests": 1, "errors": 1,
         "avg_latency_ms": 8.0, "p99_latency_ms": 8.0},
    ]  # fmt: skip
    _, one, _ = await call(
        cp, "/api/analytics/consumers", {"tenant_id": t, "consumer_name": "mobile-app"}
    )
    assert [(p["consumer_name"], p["requests"]) for p in one["data"]] == [("mobile-app", 2)]
    _, none, _ = await call(
        cp, "/api/analytics/consumers", {"tenant_id": t, "consumer_name": "x' OR 1=1 --"}
    )
    assert none == {"data": []}


async def test_consumer_days_and_the_90_day_range(cp: Serving, analytics: Analytics) -> None:
    t = tenant()
    today = hour_start(time.time()) // DAY * DAY
    ten_days_ago, nine_days_ago = today - 10 * DAY, today - 9 * DAY
    await insert(
        analytics,
        "request_log",
        [
            request_row(t, ten_days_ago + 1, consumer_name="c"),  # first ms of the day
            request_row(t, ten_days_ago + DAY - 0.001, consumer_name="c"),  # last ms
            request_row(t, nine_days_ago + 12 * HOUR, consumer_name="c"),
            request_row(t, today - 60 * DAY, consumer_name="c"),
        ],
    )

    def day(seconds: int) -> str:
        return time.strftime("%Y-%m-%d", time.gmtime(seconds))

    async def requests(**params: str) -> int:
        status, body, _ = await call(cp, "/api/analytics/consumers", {"tenant_id": t, **params})
        assert status == 200, body
        return sum(p["requests"] for p in body["data"])

    assert await requests(**{"from": day(ten_days_ago), "to": day(ten_days_ago)}) == 2
    assert await requests(**{"from": day(ten_days_ago), "to": day(nine_days_ago)}) == 3
    assert await requests(**{"from": day(nine_days_ago)}) == 1  # from that day to now
    # `to` alone: the `range` before the end of that day.
    assert await requests(to=day(nine_days_ago), range="7d") == 3
    assert await requests(to=day(nine_days_ago)) == 1  # 24h by default
    assert await requests(range="30d") == 3
    assert await requests(range="90d") == 4
    assert await requests() == 0


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"from": "2025-13-01"}, "from"),
        ({"from": "2025/01/01"}, "from"),
        ({"to": "2025-01-01T00:00:00Z"}, "to"),
        ({"to": "yesterday"}, "to"),
        ({"from": "2025-01-01' OR 1=1 --"}, "from"),
        ({"from": "2025-02-02", "to": "2025-02-01"}, "from"),
        ({"range": "1y"}, "range"),
        ({"consumer_name": "x" * 300}, "consumer_name"),
    ],
)
async def test_bad_consumer_parameters_are_400(
    cp: Serving, params: dict[str, str], field: str
) -> None:
    status, body, _ = await call(cp, "/api/analytics/consumers", params)
    assert status == 400
    assert body["error"] == "invalid_request"
    assert body["field"] == field and body["message"].startswith(field)


async def test_the_edge_logger_feeds_consumer_analytics(cp: Serving, analytics: Analytics) -> None:
    """A request the edge's analytics-logger writes (with the consumer that authenticated it)
    is counted for that consumer."""
    t = tenant()
    env = PluginEnv()
    env.sink = DirectSink(analytics)
    plugin = AnalyticsLogger({"batch_max_size": 1}, env)
    for status in (200, 401):
        ctx = RequestContext("GET", "/api/things", "", {"x-tenant-id": t}, "10.0.0.9", 0.0)
        ctx.route_id, ctx.status, ctx.consumer_name = "r1", status, "partner-key"
        plugin.log(ctx)
    await analytics_logger.close()  # writes what is buffered
    _, body, _ = await call(cp, "/api/analytics/consumers", {"tenant_id": t})
    assert [(p["consumer_name"], p["requests"], p["errors"]) for p in body["data"]] == [
        ("partner-key", 2, 1)
    ]


# --- who sees what ------------------------------------------------------------------------


async def test_tenant_tokens_see_their_own_tenant_only(
    cp: Serving, analytics: Analytics, idp: str
) -> None:
    h = hour_start(time.time()) - 6 * HOUR
    marker = tenant()  # a consumer and model name no other test uses
    for who in ("acme", "globex"):
        await insert(
            analytics,
            "request_log",
            [request_row(who, h + 1, consumer_name=f"{marker}-{who}")],
        )
        await insert(analytics, "ai_request_log", [ai_row(who, h + 1, f"{marker}-{who}", 1, 1)])
        await insert(
            analytics, "agent_audit_log", [audit_row(who, h + 1, "tool_call", f"{marker}-{who}",
                                                     "success")]
        )  # fmt: skip
    alice = bearer(await user_token(idp))  # acme
    admin = bearer(await user_token(idp, "admin", "admin"))  # platform-admin

    def names(body: dict, field: str) -> set[str]:
        return {p[field] for p in body["data"] if str(p[field]).startswith(marker)}

    for path, field in (("consumers", "consumer_name"), ("llm", "model"),
                        ("agents", "tool_name")):  # fmt: skip
        url = f"/api/analytics/{path}"
        # alice without a tenant_id: her own tenant, never globex.
        status, body, _ = await call(cp, url, headers=alice)
        assert status == 200
        assert names(body, field) == {f"{marker}-acme"}
        _, same, _ = await call(cp, url, {"tenant_id": "acme"}, headers=alice)
        # the marked rows: other tests' rows may land between the two calls
        assert names(same, field) == names(body, field)
        _, master_acme, _ = await call(cp, url, {"tenant_id": "acme"})
        assert master_acme == body  # the same answer as an administrator asking for acme
        # naming another tenant: refused, by parameter or header.
        status, refused, _ = await call(cp, url, {"tenant_id": "globex"}, headers=alice)
        assert status == 403 and refused["error"] == "forbidden"
        status, _, _ = await call(cp, url, headers={**alice, "x-tenant-id": "globex"})
        assert status == 403
        # administrators: every tenant, or the one they name.
        _, everyone, _ = await call(cp, url, headers=admin)
        assert names(everyone, field) == {f"{marker}-acme", f"{marker}-globex"}
        _, globex, _ = await call(cp, url, {"tenant_id": "globex"}, headers=admin)
        assert names(globex, field) == {f"{marker}-globex"}
        _, by_header, _ = await call(cp, url, headers={**MASTER, "x-tenant-id": "globex"})
        assert names(by_header, field) == {f"{marker}-globex"}

    _, traffic, _ = await call(cp, "/api/analytics/traffic", headers=alice)
    _, acme_traffic, _ = await call(cp, "/api/analytics/traffic", {"tenant_id": "acme"})
    assert traffic == acme_traffic


async def test_a_token_without_a_tenant_reads_nothing(cp: Serving, idp: str) -> None:
    tenantless = bearer(await user_token(idp, scope="openid"))
    for path in ("traffic", "llm", "agents", "consumers"):
        for params in ({}, {"tenant_id": "globex"}):
            status, body, _ = await call(cp, f"/api/analytics/{path}", params, tenantless)
            assert status == 403, (path, params)
            assert body["error"] == "forbidden"


async def test_sql_in_the_tenant_is_refused_and_changes_nothing(
    cp: Serving, analytics: Analytics
) -> None:
    t = tenant()
    await insert(analytics, "request_log", [request_row(t, time.time() - 30)])
    before = await analytics.query("SELECT count() AS n FROM gateway.request_log")
    for attack in ("x' OR 1=1 --", f"{t}' OR '1'='1", "x; DROP TABLE gateway.request_log"):
        status, body, _ = await call(cp, "/api/analytics/traffic", {"tenant_id": attack})
        assert status == 400 and "tenant" in body["message"]
    after = await analytics.query("SELECT count() AS n FROM gateway.request_log")
    assert after == before
    _, body, _ = await call(cp, "/api/analytics/traffic", {"tenant_id": t})
    assert sum(p["requests"] for p in body["data"]) == 1


async def test_unauthenticated_calls_are_401(cp: Serving) -> None:
    status, body, _ = await call(cp, "/api/analytics/traffic", headers={})
    assert status == 401 and body["error"] == "unauthorized"


async def test_the_same_answer_over_grpc(cp: Serving, analytics: Analytics) -> None:
    t = tenant()
    at = hour_start(time.time()) - HOUR
    await insert(analytics, "request_log", [request_row(t, at + 5, 500, 12)])
    stub = analytics_pb2_grpc.AnalyticsServiceStub(cp.channel)
    reply = await stub.GetTrafficAnalytics(
        analytics_pb2.GetTrafficAnalyticsRequest(tenant_id=t),
        metadata=(("authorization", f"Bearer {MASTER_KEY}"),),
        timeout=10,
    )
    assert list(reply.data) == [
        analytics_pb2.TrafficPoint(
            hour=iso_hour(at), requests=1, errors=1, avg_latency_ms=12, p99_latency_ms=12
        )
    ]
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.GetTrafficAnalytics(
            analytics_pb2.GetTrafficAnalyticsRequest(range="1y"),
            metadata=(("authorization", f"Bearer {MASTER_KEY}"),),
            timeout=10,
        )
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_agent_topology_is_served(cp: Serving) -> None:
    # (tests/controlplane/test_agent_topology.py has its edges)
    status, body, _ = await call(cp, "/api/agent-topology", {"tenant_id": "nobody-here"})
    assert (status, body) == (200, {"edges": []})


# --- the store away -----------------------------------------------------------------------


async def test_no_analytics_store_is_a_clear_503(
    config_for: ConfigFor, stores_for: Callable[[ServiceConfig], Stores]
) -> None:
    config = config_for(ControlPlaneConfig)
    stores = dataclasses.replace(stores_for(config), analytics=None)
    async with serving(build(config, stores)) as svc:
        for path in ("/api/analytics/traffic", "/api/audit", "/api/export/request_log"):
            status, body, _ = await call(svc, path)
            assert status == 503, path
            assert body["error"] == "analytics_unavailable"


async def test_an_unreachable_clickhouse_is_503_and_the_control_plane_still_starts(
    config_for: ConfigFor,
) -> None:
    config = config_for(ControlPlaneConfig)
    down = Analytics(f"http://127.0.0.1:{free_port()}")
    stores = Stores(kv=connect_kv(config.redis_url), sink=DirectSink(down), analytics=down)
    async with serving(build(config, stores)) as svc:  # the start's migration fails: no matter
        status, body, _ = await call(svc, "/api/analytics/llm")
        assert status == 503
        assert body == {
            "error": "analytics_unavailable",
            "message": "the analytics store is unreachable; try again later",
        }
        status, _, _ = await call(svc, "/api/audit", {"format": "csv"})
        assert status == 503
        status, health, _ = await call(svc, "/health")
        assert status == 200 and health["status"] == "healthy"
