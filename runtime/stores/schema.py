"""The analytics schema: versioned migrations that create the spec's tables in `gateway`.

Columns are the spec's; a few extra columns the analytics endpoints group by are marked.
Applied migrations are recorded in `gateway.schema_migrations`, so each runs once.
"""

from __future__ import annotations

DATABASE = "gateway"

MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (
        1,
        "request_log",
        """
        CREATE TABLE IF NOT EXISTS gateway.request_log (
            timestamp DateTime64(3) DEFAULT now64(3),
            tenant_id String,
            route_id String,
            method LowCardinality(String),
            status_code UInt16,
            latency_ms Float64,
            trace_id String,
            path String,
            request_size UInt64,
            response_size UInt64,
            client_ip String,
            user_agent String,
            consumer_name String DEFAULT ''  -- extra: grouped by /api/analytics/consumers
        ) ENGINE = MergeTree
        PARTITION BY toYYYYMM(timestamp)
        ORDER BY (tenant_id, timestamp)
        TTL toDateTime(timestamp) + INTERVAL 90 DAY
    """,
    ),
    (
        2,
        "ai_request_log",
        """
        CREATE TABLE IF NOT EXISTS gateway.ai_request_log (
            timestamp DateTime64(3) DEFAULT now64(3),
            tenant_id String,
            model String,
            tokens_prompt UInt32,
            tokens_completion UInt32,
            cache_hit Bool,
            pii_detected Bool,
            latency_ms Float64,
            trace_id String,
            provider String DEFAULT ''  -- extra: grouped by /api/analytics/llm
        ) ENGINE = MergeTree
        PARTITION BY toYYYYMM(timestamp)
        ORDER BY (tenant_id, timestamp)
        TTL toDateTime(timestamp) + INTERVAL 365 DAY
    """,
    ),
    (
        3,
        "agent_audit_log",
        """
        CREATE TABLE IF NOT EXISTS gateway.agent_audit_log (
            timestamp DateTime64(3) DEFAULT now64(3),
            tenant_id String,
            session_id String,
            agent_id String,
            tool_name String,
            action LowCardinality(String),
            status LowCardinality(String),
            trace_id String,
            input_hash String DEFAULT '',   -- inputs and outputs are stored hashed
            output_hash String DEFAULT '',
            act_chain String DEFAULT ''     -- the hop token's chain, JSON, when present
        ) ENGINE = MergeTree
        PARTITION BY toYYYYMM(timestamp)
        ORDER BY (tenant_id, timestamp)
    """,
    ),
    (
        4,
        "sts_token_issuance",
        """
        CREATE TABLE IF NOT EXISTS gateway.sts_token_issuance (
            timestamp DateTime64(3) DEFAULT now64(3),
            tenant_id String,
            jti String,
            subject String,
            audience String,
            human String,
            chain_depth UInt8,
            act_chain String,
            purpose String,
            decision LowCardinality(String),
            deny_reason String,
            ttl_secs UInt32
        ) ENGINE = MergeTree
        PARTITION BY toYYYYMM(timestamp)
        ORDER BY (tenant_id, timestamp)
    """,
    ),
)

# Tables other services may write through the log-ingest RPC; nothing else is accepted.
WRITABLE_TABLES = frozenset(name for _, name, _ in MIGRATIONS)
