"""The analytics schema: versioned migrations that create the spec's tables in `gateway`.

Columns are the spec's; a few extra columns the analytics endpoints group by are marked.
Applied migrations are recorded in `gateway.schema_migrations`, so each runs once. A
migration may hold several statements, separated by `;`.
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
WRITABLE_TABLES = frozenset(
    ("request_log", "ai_request_log", "agent_audit_log", "sts_token_issuance")
)

# How many recent inserts per table ClickHouse remembers by their deduplication token: an
# insert repeating a remembered token is skipped. The analytics outbox's drainer
# (`runtime/stores/outbox_drain.py`) names each batch by its stream entries, so a batch
# inserted again after its drainer died before acknowledging it is not written twice; every
# other insert carries a token of its own (`Analytics.insert`). Without a token, a MergeTree
# with this window would also drop an insert whose rows equal a remembered one's.
DEDUP_WINDOW = 10_000

MIGRATIONS += (
    (
        5,
        "dedup_window",
        ";".join(
            f"ALTER TABLE {DATABASE}.{table} "
            f"MODIFY SETTING non_replicated_deduplication_window = {DEDUP_WINDOW}"
            for table in sorted(WRITABLE_TABLES)
        ),
    ),
)
