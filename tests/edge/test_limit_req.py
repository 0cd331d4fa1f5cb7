"""limit-req: resty.limit.req's leaky bucket through a real data plane, locally (on a clock the
test moves) and in the real Valkey (two data planes sharing it, as two nodes)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from edge_kit import make_plugin, request, route, serve_edge, upstream
from shared_kit import free_port

from gateways.edge.model.resources import ConfigRejected
from gateways.edge.model.schema import check, with_defaults
from gateways.edge.plugin import PluginEnv
from gateways.edge.plugins import REGISTRY, limit_req
from runtime.stores.kv import connect_kv

# Store-facing: runs on the session's Valkey cluster (issue 24; tests/conftest.py).
pytestmark = pytest.mark.kv_cluster


class FakeTime:
    """The plugin's clock and sleep: a delay is recorded and returns at once; with `passing`
    it moves the clock (requests sent one after the other), without it time stands still
    (requests sent together)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.passing = True
        self.delays: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.delays.append(seconds)
        if self.passing:
            self.now += seconds
        await asyncio.sleep(0)


@pytest.fixture
def fake_time(monkeypatch: pytest.MonkeyPatch) -> FakeTime:
    fake = FakeTime()
    monkeypatch.setattr(limit_req, "clock", fake.clock)
    monkeypatch.setattr(limit_req, "sleep", fake.sleep)
    return fake


def rid() -> str:
    return uuid.uuid4().hex[:12]  # buckets outlive a test: each test has its own routes


async def statuses(edge: Any, path: str, n: int, **kwargs: Any) -> list[int]:
    return [(await edge.call(path, **kwargs))[0] for _ in range(n)]


async def test_docs_rate_by_remote_address(fake_time: FakeTime) -> None:
    # APISIX's example: 1 QPS per remote address, no burst, 429.
    conf = {"rate": 1, "burst": 0, "key": "remote_addr", "key_type": "var",
            "rejected_code": 429, "policy": "local", "nodelay": True}  # fmt: skip
    async with upstream() as port, serve_edge() as edge:
        edge.apply(routes=[route(rid(), "/get", port, plugins={"limit-req": conf})])
        assert await statuses(edge, "/get", 2) == [200, 429]
        fake_time.now += 0.5  # half a request has leaked: still one too many
        assert await statuses(edge, "/get", 1) == [429]
        fake_time.now += 0.5
        assert await statuses(edge, "/get", 2) == [200, 429]
    assert fake_time.delays == []


async def test_docs_throttling_delays_the_burst(fake_time: FakeTime) -> None:
    # APISIX's example: rate 1, burst 1: three requests in a row all pass, the 2nd and 3rd
    # each delayed by a second (the 3rd arrives once the 2nd's delay is over).
    conf = {"rate": 1, "burst": 1, "key": "remote_addr", "rejected_code": 429,
            "policy": "local"}  # fmt: skip
    async with upstream() as port, serve_edge() as edge:
        edge.apply(routes=[route(rid(), "/get", port, plugins={"limit-req": conf})])
        assert await statuses(edge, "/get", 3) == [200, 200, 200]
        assert fake_time.delays == [1.0, 1.0]
        # Two more at once: excess 2 > burst 1 for the second.
        fake_time.passing = False
        results = await asyncio.gather(edge.call("/get"), edge.call("/get"))
        assert sorted(r[0] for r in results) == [200, 429]


async def test_nodelay_and_burst_zero(fake_time: FakeTime) -> None:
    async with upstream() as port, serve_edge() as edge:
        nodelay = {"rate": 1, "burst": 1, "key": "remote_addr", "nodelay": True}
        no_burst = {"rate": 1, "burst": 0, "key": "remote_addr", "rejected_code": 429}
        edge.apply(
            routes=[
                route(rid(), "/a", port, plugins={"limit-req": nodelay}),
                route(rid(), "/b", port, plugins={"limit-req": no_burst}),
            ]
        )
        # within the burst: passes at once; beyond it: the default 503, no body
        assert await statuses(edge, "/a", 3) == [200, 200, 503]
        status, body, _ = await edge.call("/a")
        assert (status, body) == (503, b"")
        assert await statuses(edge, "/b", 3) == [200, 429, 429]
    assert fake_time.delays == []


