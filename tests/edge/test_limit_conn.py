"""limit-conn: requests in flight per key through a real data plane, with upstreams that hold
their requests until the test lets them go, locally and in the real Valkey."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiohttp import web
from edge_kit import make_plugin, request, route, serve_edge, upstream
from shared_kit import free_port

from gateways.edge.model.schema import check, with_defaults
from gateways.edge.plugin import PluginEnv
from gateways.edge.plugins import REGISTRY, limit_conn
from runtime.stores.kv import connect_kv

# Store-facing: runs on the session's Valkey cluster (issue 24; tests/conftest.py).
pytestmark = pytest.mark.kv_cluster


class Held:
    """An upstream whose `/hold...` requests wait for `release()`; others answer at once."""

    def __init__(self) -> None:
        self.arrived = 0
        self.released = asyncio.Event()
        self._arrivals = asyncio.Condition()

    async def handle(self, request: web.Request) -> web.Response:
        if request.path.startswith("/hold"):
            async with self._arrivals:
                self.arrived += 1
                self._arrivals.notify_all()
            await self.released.wait()
        return web.json_response({"ok": True})

    async def until_arrived(self, n: int) -> None:
        async with self._arrivals:
            await asyncio.wait_for(self._arrivals.wait_for(lambda: self.arrived >= n), 10)

    def release(self) -> None:
        self.released.set()


@asynccontextmanager
async def held_upstream() -> AsyncIterator[tuple[Held, int]]:
    held = Held()
    async with upstream(held.handle) as port:
        try:
            yield held, port
        finally:
            held.release()  # a failed test leaves no request hanging


@pytest.fixture
def delays(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The delays limit-conn applies, recorded; the requests go on at once."""
    applied: list[float] = []

    async def record(seconds: float) -> None:
        applied.append(seconds)

    monkeypatch.setattr(limit_conn, "sleep", record)
    return applied


def rid() -> str:
    return uuid.uuid4().hex[:12]


def in_flight(route_id: str) -> int:
    """This worker's local count of the route's requests in flight."""
    return sum(n for key, n in limit_conn._in_flight.items() if f":{route_id}:" in key)


async def wait_for(condition: Any) -> None:
    for _ in range(200):
        if await condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not met")


async def burst_of(edge: Any, held: Held, n: int, admitted: int, path: str = "/hold") -> list[int]:
    """`n` requests at once; once `admitted` of them reach the upstream, all are let go."""
    calls = asyncio.gather(*(edge.call(path) for _ in range(n)))
    await held.until_arrived(admitted)
    held.release()
    results = await calls
    held.released.clear()
    held.arrived = 0
    return sorted(status for status, _, _ in results)


async def test_docs_limit_by_remote_address(delays: list[float]) -> None:
    # APISIX's example: 2 concurrent requests and 1 delayed, 429 beyond.
    conf = {"conn": 2, "burst": 1, "default_conn_delay": 0.1, "key_type": "var",
            "key": "remote_addr", "policy": "local", "rejected_code": 429}  # fmt: skip
    route_id = rid()
    async with held_upstream() as (held, port), serve_edge() as edge:
        edge.apply(routes=[route(route_id, "/hold", port, plugins={"limit-conn": conf})])
        assert await burst_of(edge, held, 5, admitted=3) == [200, 200, 200, 429, 429]
        assert delays == [0.1]  # the third: ceil(1 / 2) unit delays
        assert in_flight(route_id) == 0  # every admitted request was released once
        assert await burst_of(edge, held, 5, admitted=3) == [200, 200, 200, 429, 429]
        assert in_flight(route_id) == 0


async def test_delay_grows_with_the_excess_and_learns_the_latency(delays: list[float]) -> None:
    learning = {"conn": 1, "burst": 3, "default_conn_delay": 5, "key": "remote_addr"}
    fixed = {**learning, "only_use_default_delay": True}
    async with held_upstream() as (held, port), serve_edge() as edge:
        edge.apply(
            routes=[
                route(rid(), "/hold/learning", port, plugins={"limit-conn": learning}),
                route(rid(), "/hold/fixed", port, plugins={"limit-conn": fixed}),
            ]
        )
        for path in ("/hold/learning", "/hold/fixed"):
            assert await burst_of(edge, held, 5, admitted=4, path=path) == [200] * 4 + [503]
            assert sorted(delays) == [5.0, 10.0, 15.0]  # 2, 3, 4 in flight for a conn of 1
            delays.clear()
        # A second round: the learning plugin's unit delay moved towards the requests'
        # latency (far below 5 s); the other one still delays by default_conn_delay.
        assert await burst_of(edge, held, 2, admitted=2, path="/hold/learning") == [200, 200]
        assert len(delays) == 1 and delays[0] < 5.0
        delays.clear()
        assert await burst_of(edge, held, 2, admitted=2, path="/hold/fixed") == [200, 200]
        assert delays == [5.0]


