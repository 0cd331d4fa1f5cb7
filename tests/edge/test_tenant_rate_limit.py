"""tenant-rate-limit against the real Valkey: the sliding window, override precedence,
missing tenants, fail-open, and exactness under a burst from several processes."""

from __future__ import annotations

import asyncio
import multiprocessing
import time
import uuid
from collections.abc import AsyncIterator

import pytest
from edge_kit import burst, make_plugin, request
from redis.asyncio.cluster import RedisCluster
from shared_kit import free_port

from gateways.edge.keys import rate_limit_override, rate_limit_window
from gateways.edge.metrics import EdgeMetrics
from gateways.edge.plugin import PluginEnv
from gateways.edge.plugins.tenant_rate_limit import LIMITER
from runtime.stores.kv import connect_kv

# Store-facing: runs on the session's Valkey cluster (issue 24; tests/conftest.py).
pytestmark = pytest.mark.kv_cluster


@pytest.fixture(params=["cluster", "single"])
async def env(request: pytest.FixtureRequest, valkey_url: str) -> AsyncIterator[PluginEnv]:
    """The cluster's client (the limiter's calls through redis-py's cluster routing) and one
    node's (its calls sent straight through the batcher, as in `strata up`)."""
    url = valkey_url if request.param == "cluster" else request.getfixturevalue("single_valkey_url")
    env = PluginEnv()
    env.kv = connect_kv(url)
    env.metrics = EdgeMetrics()
    yield env
    await env.kv.aclose()


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


async def test_window_admits_the_limit_then_429_with_headers(env: PluginEnv) -> None:
    plugin = make_plugin("tenant-rate-limit", {"default_count": 3, "time_window": 30}, env)
    t = tenant()
    for left in (2, 1, 0):
        ctx = request(headers={"X-Tenant-ID": t})
        assert await plugin.access(ctx) is None
        assert ctx.tenant_id == t
        plugin.header_filter(ctx)
        assert ctx.response_headers["X-RateLimit-Remaining"] == str(left)
        assert ctx.response_headers["X-RateLimit-Limit"] == "3"
        assert ctx.response_headers["X-Tenant-ID"] == t
    reply = await plugin.access(request(headers={"X-Tenant-ID": t}))
    assert reply.status == 429
    assert reply.body == {"error_msg": "Rate limit exceeded for tenant"}
    assert reply.headers["X-RateLimit-Remaining"] == "0"
    assert reply.headers["X-Tenant-ID"] == t
    reset = int(reply.headers["X-RateLimit-Reset"])
    assert time.time() + 25 < reset <= time.time() + 31  # a Unix timestamp, not seconds left
    # The state is the spec's sorted set.
    assert await env.kv.zcard(rate_limit_window(t, "r1", 30)) == 3
    # Another route has its own window.
    assert await plugin.access(request(headers={"X-Tenant-ID": t}, route_id="r2")) is None


async def test_concurrent_requests_are_counted_by_one_call_each_with_its_own_count(
    env: PluginEnv,
) -> None:
    """Requests of one tenant and route arriving together share one script call: the first
    `limit` are admitted, in order, each with its own remaining count; the rest get 429 with
    the limit's headers; the set holds one member per admitted request."""
    plugin = make_plugin("tenant-rate-limit", {"default_count": 5, "time_window": 30}, env)
    t, other = tenant(), tenant()
    assert await plugin.access(request(headers={"X-Tenant-ID": t})) is None  # 1 counted
    contexts = [request(headers={"X-Tenant-ID": t}) for _ in range(7)]
    replies = await asyncio.gather(
        *(plugin.access(ctx) for ctx in contexts),
        plugin.access(request(headers={"X-Tenant-ID": other})),  # its own group
    )
    assert replies[-1] is None
    admitted = [ctx for ctx, reply in zip(contexts, replies, strict=False) if reply is None]
    assert admitted == contexts[:4]
    remaining = [ctx.vars["tenant-rate-limit"]["X-RateLimit-Remaining"] for ctx in admitted]
    assert remaining == ["3", "2", "1", "0"]
    for reply in replies[4:7]:
        assert reply.status == 429
        assert reply.headers["X-RateLimit-Remaining"] == "0"
        assert reply.headers["X-RateLimit-Limit"] == "5"
    scores = await env.kv.zrange(rate_limit_window(t, "r1", 30), 0, -1, withscores=True)
    assert len(scores) == 5
    assert len({score for _, score in scores[1:]}) == 1  # one call: one TIME for the four
    assert await env.kv.zcard(rate_limit_window(other, "r1", 30)) == 1


