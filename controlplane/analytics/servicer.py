"""AnalyticsService: hourly aggregates over the analytics store's tables.

Every answer is a list of hourly points, oldest hour first; an hour is the UTC hour a row's
timestamp falls in, written as ISO 8601 (`2025-01-31T14:00:00Z`). The window is the last
`range` (1h, 24h by default, 7d, 30d; consumers also 90d) before now. Definitions:

- an error request (`traffic`, `consumers`) is one answered with a status of 400 or more;
- `p99_latency_ms` is ClickHouse's `quantile(0.99)` (bounded-memory reservoir sample);
- `llm.provider` is the row's `provider` column (written by the AI gateway); for rows without
  one it is derived from the model name with the built-in providers' prefix patterns, the
  local provider (`ollama`) catching the rest, as the AI gateway routes them;
- an agent audit row counts as an error (`agents.errors`) when its status is one of
  `ERROR_STATUSES`;
- `consumers` counts requests that authenticated as an edge consumer (requests without one
  have no consumer to attribute them to); `from`/`to` (`YYYY-MM-DD`, UTC days, both included)
  bound the window: it starts at `from` (else `range` before its end) and ends after `to`
  (else now).

`GetAgentTopology` (the agent identity's delegation edges) is in `topology.py`.
"""

from __future__ import annotations

from typing import Any

from controlplane.analytics.common import (
    CONSUMER_RANGES,
    HOUR_MS,
    Reader,
    Where,
    bad,
    check_order,
    iso_hour,
    now_ms,
    optional,
    parse_day,
    range_hours,
    tenant_scope,
)
from controlplane.analytics.topology import agent_topology
from runtime.context import ServicerContext
from runtime.stores.analytics import Analytics
from strata.controlplane.v1 import analytics_pb2, analytics_pb2_grpc

# Agent audit statuses that count as errors.
ERROR_STATUSES = ("error", "failed", "failure", "denied", "blocked", "rejected", "timeout")

# The built-in providers' model prefix patterns (spec: "Ten built-in providers"); a model
# matching none goes to the local provider.
PROVIDER_PATTERNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("openai", ("gpt-", "o1-", "o3-")),
    ("anthropic", ("claude-",)),
    ("gemini", ("gemini-",)),
    ("groq", ("llama-", "mixtral-", "gemma-")),
    ("mistral", ("mistral-", "codestral-", "pixtral-")),
    ("deepseek", ("deepseek-",)),
    ("together", ("meta-llama/", "Qwen/")),
    ("fireworks", ("accounts/fireworks/",)),
    ("cohere", ("command-", "c4ai-")),
)
LOCAL_PROVIDER = "ollama"
MAX_CONSUMER_NAME = 256

_HOUR = "intDiv(toUnixTimestamp(timestamp), 3600) AS hour"


def provider_of(model: str) -> str:
    """The provider a model name routes to by prefix (the local one for names with `:`)."""
    if ":" not in model:
        for provider, prefixes in PROVIDER_PATTERNS:
            if model.startswith(prefixes):
                return provider
    return LOCAL_PROVIDER


