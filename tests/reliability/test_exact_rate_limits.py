"""Rate limits are exact under 100-way concurrency, on one edge worker and on two. Figure: 0
over-admissions (and 0 under-admissions: a limit admits exactly its count).

- `tenant-rate-limit` on the reference route `/smoke/*`, its limit an override the control
  plane writes in `rl:config:{tenant}` (`PUT /api/rate-limits/{tenant}`), one fresh tenant per
  run;
- `limit-count` (`policy: redis`, keyed by a header) on a route made through the Admin API, one
  fresh key per run.

The two-worker edge is the stack's; the one-worker edge is a second edge process on the same
stores and configuration (the control plane's xDS), as a replica would run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable

import pytest
from shared_kit import free_port

from reliability.kit import (
    OFFSET,
    Http,
    Reply,
    Stack,
    all_statuses,
    create_tenant,
    eventually,
    on_every_worker,
    sidecar,
    unique,
)

pytestmark = [pytest.mark.stack, pytest.mark.timeout(300)]

CONCURRENCY = 100
RUNS = 3  # per limiter and edge
LIMITS = (17, 50, 83)  # one per run


@pytest.fixture(scope="module")
async def edges(stack: Stack) -> AsyncIterator[dict[int, str]]:
    """Data-plane URL by number of workers."""
    ports = {var: free_port() for var in ("HTTP_PORT", "ADMIN_PORT", "METRICS_PORT", "GRPC_PORT")}
    env = stack.env_of(**{var: str(port) for var, port in ports.items()}, EDGE_WORKERS="1")
    url = f"http://127.0.0.1:{ports['HTTP_PORT']}"
    async with sidecar(stack, "gateways.edge", port=ports["ADMIN_PORT"], env=env), Http() as http:
        # serving once the control plane's configuration reached it
        seen = await eventually(
            lambda: http.call("GET", f"{url}/smoke/ready", headers={"X-Tenant-ID": "acme"}),
            lambda reply: reply.status == 200,
        )
        assert seen.status == 200, seen.text
        yield {1: url, 2: stack.edge}


@pytest.fixture(scope="module")
async def counted_route(stack: Stack) -> AsyncIterator[str]:
    """A route under `limit-count` (redis policy, keyed by the `X-Client` header); its path."""
    route = unique("rel-count")
    admin = f"{stack.edge_admin}/apisix/admin/routes/{route}"
    key = {"X-API-KEY": stack.secrets["ADMIN_API_KEY"]}
    body = {
        "uri": f"/{route}/*",
        "upstream_id": "mock-backend",
        "plugins": {"limit-count": {
            "count": 1000, "time_window": 60, "key_type": "var", "key": "http_x_limit",
            "policy": "redis", "redis_host": "127.0.0.1", "redis_port": 6379 + OFFSET,
            "rejected_code": 429,
        }},
    }  # fmt: skip
    async with Http() as http:
        made = await http.call("PUT", admin, json_body=body, headers=key)
        assert made.status in (200, 201), made.text
        yield f"/{route}"
        await http.call("DELETE", admin, headers=key)


@pytest.mark.parametrize("workers", [1, 2])
async def test_tenant_rate_limit_admits_exactly_its_limit(
    stack: Stack, http: Http, edges: dict[int, str], workers: int
) -> None:
    for limit in LIMITS[:RUNS]:
        tenant = await create_tenant(http, stack, "rl")
        put = await http.call(
            "PUT", f"{stack.cp}/api/rate-limits/{tenant}", token=stack.master,
            json_body={"limit": limit, "window": "60s"},
        )  # fmt: skip
        assert put.status == 200, put.text
        url = f"{edges[workers]}/smoke/limit"
        statuses = await all_statuses(
            [http.call("GET", url, headers={"X-Tenant-ID": tenant}) for _ in range(CONCURRENCY)]
        )
        assert (statuses.count(200), statuses.count(429)) == (limit, CONCURRENCY - limit), (
            f"limit {limit} on {workers} worker(s): {sorted(set(statuses))}"
        )


@pytest.mark.parametrize("workers", [1, 2])
async def test_limit_count_admits_exactly_its_count(
    stack: Stack, http: Http, edges: dict[int, str], counted_route: str, workers: int
) -> None:
    admin = f"{stack.edge_admin}/apisix/admin/routes/{counted_route.lstrip('/')}"
    key = {"X-API-KEY": stack.secrets["ADMIN_API_KEY"]}
    for count in LIMITS[:RUNS]:
        patched = await http.call(
            "PATCH", admin, headers=key,
            json_body={"plugins": {"limit-count": {
                "count": count, "time_window": 60, "key_type": "var", "key": "http_x_limit",
                "policy": "redis", "redis_host": "127.0.0.1", "redis_port": 6379 + OFFSET,
                "rejected_code": 429}}},
        )  # fmt: skip
        assert patched.status == 200, patched.text
        client = unique("client")
        url = f"{edges[workers]}{counted_route}/x"
        # the new count reached every worker: a probe key is counted under it

        def probe(fresh: Http, url: str = url) -> Awaitable[Reply]:
            return fresh.call("GET", url, headers={"X-Limit": unique("probe")})

        def counted_under(reply: Reply, count: int = count) -> bool:
            return reply.headers.get("X-RateLimit-Limit") == str(count)

        seen = await on_every_worker(probe, counted_under)
        assert seen.headers.get("X-RateLimit-Limit") == str(count), dict(seen.headers)
        statuses = await all_statuses(
            [http.call("GET", url, headers={"X-Limit": client}) for _ in range(CONCURRENCY)]
        )
        assert (statuses.count(200), statuses.count(429)) == (count, CONCURRENCY - count), (
            f"count {count} on {workers} worker(s): {sorted(set(statuses))}"
        )
