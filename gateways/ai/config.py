"""The AI gateway's configuration: its ports, the semantic cache's vector store, and the
request pipeline's resilience knobs (retries, circuit breakers, the fallback chain)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from runtime.config import EnvironmentConfig, grpc_port, http_port, var

PROVIDER_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


def _provider_id(value: str) -> None:
    if not PROVIDER_ID.fullmatch(value):
        raise ValueError(f"{value!r} is not a provider id ([A-Za-z0-9._-]{{1,64}})")


@dataclass(frozen=True, kw_only=True)
class AiGatewayConfig(EnvironmentConfig):
    service = "ai-gateway"
    http_port: int = http_port(4000)
    grpc_port: int = grpc_port(14000)

    milvus_uri: str = var(
        "MILVUS_URI", "data/milvus.db", "vector store of the semantic cache (a path: Milvus Lite)"
    )
    # The request pipeline (gateways/ai/pipeline.py).
    fallback_chain: tuple[str, ...] = var(
        "AI_FALLBACK_CHAIN",
        (),
        "comma-separated provider ids tried, in order, after the provider a model routes to "
        "(when its breaker is open or its retries are exhausted), e.g. `openai,anthropic`",
        check=_provider_id,
    )
    provider_timeout_secs: float = var(
        "AI_PROVIDER_TIMEOUT_SECS",
        60.0,
        "timeout of one provider attempt, seconds (streams: until the first byte, then between "
        "two reads)",
        bounds=(0.01, 3600),
    )
    retry_max: int = var(
        "AI_RETRY_MAX",
        2,
        "retries of a provider call on connection errors, timeouts, 429 and 5xx (never on 4xx)",
        bounds=(0, 10),
    )
    retry_initial_ms: float = var(
        "AI_RETRY_INITIAL_MS",
        100.0,
        "first retry delay, ms; doubles per retry, with jitter that only adds (each delay in "
        "[d, 1.2·d])",
        bounds=(0, 60_000),
    )
    breaker_failures: int = var(
        "AI_BREAKER_FAILURES",
        5,
        "consecutive failed attempts (within AI_BREAKER_WINDOW_SECS) that open a provider's "
        "circuit breaker",
        bounds=(1, 10_000),
    )
    breaker_window_secs: float = var(
        "AI_BREAKER_WINDOW_SECS",
        60.0,
        "window in which failures count towards opening the breaker, seconds",
        bounds=(0.1, 86_400),
    )
    breaker_open_secs: float = var(
        "AI_BREAKER_OPEN_SECS",
        30.0,
        "how long an open breaker refuses calls before one half-open probe, seconds",
        bounds=(0.05, 86_400),
    )
    breaker_refresh_ms: float = var(
        "AI_BREAKER_REFRESH_MS",
        250.0,
        "age after which a replica rereads a breaker's shared state, ms (its staleness bound)",
        bounds=(0, 10_000),
    )
    completion_estimate: int = var(
        "AI_COMPLETION_ESTIMATE_TOKENS",
        512,
        "completion tokens reserved from a budget when the request sets no `max_tokens`",
        bounds=(1, 1_000_000),
    )
    budget_hold_secs: float = var(
        "AI_BUDGET_HOLD_SECS",
        30.0,
        "how long a budget reservation outlives the process holding it, seconds: a live process "
        "renews its reservations every third of this; one it no longer renews (the process was "
        "killed) is given back by any replica's sweep once this has passed",
        bounds=(1, 86_400),
    )
    # The models (gateways/ai/model_loading.py).
    model_wait_secs: float = var(
        "AI_MODEL_WAIT_SECS",
        15.0,
        "the most a request waits for a model still loading at start (PII redaction's), "
        "seconds; then 503 `model_loading` (the service answers health meanwhile)",
        bounds=(0, 600),
    )
    model_cache_dir: str = var(
        "AI_MODEL_CACHE_DIR",
        "",
        "directory of the int8 embedding model, built at the first start and reused "
        "(`strata up`: `<data dir>/models`; the image: `/opt/strata/models`, built with it; "
        "empty: the user's cache, ~/.cache/strata/models)",
    )
    embedding_int8: bool = var(
        "AI_EMBEDDING_INT8",
        True,
        "run the semantic cache's embedding model in 8 bits (25 MB of weights; its vectors' "
        "cosine with the fp32 ones >= 0.999 on the cache's evaluation prompts, pair similarities "
        "within 0.012; ~35% less CPU per 14-token text, ~45% less per 60-token one, measured "
        "on a machine with AVX-512 VNNI) rather than as shipped in fp32 (91 MB, ~170 MB more "
        "resident)",
    )
    # The two-tier response cache (gateways/ai/cache/).
    cache_ttl_secs: int = var(
        "AI_CACHE_TTL_SECS",
        3600,
        "lifetime of a cached answer in both tiers (exact and semantic), seconds",
        bounds=(1, 30 * 86_400),
    )
    cache_lookup_timeout_ms: float = var(
        "AI_CACHE_LOOKUP_TIMEOUT_MS",
        250.0,
        "the most a cache lookup (exact, embedding, semantic search) may add to a request, ms; "
        "a slower one is a miss, so a slow vector store never holds chats up",
        bounds=(1, 60_000),
    )
    cache_similarity_threshold: float = var(
        "AI_CACHE_SIMILARITY_THRESHOLD",
        0.95,
        "cosine similarity (all-MiniLM-L6-v2) from which a request's last user message reuses a "
        "cached answer in the same tenant, model, conversation and parameters (SEMANTIC_HIT)",
        bounds=(0.5, 1.0),
    )
    cache_anchored_similarity_threshold: float = var(
        "AI_CACHE_ANCHORED_SIMILARITY_THRESHOLD",
        0.85,
        "the lower similarity from which a last user message that names particulars (numbers, "
        "identifiers, names), all equal to the cached prompt's, reuses its answer",
        bounds=(0.5, 1.0),
    )