async def test_released_once_after_a_later_refusal_or_an_upstream_failure(
    delays: list[float],
) -> None:
    conf = {"conn": 1, "burst": 0, "default_conn_delay": 1, "key": "remote_addr"}
    counted = {"limit-conn": conf, "limit-count": {"count": 1, "time_window": 60,
                                                   "rejected_code": 429}}  # fmt: skip
    refused_later, unreachable = rid(), rid()
    async with held_upstream() as (held, port), serve_edge() as edge:
        edge.apply(
            routes=[
                route(refused_later, "/hold", port, plugins=counted),
                route(unreachable, "/down", free_port(), plugins={"limit-conn": conf}),
            ]
        )
        held.release()
        # limit-count (after limit-conn) refuses: limit-conn's count is released each time
        assert [(await edge.call("/hold"))[0] for _ in range(3)] == [200, 429, 429]
        assert in_flight(refused_later) == 0
        # the upstream cannot be reached: released too
        assert [(await edge.call("/down"))[0] for _ in range(3)] == [502, 502, 502]
        assert in_flight(unreachable) == 0


async def test_refused_requests_are_not_counted(delays: list[float]) -> None:
    conf = {"conn": 1, "burst": 0, "default_conn_delay": 1, "key": "remote_addr",
            "rejected_msg": "busy"}  # fmt: skip
    route_id = rid()
    async with held_upstream() as (held, port), serve_edge() as edge:
        edge.apply(routes=[route(route_id, "/hold", port, plugins={"limit-conn": conf})])
        first = asyncio.ensure_future(edge.call("/hold"))
        await held.until_arrived(1)
        status, body, _ = await edge.call("/hold")
        assert (status, body) == (503, {"error_msg": "busy"})
        assert in_flight(route_id) == 1
        held.release()
        assert (await first)[0] == 200
        assert in_flight(route_id) == 0
        held.released.clear()
        held.arrived = 0
        # were the refusal released as well, the count would be negative and admit two
        assert await burst_of(edge, held, 3, admitted=1) == [200, 503, 503]


async def test_a_client_that_leaves_releases_its_request(delays: list[float]) -> None:
    conf = {"conn": 1, "burst": 0, "default_conn_delay": 1, "key": "remote_addr"}
    route_id = rid()
    async with held_upstream() as (held, port), serve_edge() as edge:
        edge.apply(routes=[route(route_id, "/*", port, plugins={"limit-conn": conf})])
        _, writer = await asyncio.open_connection("127.0.0.1", edge.port)
        writer.write(b"GET /hold HTTP/1.1\r\nHost: edge\r\n\r\n")
        await held.until_arrived(1)
        assert in_flight(route_id) == 1
        writer.close()  # the client gives up while the upstream still works on it

        async def released() -> bool:
            return in_flight(route_id) == 0

        await wait_for(released)
        assert (await edge.call("/free"))[0] == 200


async def test_a_client_that_leaves_while_delayed_releases_its_request() -> None:
    conf = {"conn": 1, "burst": 1, "default_conn_delay": 1, "key": "remote_addr"}
    plugin = make_plugin("limit-conn", conf)
    route_id = rid()
    first, second = request(route_id=route_id), request(route_id=route_id)
    assert await plugin.access(first) is None
    waiting = asyncio.ensure_future(plugin.access(second))  # delayed by a second
    await asyncio.sleep(0.01)
    assert in_flight(route_id) == 2
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert in_flight(route_id) == 1
    plugin.log(second)  # the data plane's log phase after all: nothing left to release
    assert in_flight(route_id) == 1
    plugin.log(first)
    assert in_flight(route_id) == 0
    assert second.vars["limit_conn_delay"] == 1