async def test_sliding_window_frees_slots(env: PluginEnv) -> None:
    plugin = make_plugin("tenant-rate-limit", {"default_count": 2, "time_window": 1}, env)
    t = tenant()
    assert await plugin.access(request(headers={"x-tenant-id": t})) is None
    assert await plugin.access(request(headers={"x-tenant-id": t})) is None
    assert (await plugin.access(request(headers={"x-tenant-id": t}))).status == 429
    await asyncio.sleep(1.05)
    assert await plugin.access(request(headers={"x-tenant-id": t})) is None


async def test_override_wins_over_default_count(env: PluginEnv) -> None:
    plugin = make_plugin("tenant-rate-limit", {"default_count": 100}, env)
    plain, as_json, with_window = tenant(), tenant(), tenant()
    await env.kv.set(rate_limit_override(plain), "1")
    await env.kv.set(rate_limit_override(as_json), '{"limit": 2}')
    await env.kv.set(rate_limit_override(with_window), '{"limit": 1, "window": "2m"}')
    for t, limit in ((plain, 1), (as_json, 2), (with_window, 1)):
        for _ in range(limit):
            assert await plugin.access(request(headers={"x-tenant-id": t})) is None
        reply = await plugin.access(request(headers={"x-tenant-id": t}))
        assert reply.status == 429 and reply.headers["X-RateLimit-Limit"] == str(limit)
    assert await env.kv.zcard(rate_limit_window(with_window, "r1", 120)) == 1


async def test_route_override_wins_over_tenant_override_on_its_route(env: PluginEnv) -> None:
    plugin = make_plugin("tenant-rate-limit", {"default_count": 100}, env)
    t = tenant()
    await env.kv.set(rate_limit_override(t), '{"limit": 3, "window": "60s"}')
    await env.kv.set(rate_limit_override(t, "r1"), '{"limit": 1, "window": "2m"}')
    assert await plugin.access(request(headers={"x-tenant-id": t}, route_id="r1")) is None
    reply = await plugin.access(request(headers={"x-tenant-id": t}, route_id="r1"))
    assert reply.status == 429 and reply.headers["X-RateLimit-Limit"] == "1"
    assert await env.kv.zcard(rate_limit_window(t, "r1", 120)) == 1  # the override's window
    # Another route of the tenant keeps the tenant override.
    for _ in range(3):
        assert await plugin.access(request(headers={"x-tenant-id": t}, route_id="r2")) is None
    reply = await plugin.access(request(headers={"x-tenant-id": t}, route_id="r2"))
    assert reply.status == 429 and reply.headers["X-RateLimit-Limit"] == "3"
    # A change applies to the next request.
    await env.kv.set(rate_limit_override(t, "r1"), "2")
    assert await plugin.access(request(headers={"x-tenant-id": t}, route_id="r1")) is None


async def test_a_changed_override_window_is_counted_in_its_own_set(env: PluginEnv) -> None:
    """The script is told which window's set it may write (a cluster runs a script on the
    keys it was given only): a window it was not told is asked for, and counted in its set."""
    plugin = make_plugin("tenant-rate-limit", {"default_count": 100, "time_window": 60}, env)
    other = make_plugin("tenant-rate-limit", {"default_count": 100, "time_window": 60}, env)
    t = tenant()
    await env.kv.set(rate_limit_override(t), '{"limit": 2, "window": "2m"}')
    for window, limit in ((120, 2), (180, 1), (60, 3), (120, 2)):
        await env.kv.set(rate_limit_override(t), f'{{"limit": {limit}, "window": {window}}}')
        for n in range(limit):
            assert await plugin.access(request(headers={"x-tenant-id": t})) is None, (window, n)
        reply = await plugin.access(request(headers={"x-tenant-id": t}))
        assert reply.status == 429 and reply.headers["X-RateLimit-Limit"] == str(limit)
        refused = await other.access(request(headers={"x-tenant-id": t}))  # another worker
        assert refused.status == 429, window
        assert await env.kv.zcard(rate_limit_window(t, "r1", window)) == limit
        await env.kv.delete(rate_limit_window(t, "r1", window))
    assert plugin.override_windows == {(t, "r1"): 120}
    assert env.metrics is not None
    assert env.metrics.rate_limit_fail_open.labels(plugin.name)._value.get() == 0