async def test_fractional_rate_delay_and_rejected_msg(fake_time: FakeTime) -> None:
    # 0.5 request/s: one request's excess takes 2 s to leak.
    conf = {"rate": 0.5, "burst": 2, "key": "http_x_user", "rejected_msg": "too many"}
    async with upstream() as port, serve_edge() as edge:
        edge.apply(routes=[route(rid(), "/r", port, plugins={"limit-req": conf})])
        alice: dict[str, Any] = {"headers": {"x-user": "alice"}}
        assert await statuses(edge, "/r", 1, **alice) == [200]
        fake_time.passing = False
        # Concurrent: the 2nd and 3rd are delayed (excess 1 and 2), the 4th is refused.
        calls = [edge.call("/r", **alice) for _ in range(3)]
        results = await asyncio.gather(*calls)
        assert sorted(r[0] for r in results) == [200, 200, 503]
        assert [r[1] for r in results if r[0] == 503] == [{"error_msg": "too many"}]
        assert sorted(fake_time.delays) == [2.0, 4.0]
        # another key has its own bucket
        assert await statuses(edge, "/r", 1, headers={"x-user": "bob"}) == [200]
        # no key header: the client address is the key
        assert await statuses(edge, "/r", 1) == [200]


async def test_docs_combination_of_remote_address_and_consumer(fake_time: FakeTime) -> None:
    fake_time.passing = False
    consumers = [
        {"username": "john", "plugins": {"key-auth": {"key": "john-key"}}},
        {"username": "jane", "plugins": {"key-auth": {"key": "jane-key"}}},
    ]
    conf = {"rate": 1, "burst": 0, "key": "$remote_addr $consumer_name",
            "key_type": "var_combination", "rejected_code": 429, "policy": "local"}  # fmt: skip
    async with upstream() as port, serve_edge() as edge:
        plugins = {"key-auth": {}, "limit-req": conf}
        edge.apply(routes=[route(rid(), "/get", port, plugins=plugins)], consumers=consumers)
        jane: dict[str, Any] = {"headers": {"apikey": "jane-key"}}
        john: dict[str, Any] = {"headers": {"apikey": "john-key"}}
        results = await asyncio.gather(edge.call("/get", **jane), edge.call("/get", **john))
        assert [r[0] for r in results] == [200, 200]
        assert await statuses(edge, "/get", 1, **john) == [429]
        assert await statuses(edge, "/get", 1, **jane) == [429]