class AnalyticsServicer(analytics_pb2_grpc.AnalyticsServiceServicer):
    def __init__(self, analytics: Analytics | None) -> None:
        self.reader = Reader(analytics)

    def _recent(self, request: Any, context: ServicerContext) -> Where:
        """Tenant scope and the last `range` hours (the three plain endpoints)."""
        hours = range_hours(request)
        tenant = tenant_scope(request, context)
        return Where().tenant(tenant).window(now_ms() - hours * HOUR_MS)

    async def GetTrafficAnalytics(
        self, request: analytics_pb2.GetTrafficAnalyticsRequest, context: ServicerContext
    ) -> analytics_pb2.GetTrafficAnalyticsResponse:
        where = self._recent(request, context)
        rows = await self.reader.query(
            f"SELECT {_HOUR}, count() AS requests, countIf(status_code >= 400) AS errors, "
            "avg(latency_ms) AS avg_latency_ms, quantile(0.99)(latency_ms) AS p99_latency_ms "
            f"FROM gateway.request_log WHERE {where.sql} GROUP BY hour ORDER BY hour",
            where.params,
        )
        return analytics_pb2.GetTrafficAnalyticsResponse(
            data=[
                analytics_pb2.TrafficPoint(
                    hour=iso_hour(r["hour"]),
                    requests=r["requests"],
                    errors=r["errors"],
                    avg_latency_ms=_ms(r["avg_latency_ms"]),
                    p99_latency_ms=_ms(r["p99_latency_ms"]),
                )
                for r in rows
            ]
        )

    async def GetLlmAnalytics(
        self, request: analytics_pb2.GetLlmAnalyticsRequest, context: ServicerContext
    ) -> analytics_pb2.GetLlmAnalyticsResponse:
        where = self._recent(request, context)
        rows = await self.reader.query(
            f"SELECT {_HOUR}, model, provider, sum(tokens_prompt) AS prompt, "
            "sum(tokens_completion) AS completion, sum(latency_ms) AS latency, "
            "countIf(cache_hit) AS cache_hits, count() AS requests "
            f"FROM gateway.ai_request_log WHERE {where.sql} "
            "GROUP BY hour, model, provider ORDER BY hour, model, provider",
            where.params,
        )
        # Rows without a provider join the group of the provider their model routes to.
        groups: dict[tuple[int, str, str], dict[str, Any]] = {}
        for r in rows:
            key = (r["hour"], r["model"], r["provider"] or provider_of(r["model"]))
            group = groups.setdefault(
                key, {"prompt": 0, "completion": 0, "latency": 0.0, "cache_hits": 0, "requests": 0}
            )
            for name in group:
                group[name] += r[name]
        return analytics_pb2.GetLlmAnalyticsResponse(
            data=[
                analytics_pb2.LlmUsagePoint(
                    hour=iso_hour(hour),
                    model=model,
                    provider=provider,
                    prompt_tokens=g["prompt"],
                    completion_tokens=g["completion"],
                    total_tokens=g["prompt"] + g["completion"],
                    avg_latency_ms=_ms(g["latency"] / g["requests"]),
                    cache_hits=g["cache_hits"],
                    total_requests=g["requests"],
                )
                for (hour, model, provider), g in sorted(groups.items())
            ]
        )

    async def GetAgentAnalytics(
        self, request: analytics_pb2.GetAgentAnalyticsRequest, context: ServicerContext
    ) -> analytics_pb2.GetAgentAnalyticsResponse:
        where = self._recent(request, context)
        rows = await self.reader.query(
            f"SELECT {_HOUR}, action, tool_name, count() AS total, "
            "countIf(has({error_statuses:Array(String)}, lower(status))) AS errors "
            f"FROM gateway.agent_audit_log WHERE {where.sql} "
            "GROUP BY hour, action, tool_name ORDER BY hour, action, tool_name",
            {**where.params, "error_statuses": list(ERROR_STATUSES)},
        )
        return analytics_pb2.GetAgentAnalyticsResponse(
            data=[
                analytics_pb2.AgentActivityPoint(
                    hour=iso_hour(r["hour"]),
                    action=r["action"],
                    tool_name=r["tool_name"],
                    total=r["total"],
                    errors=r["errors"],
                )
                for r in rows
            ]
        )

    async def GetConsumerAnalytics(
        self, request: analytics_pb2.GetConsumerAnalyticsRequest, context: ServicerContext
    ) -> analytics_pb2.GetConsumerAnalyticsResponse:
        hours = range_hours(request, CONSUMER_RANGES)
        first, last = optional(request, "from"), optional(request, "to")
        until = parse_day("to", last, end=True) if last else None
        since = parse_day("from", first, end=False) if first else None
        check_order(since, until)
        if since is None:
            since = (until or now_ms()) - hours * HOUR_MS
        consumer = optional(request, "consumer_name")
        if consumer is not None and len(consumer) > MAX_CONSUMER_NAME:
            raise bad("consumer_name", f"must be at most {MAX_CONSUMER_NAME} characters")
        where = Where().tenant(tenant_scope(request, context)).window(since, until)
        if consumer is None:
            where.add("consumer_name != ''")
        else:
            where.add("consumer_name = {consumer:String}", consumer=consumer)
        rows = await self.reader.query(
            f"SELECT consumer_name, {_HOUR}, count() AS requests, "
            "countIf(status_code >= 400) AS errors, avg(latency_ms) AS avg_latency_ms, "
            "quantile(0.99)(latency_ms) AS p99_latency_ms "
            f"FROM gateway.request_log WHERE {where.sql} "
            "GROUP BY consumer_name, hour ORDER BY hour, consumer_name",
            where.params,
        )
        return analytics_pb2.GetConsumerAnalyticsResponse(
            data=[
                analytics_pb2.ConsumerTrafficPoint(
                    consumer_name=r["consumer_name"],
                    hour=iso_hour(r["hour"]),
                    requests=r["requests"],
                    errors=r["errors"],
                    avg_latency_ms=_ms(r["avg_latency_ms"]),
                    p99_latency_ms=_ms(r["p99_latency_ms"]),
                )
                for r in rows
            ]
        )

    async def GetAgentTopology(
        self, request: analytics_pb2.GetAgentTopologyRequest, context: ServicerContext
    ) -> analytics_pb2.GetAgentTopologyResponse:
        return await agent_topology(self.reader, request)


def _ms(value: float) -> float:
    """Milliseconds to the microsecond (no float noise in the answer)."""
    return round(float(value), 3)