async def test_tenant_sources_and_missing_tenant(env: PluginEnv) -> None:
    plugin = make_plugin("tenant-rate-limit", {}, env)
    reply = await plugin.access(request())
    assert reply.status == 401
    mine, other, named = tenant(), tenant(), tenant()
    ctx = request()
    ctx.tenant_id = mine  # openid-connect's verified claim
    assert await plugin.access(ctx) is None
    assert ctx.vars["tenant-rate-limit"]["X-Tenant-ID"] == mine
    assert ctx.upstream_headers["x-tenant-id"] == mine  # upstream sees what was counted
    spoofed = request(headers={"x-tenant-id": other})
    spoofed.tenant_id = mine
    refused = await plugin.access(spoofed)
    assert refused.status == 403 and other in refused.body["error_msg"]
    agreeing = request(headers={"x-tenant-id": mine})
    agreeing.tenant_id = mine
    assert await plugin.access(agreeing) is None
    admin = request(headers={"x-tenant-id": named})
    admin.tenant_id = "platform"
    admin.jwt_claims = {"tenant_id": "platform", "realm_access": {"roles": ["platform-admin"]}}
    assert await plugin.access(admin) is None  # administrators act for the tenant they name
    assert admin.tenant_id == named and admin.upstream_headers["x-tenant-id"] == named
    header_only = request(headers={"x-tenant-id": other})  # no token: /smoke/*
    assert await plugin.access(header_only) is None
    assert header_only.tenant_id == other
    assert (await plugin.access(request(headers={"x-tenant-id": "bad tenant!"}))).status == 401
    lenient = make_plugin(
        "tenant-rate-limit", {"allow_missing_tenant": True, "missing_tenant_code": 400}, env
    )
    assert await lenient.access(request()) is None
    strict = make_plugin("tenant-rate-limit", {"missing_tenant_code": 400}, env)
    assert (await strict.access(request())).status == 400


async def test_an_api_key_consumer_counts_for_its_tenant_group(env: PluginEnv) -> None:
    """A key-auth consumer carries no token: its consumer group (id = tenant id) is its tenant,
    and a header naming another tenant is refused as for a token."""
    plugin = make_plugin("tenant-rate-limit", {}, env)
    mine, other = tenant(), tenant()
    await env.kv.set(rate_limit_override(mine), '{"limit": 1, "window": "60s"}')
    ctx = request()
    ctx.consumer, ctx.consumer_name = {"username": "k1", "group_id": mine}, "k1"
    assert await plugin.access(ctx) is None
    assert ctx.tenant_id == mine and ctx.upstream_headers["x-tenant-id"] == mine
    again = request()
    again.consumer, again.consumer_name = {"username": "k1", "group_id": mine}, "k1"
    assert (await plugin.access(again)).status == 429  # the tenant's override: 1 per window
    spoofed = request(headers={"x-tenant-id": other})
    spoofed.consumer, spoofed.consumer_name = {"username": "k1", "group_id": mine}, "k1"
    assert (await plugin.access(spoofed)).status == 403
    loose = request(headers={"x-tenant-id": other})  # a consumer without a group: the header
    loose.consumer, loose.consumer_name = {"username": "k2"}, "k2"
    assert await plugin.access(loose) is None and loose.tenant_id == other


async def test_script_reloads_after_flush(env: PluginEnv) -> None:
    plugin = make_plugin("tenant-rate-limit", {}, env)
    await env.kv.script_flush()
    who = tenant()
    assert await plugin.access(request(headers={"x-tenant-id": who})) is None
    if isinstance(env.kv, RedisCluster):  # loaded again on the tenant's node (only)
        node = env.kv.get_node_from_key(rate_limit_override(who))
        exists = await env.kv.execute_command("SCRIPT EXISTS", LIMITER.sha, target_nodes=node)
    else:
        exists = await env.kv.script_exists(LIMITER.sha)
    assert exists == [True]


async def test_fails_open_when_the_store_is_down() -> None:
    env = PluginEnv()
    env.kv = connect_kv(f"redis://127.0.0.1:{free_port()}/0")  # nothing listens there
    env.metrics = EdgeMetrics()
    plugin = make_plugin("tenant-rate-limit", {"default_count": 1, "redis_timeout": 200}, env)
    started = time.perf_counter()
    for _ in range(3):
        assert await plugin.access(request(headers={"x-tenant-id": tenant()})) is None
    assert time.perf_counter() - started < 1
    failed = env.metrics.rate_limit_fail_open.labels("tenant-rate-limit")._value.get()
    assert failed == 3
    await env.kv.aclose()


def test_exact_under_a_multi_process_burst(valkey_url: str) -> None:
    t, route = tenant(), f"burst-{uuid.uuid4().hex[:6]}"
    start = time.time() + 2.0
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        admitted = pool.map(burst, [(valkey_url, t, route, 40, start)] * 4)
    assert sum(admitted) == 50, admitted  # 160 attempts, limit 50
