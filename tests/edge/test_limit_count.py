"""limit-count: APISIX's fixed window, locally and in the real Valkey."""

from __future__ import annotations

import uuid

import pytest
from edge_kit import make_plugin, request
from shared_kit import free_port

from gateways.edge.model.schema import check
from gateways.edge.plugin import PluginEnv
from gateways.edge.plugins import REGISTRY
from runtime.stores.kv import connect_kv

# Store-facing: runs on the session's Valkey cluster (issue 24; tests/conftest.py).
pytestmark = pytest.mark.kv_cluster


async def test_local_window_headers_and_rejection() -> None:
    plugin = make_plugin("limit-count", {"count": 2, "time_window": 60})
    for left in ("1", "0"):
        ctx = request()
        assert await plugin.access(ctx) is None
        plugin.header_filter(ctx)
        assert ctx.response_headers["X-RateLimit-Remaining"] == left
        assert ctx.response_headers["X-RateLimit-Limit"] == "2"
        assert 0 < int(ctx.response_headers["X-RateLimit-Reset"]) <= 60  # seconds left
    reply = await plugin.access(request())
    assert reply.status == 503 and reply.headers["X-RateLimit-Remaining"] == "0"
    assert await plugin.access(request(client_ip="10.0.0.2")) is None  # another key


async def test_key_types_and_rejected_msg() -> None:
    by_header = make_plugin(
        "limit-count",
        {"count": 1, "time_window": 60, "key": "http_x_user", "rejected_code": 429,
         "rejected_msg": "slow down"},
    )  # fmt: skip
    assert await by_header.access(request(headers={"x-user": "a"})) is None
    reply = await by_header.access(request(headers={"x-user": "a"}))
    assert (reply.status, reply.body) == (429, {"error_msg": "slow down"})
    assert await by_header.access(request(headers={"x-user": "b"})) is None
    combo = make_plugin(
        "limit-count",
        {"count": 1, "time_window": 60, "key_type": "var_combination",
         "key": "$consumer_name $remote_addr"},
    )  # fmt: skip
    ctx = request()
    ctx.consumer_name = "jack"
    assert await combo.access(ctx) is None
    assert (await combo.access(ctx)).status == 503


async def test_redis_policy_shares_the_counter(valkey_url: str) -> None:
    env = PluginEnv()
    env.kv = connect_kv(valkey_url)
    conf = {"count": 3, "time_window": 60, "policy": "redis", "redis_host": "gw-redis",
            "key_type": "constant", "key": uuid.uuid4().hex}  # fmt: skip
    one, two = make_plugin("limit-count", conf, env), make_plugin("limit-count", conf, env)
    results = [await p.access(request()) for p in (one, two, one, two)]
    assert results[:3] == [None, None, None] and results[3].status == 503
    assert 0 < int(results[3].headers["X-RateLimit-Reset"]) <= 60
    await env.kv.aclose()


async def test_store_down_is_500_unless_degradation() -> None:
    env = PluginEnv()
    env.kv = connect_kv(f"redis://127.0.0.1:{free_port()}/0")
    conf = {"count": 1, "time_window": 60, "policy": "redis", "redis_host": "gw-redis"}
    reply = await make_plugin("limit-count", conf, env).access(request())
    assert (reply.status, reply.body) == (500, {"error_msg": "failed to limit count"})
    lenient = make_plugin("limit-count", {**conf, "allow_degradation": True}, env)
    assert await lenient.access(request()) is None
    await env.kv.aclose()


def test_schema() -> None:
    schema = REGISTRY["limit-count"].schema
    assert check(schema, {"count": 1}) == 'property "time_window" is required'
    assert check(schema, {"count": 1, "time_window": 1, "policy": "redis"}) == (
        'property "redis_host" is required'
    )
    assert check(schema, {"count": 0, "time_window": 1}) == (
        'property "count" validation failed: expected 0 to be greater than 0'
    )