async def test_redis_policy_is_shared_between_nodes(valkey_url: str, delays: list[float]) -> None:
    conf = {"conn": 1, "burst": 1, "default_conn_delay": 0.1, "rejected_code": 429,
            "key_type": "var", "key": "remote_addr", "policy": "redis",
            "redis_host": "192.168.0.2", "redis_port": 6379, "redis_database": 1,
            "key_ttl": 60}  # fmt: skip
    route_id = rid()
    one, two = PluginEnv(), PluginEnv()
    one.kv, two.kv = connect_kv(valkey_url), connect_kv(valkey_url)
    async with (
        held_upstream() as (held, port),
        serve_edge(one) as node_one,
        serve_edge(two) as node_two,
    ):
        for node in (node_one, node_two):
            node.apply(routes=[route(route_id, "/hold", port, plugins={"limit-conn": conf})])
        calls = asyncio.gather(node_one.call("/hold"), node_two.call("/hold"))
        await held.until_arrived(2)
        [key] = [k async for k in one.kv.scan_iter(match=f"plugin-limit-conn:*:{route_id}:*")]
        assert await one.kv.zcard(key) == 2
        assert 0 < await one.kv.ttl(key) <= 60
        [(_, expiry)] = await one.kv.zrange(key, 0, 0, withscores=True)
        now = (await one.kv.time())[0]
        assert now < expiry <= now + 60  # a lost release expires after key_ttl
        status, _, _ = await node_one.call("/hold")
        assert status == 429  # a third, on either node
        held.release()
        assert sorted(r[0] for r in await calls) == [200, 200]
        assert delays == [0.1]

        async def released() -> bool:
            return await one.kv.zcard(key) == 0

        await wait_for(released)  # released after the responses, by both nodes
    await one.kv.aclose()
    await two.kv.aclose()


async def test_store_down_is_500_unless_degradation(delays: list[float]) -> None:
    env = PluginEnv()
    env.kv = connect_kv(f"redis://127.0.0.1:{free_port()}/0")
    conf = {"conn": 1, "burst": 0, "default_conn_delay": 1, "key": "remote_addr",
            "policy": "redis", "redis_host": "gw-redis"}  # fmt: skip
    lenient = {**conf, "allow_degradation": True}
    async with upstream() as port, serve_edge(env) as edge:
        edge.apply(
            routes=[
                route(rid(), "/strict", port, plugins={"limit-conn": conf}),
                route(rid(), "/lenient", port, plugins={"limit-conn": lenient}),
            ]
        )
        status, body, _ = await edge.call("/strict")
        assert (status, body) == (500, {"error_msg": "failed to limit conn"})
        assert [(await edge.call("/lenient"))[0] for _ in range(2)] == [200, 200]
    await env.kv.aclose()


def test_schema_defaults_and_errors() -> None:
    schema = REGISTRY["limit-conn"].schema
    base = {"conn": 1, "burst": 0, "default_conn_delay": 0.1, "key": "remote_addr"}
    filled = with_defaults(schema, base)
    assert {k: filled[k] for k in ("only_use_default_delay", "key_type", "key_ttl", "policy",
                                   "rejected_code", "allow_degradation")} == {
        "only_use_default_delay": False, "key_type": "var", "key_ttl": 3600, "policy": "local",
        "rejected_code": 503, "allow_degradation": False,
    }  # fmt: skip
    assert check(schema, base) is None
    for missing in ("conn", "burst", "default_conn_delay", "key"):
        conf = {k: v for k, v in base.items() if k != missing}
        assert check(schema, conf) == f'property "{missing}" is required'
    assert check(schema, {**base, "conn": 0}) == (
        'property "conn" validation failed: expected 0 to be greater than 0'
    )
    assert check(schema, {**base, "conn": 1.5}) == (
        'property "conn" validation failed: wrong type: expected integer, got number'
    )
    assert check(schema, {**base, "default_conn_delay": 0}) == (
        'property "default_conn_delay" validation failed: expected 0 to be greater than 0'
    )
    assert check(schema, {**base, "burst": -1}) == (
        'property "burst" validation failed: expected -1 to be at least 0'
    )
    assert check(schema, {**base, "policy": "redis"}) == 'property "redis_host" is required'
    assert check(schema, {**base, "rejected_code": 199}) == (
        'property "rejected_code" validation failed: expected 199 to be at least 200'
    )
