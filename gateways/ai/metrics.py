"""The AI gateway's metrics, with the spec's names exactly (registered on the service's
registry, exposed at `/metrics`). Labels stay low-cardinality: the provider id and the outcome,
never the tenant or the client-chosen model name."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from runtime.telemetry import Metrics, cached_labels


class AiMetrics:
    def __init__(self, metrics: Metrics) -> None:
        registry = metrics.registry
        self.requests = Counter(
            "ai_gateway_requests_total",
            "Chat completion requests, by provider and outcome",
            ["provider", "outcome"],
            registry=registry,
        )
        self.cache_hits = Counter(
            "ai_gateway_cache_hits_total",
            "Chat completions answered from the cache",
            registry=registry,
        )
        self.cache_misses = Counter(
            "ai_gateway_cache_misses_total",
            "Chat completions not found in the cache",
            registry=registry,
        )
        self.cache_lookup_timeouts = Counter(
            "ai_gateway_cache_lookup_timeouts_total",
            "Cache lookups given up at AI_CACHE_LOOKUP_TIMEOUT_MS and served as misses",
            registry=registry,
        )
        self.pii_detected = Counter(
            "ai_gateway_pii_detected_total",
            "Requests in which PII was detected and redacted",
            registry=registry,
        )
        self.budget_exceeded = Counter(
            "ai_gateway_budget_exceeded_total",
            "Requests refused by a tenant's token budget",
            registry=registry,
        )
        self.tokens = Counter(
            "ai_gateway_tokens_total",
            "Tokens used through the gateway, by provider and kind (prompt, completion)",
            ["provider", "kind"],
            registry=registry,
        )
        # Circuit breakers (gateways/ai/breaker.py): their state is shared in the store, so
        # each replica counts what it saw: the breaker it tripped, the calls it skipped.
        self.breaker_opened = Counter(
            "ai_gateway_breaker_opened_total",
            "Circuit breakers this replica opened (a provider's failures reached the threshold)",
            ["provider"],
            registry=registry,
        )
        self.breaker_skipped = Counter(
            "ai_gateway_breaker_skipped_total",
            "Provider calls skipped because the provider's circuit breaker was open",
            ["provider"],
            registry=registry,
        )
        self.active = Gauge(
            "ai_gateway_active_requests", "Chat completions in progress", registry=registry
        )
        self.latency = Histogram(
            "ai_gateway_latency_seconds",
            "Chat completion latency (streams: until the last event), by provider",
            ["provider"],
            registry=registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
        )
        # The children of the per-request metrics, looked up once per label set.
        self.requests_of = cached_labels(self.requests)
        self.tokens_of = cached_labels(self.tokens)
        self.latency_of = cached_labels(self.latency)
