"""A tenant's live figures, read from the stores at each request (never stored with it):

- `rate_limit_max`: the limit in `rl:config:{tenant}` (what the edge enforces, also when the
  rate-limit API changed it), else the stored value.
- `rate_limit_usage`: requests counted in the current window, summed over the tenant's routes:
  the members of the edge's sliding-window sets `rl:{tenant}:{route}:{window}` newer than
  `window` seconds by the store's clock (the clock the edge counts with).
- `token_budget_used`: `token_budget` minus what is left in the AI gateway's counter
  `{tenant}:budget:tokens`, at least 0 (0 when no budget is set).
- `request_count_24h`: rows of the analytics store's `gateway.request_log` for the tenant in
  the last 24 hours (a parameterized query); 0 when the analytics store is not available here
  or the query fails.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis

from controlplane.tenants.records import rate_limit_of, rl_config_key
from gateways.ai.tenants.keys import budget_key
from gateways.edge.keys import ALL_WINDOWS, parse_window, rate_limit_windows
from runtime.stores.analytics import Analytics

log = logging.getLogger(__name__)

REQUESTS_24H = """
SELECT tenant_id, count() AS requests
FROM gateway.request_log
WHERE tenant_id IN {tenants:Array(String)} AND timestamp >= now64(3) - INTERVAL 24 HOUR
GROUP BY tenant_id
"""


async def live_figures(
    kv: Redis, analytics: Analytics | None, records: Sequence[dict[str, Any]]
) -> list[dict[str, int]]:
    """For each record: `rate_limit_max`, `rate_limit_usage`, `token_budget_used`,
    `request_count_24h`."""
    if not records:
        return []
    ids = [str(r["id"]) for r in records]
    # One GET per key, not MGET: each tenant's keys are in its own slot of a clustered store
    # (the cluster client's pipeline sends each GET to its node).
    async with kv.pipeline(transaction=False) as pipe:
        for i in ids:
            pipe.get(rl_config_key(i))
        for i in ids:
            pipe.get(budget_key(i))
        values = await pipe.execute()
    # The store's clock, asked apart: a cluster pipeline refuses TIME (the figure is
    # informative, so any node's clock will do).
    seconds, micros = await kv.time()
    limits, budgets = values[: len(ids)], values[len(ids) :]
    now_us = int(seconds) * 1_000_000 + int(micros)
    usage = await _usage(kv, ids, now_us)
    requests = await _requests_24h(analytics, ids)
    figures = []
    for record, limit, left in zip(records, limits, budgets, strict=True):
        tenant = str(record["id"])
        configured = rate_limit_of(limit)
        budget = int(record.get("token_budget", 0))
        used = max(budget - int(left), 0) if left is not None and _int(left) else 0
        figures.append(
            {
                "rate_limit_max": configured
                if configured is not None
                else int(record.get("rate_limit_max", 0)),
                "rate_limit_usage": usage.get(tenant, 0),
                "token_budget_used": used,
                "request_count_24h": requests.get(tenant, 0),
            }
        )
    return figures


async def _usage(kv: Redis, ids: list[str], now_us: int) -> dict[str, int]:
    """Requests in the current window per tenant, from the edge's sorted sets."""
    wanted = set(ids)
    match = rate_limit_windows(ids[0]) if len(ids) == 1 else ALL_WINDOWS
    keys: list[tuple[str, str, int]] = []  # (tenant, key, window seconds)
    async for key in kv.scan_iter(match=match, count=1000, _type="zset"):
        parsed = parse_window(key)
        if parsed is None or parsed[0] not in wanted:
            continue
        keys.append((parsed[0], key, parsed[2]))
    usage: dict[str, int] = {}
    if not keys:
        return usage
    async with kv.pipeline(transaction=False) as pipe:
        for _, key, window in keys:
            pipe.zcount(key, now_us - window * 1_000_000, "+inf")
        counts = await pipe.execute()
    for (tenant, _, _), count in zip(keys, counts, strict=True):
        usage[tenant] = usage.get(tenant, 0) + int(count)
    return usage


async def _requests_24h(analytics: Analytics | None, ids: list[str]) -> dict[str, int]:
    if analytics is None:
        return {}
    try:
        rows = await analytics.query(REQUESTS_24H, {"tenants": ids})
    except Exception as exc:  # the figure is informative: the tenant still answers
        log.warning("request_count_24h unavailable", extra={"error": repr(exc)})
        return {}
    return {str(row["tenant_id"]): int(row["requests"]) for row in rows}


def _int(text: str) -> bool:
    return text.strip().lstrip("-").isdigit()