async def test_redis_policy_is_shared_between_nodes(
    valkey_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    delays: list[float] = []

    async def record(seconds: float) -> None:
        delays.append(seconds)

    monkeypatch.setattr(limit_req, "sleep", record)
    # One request per 1000 s leaks: the store's clock moves the excess by a thousandth per
    # second, so the delays below are 1000 s and 2000 s less the test's own duration.
    conf = {"rate": 0.001, "burst": 2, "key": "remote_addr", "policy": "redis",
            "redis_host": "gw-redis"}  # fmt: skip
    route_id = rid()
    kv_one, kv_two = connect_kv(valkey_url), connect_kv(valkey_url)
    one, two = PluginEnv(), PluginEnv()
    one.kv, two.kv = kv_one, kv_two
    async with upstream() as port, serve_edge(one) as node_one, serve_edge(two) as node_two:
        for node in (node_one, node_two):
            node.apply(routes=[route(route_id, "/r", port, plugins={"limit-req": conf})])
        assert [
            (await node.call("/r"))[0] for node in (node_one, node_two, node_one, node_two)
        ] == [200, 200, 200, 503]
        assert len(delays) == 2
        assert 990 < delays[0] <= 1000 and 1990 < delays[1] <= 2000
        keys = [k async for k in kv_one.scan_iter(match=f"plugin-limit-req:*:{route_id}:*")]
        assert len(keys) == 1
        # the bucket expires once it has drained: (burst + 1) / rate seconds, plus one
        assert 3_000_000 - 60_000 < await kv_one.pttl(keys[0]) <= 3_001_000
    await kv_one.aclose()
    await kv_two.aclose()


async def test_store_down_is_500_unless_degradation() -> None:
    env = PluginEnv()
    env.kv = connect_kv(f"redis://127.0.0.1:{free_port()}/0")
    conf = {"rate": 1, "burst": 0, "key": "remote_addr", "policy": "redis",
            "redis_host": "gw-redis"}  # fmt: skip
    lenient = {**conf, "allow_degradation": True}
    async with upstream() as port, serve_edge(env) as edge:
        edge.apply(
            routes=[
                route(rid(), "/strict", port, plugins={"limit-req": conf}),
                route(rid(), "/lenient", port, plugins={"limit-req": lenient}),
            ]
        )
        status, body, _ = await edge.call("/strict")
        assert (status, body) == (500, {"error_msg": "failed to limit req"})
        assert await statuses(edge, "/lenient", 2) == [200, 200]
    await env.kv.aclose()


async def test_the_delay_is_kept_for_the_log(fake_time: FakeTime) -> None:
    plugin = make_plugin("limit-req", {"rate": 4, "burst": 1, "key": "remote_addr"})
    first, second = request(route_id=rid()), request()
    second.route_id = first.route_id
    assert await plugin.access(first) is None and "limit_req_delay" not in first.vars
    assert await plugin.access(second) is None and second.vars["limit_req_delay"] == 0.25


def test_schema_defaults_and_errors() -> None:
    schema = REGISTRY["limit-req"].schema
    filled = with_defaults(schema, {"rate": 1, "burst": 0, "key": "remote_addr"})
    assert {k: filled[k] for k in ("key_type", "policy", "rejected_code", "nodelay",
                                   "allow_degradation")} == {
        "key_type": "var", "policy": "local", "rejected_code": 503, "nodelay": False,
        "allow_degradation": False,
    }  # fmt: skip
    assert check(schema, {"rate": 1, "key": "remote_addr"}) == 'property "burst" is required'
    assert check(schema, {"rate": 1, "burst": 0}) == 'property "key" is required'
    assert check(schema, {"rate": 0, "burst": 0, "key": "remote_addr"}) == (
        'property "rate" validation failed: expected 0 to be greater than 0'
    )
    assert check(schema, {"rate": 1, "burst": -1, "key": "remote_addr"}) == (
        'property "burst" validation failed: expected -1 to be at least 0'
    )
    assert check(schema, {"rate": 1, "burst": 0, "key": "k", "key_type": "constant"}) == (
        'property "key_type" validation failed: matches none of the enum values '
        '["var", "var_combination"]'
    )
    assert check(schema, {"rate": 1, "burst": 0, "key": "k", "rejected_code": 600}) == (
        'property "rejected_code" validation failed: expected 600 to be at most 599'
    )
    assert check(schema, {"rate": 1, "burst": 0, "key": "k", "rejected_msg": ""}) == (
        'property "rejected_msg" validation failed: string too short, expected at least 1, got 0'
    )
    assert check(schema, {"rate": 1, "burst": 0, "key": "k", "policy": "redis"}) == (
        'property "redis_host" is required'
    )
    assert check(schema, {"rate": 0.5, "burst": 1.5, "key": "k"}) is None  # numbers


async def test_the_data_plane_refuses_a_bad_configuration() -> None:
    async with serve_edge() as edge:
        with pytest.raises(ConfigRejected) as refused:
            edge.apply(routes=[route(rid(), "/r", 1, plugins={"limit-req": {"rate": 1}})])
    assert str(refused.value).endswith(
        'failed to check the configuration of plugin limit-req err: property "burst" is required'
    )
